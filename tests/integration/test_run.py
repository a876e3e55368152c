# SPDX-License-Identifier: Apache-2.0
"""run/exec semantics through the CLI and POST /run, /run_streaming:
exit codes, signals, streams, environment, cwd, stdin, timeouts, output
caps, streaming order and disconnects, concurrency."""
import hashlib
import json
import os
import signal
import threading
import time
import uuid

import pytest

from conftest import UnixHTTPConnection, proc_status_kib, sse_events, wait_until

DEFAULT_ENV = {"PATH", "HOME", "LANG", "USER"}


def env_of(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


# ---- exit codes and signals ----

@pytest.mark.parametrize("code", [0, 1, 42, 255])
def test_exit_code_api_and_cli(hutch, sandbox, code):
    res = sandbox.run(f"exit {code}")
    assert res["status"] == "exited"
    assert res["exit_code"] == code
    assert res["signal"] is None and res["signal_name"] is None
    assert res["timed_out"] is False
    r = hutch("exec", sandbox.id, "--", "sh", "-c", f"exit {code}")
    assert r.returncode == code, r.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGSEGV])
def test_death_by_signal(hutch, sandbox, sig):
    res = sandbox.run(f"kill -{int(sig)} $$")
    assert res["status"] == "signaled", res
    assert res["exit_code"] is None
    assert res["signal"] == int(sig)
    assert res["signal_name"] == sig.name
    assert res["timed_out"] is False
    assert f"signal {int(sig)}" in res["message"]
    r = hutch("exec", sandbox.id, "--", "sh", "-c", f"kill -{int(sig)} $$")
    assert r.returncode == 128 + int(sig), r.stderr
    assert sig.name.encode() in r.stderr


def test_command_not_found_and_not_executable(hutch, sandbox):
    res = sandbox.run(argv=["no-such-program-x"])
    assert res["exit_code"] == 127
    assert "cannot execute 'no-such-program-x'" in res["stderr"]
    sandbox.sh("printf 'echo hi' > /workspace/noexec && chmod 644 /workspace/noexec")
    res = sandbox.run(argv=["/workspace/noexec"])
    assert res["exit_code"] == 126, res
    r = hutch("exec", sandbox.id, "--", "no-such-program-x")
    assert r.returncode == 127
    assert b"no-such-program-x" in r.stderr


# ---- stdout and stderr ----

def test_stdout_stderr_kept_apart(hutch, sandbox):
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; done"
    res = sandbox.run(script)
    assert res["stdout"] == "out1\nout2\nout3\n"
    assert res["stderr"] == "err1\nerr2\nerr3\n"
    assert res["stdout_truncated"] is False and res["stderr_truncated"] is False
    r = hutch("exec", sandbox.id, "--", "sh", "-c", script)
    assert r.returncode == 0
    assert r.stdout == b"out1\nout2\nout3\n"
    assert r.stderr == b"err1\nerr2\nerr3\n"


def test_argv_is_not_shell_parsed(sandbox):
    res = sandbox.run(argv=["printf", "%s|", "a b", "$HOME", "*", ";true"])
    assert res["stdout"] == "a b|$HOME|*|;true|"


def test_invalid_utf8_output_is_replaced(sandbox):
    res = sandbox.run(r"printf 'ok\377\376end'")
    assert res["stdout"] == "ok\ufffd\ufffdend"


# ---- environment ----

def test_env_defaults_only_and_host_env_does_not_leak(hutch, sandbox):
    leak = "HUTCH_LEAK_" + uuid.uuid4().hex
    r = hutch("exec", sandbox.id, "--", "env", env={leak: "secret-value"})
    assert r.returncode == 0, r.stderr
    env = env_of(r.stdout.decode())
    assert set(env) == DEFAULT_ENV, env
    assert env["HOME"] == "/home/appuser" and env["USER"] == "appuser"
    assert env["LANG"] == "C.UTF-8"
    assert b"secret-value" not in r.stdout
    # The one-shot form creates the supervisor from a CLI that has the
    # variable: neither the command, nor the supervisor, nor init keeps it.
    r = hutch("run", "--", "env", env={leak: "secret-value"})
    assert r.returncode == 0, r.stderr
    assert set(env_of(r.stdout.decode())) == DEFAULT_ENV
    sb2 = hutch("create", env={leak: "secret-value"})
    sid = sb2.stdout.decode().strip()
    try:
        st = json.loads(hutch("inspect", sid).stdout)
        for pid in (st["supervisor_pid"], st["init_pid"]):
            with open(f"/proc/{pid}/environ", "rb") as f:
                assert b"secret-value" not in f.read()
    finally:
        hutch("rm", sid)


def test_env_set_and_override(hutch, sandbox):
    res = sandbox.run(argv=["env"], env={"FOO": "bar baz", "HOME": "/tmp", "EMPTY": ""})
    env = env_of(res["stdout"])
    assert env == {**env, "FOO": "bar baz", "HOME": "/tmp", "EMPTY": ""}
    assert set(env) == DEFAULT_ENV | {"FOO", "EMPTY"}
    r = hutch("exec", sandbox.id, "--env", "A=1", "-e", "B=x=y", "--env", "A=2", "--", "env")
    env = env_of(r.stdout.decode())
    assert env["A"] == "2" and env["B"] == "x=y"
    assert set(env) == DEFAULT_ENV | {"A", "B"}


def test_env_invalid_name_is_refused(sandbox):
    status, res = sandbox.api("POST", "/v1/run", {"cmd": "true", "env": {"1BAD": "x"}})
    assert status == 400 and res["error"]["code"] == "invalid_request"
    assert "1BAD" in res["error"]["message"]
    status, res = sandbox.api("POST", "/v1/run", {"cmd": "true", "env": {"A=B": "x"}})
    assert status == 400


# ---- cwd ----

def test_cwd_default_relative_absolute(hutch, sandbox):
    assert sandbox.sh("pwd") == "/workspace\n"
    sandbox.sh("mkdir -p /workspace/sub/dir")
    assert sandbox.run("pwd", cwd="sub/dir")["stdout"] == "/workspace/sub/dir\n"
    assert sandbox.run("pwd", cwd="/tmp")["stdout"] == "/tmp\n"
    r = hutch("exec", sandbox.id, "--cwd", "sub", "--", "pwd")
    assert r.stdout == b"/workspace/sub\n"


def test_cwd_missing_is_126_with_message(hutch, sandbox):
    res = sandbox.run("echo should-not-run", cwd="nope")
    assert res["exit_code"] == 126
    assert res["stdout"] == ""
    assert "cannot change directory to '/workspace/nope'" in res["stderr"]
    r = hutch("exec", sandbox.id, "--cwd", "/nope", "--", "true")
    assert r.returncode == 126
    assert b"cannot change directory to '/nope'" in r.stderr


# ---- stdin ----

def test_cli_passes_stdin(hutch, sandbox):
    data = b"".join(b"line %d\n" % i for i in range(200000))  # ~2.2 MB
    r = hutch("exec", "-i", sandbox.id, "--", "sha256sum", input=data)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
    r = hutch("exec", sandbox.id, "--", "wc", "-c", input=b"ignored")
    assert r.stdout.strip() == b"0"
    r = hutch("run", "-i", "--", "cat", input=b"to run\n")
    assert r.stdout == b"to run\n"


def test_api_stdin_and_no_stdin_is_eof(sandbox):
    assert sandbox.run("cat", stdin="abc\ndef")["stdout"] == "abc\ndef"
    # Without stdin the command reads EOF at once instead of hanging.
    res = sandbox.run("cat; echo eof", timeout=10)
    assert res["timed_out"] is False and res["stdout"] == "eof\n"


def test_stdin_not_read_by_command(sandbox):
    # A command that exits without reading 1 MiB of input does not wedge
    # the supervisor (EPIPE on its side).
    res = sandbox.run("exit 3", stdin="x" * (1 << 20), timeout=10)
    assert res["exit_code"] == 3
    assert sandbox.sh("echo alive") == "alive\n"


# ---- timeouts ----

def test_timeout_kills_grandchildren_api(sandbox):
    out = {}
    t = threading.Thread(target=lambda: out.update(
        sandbox.run("sleep 1000 & sleep 1000 & wait", timeout=1)))
    t.start()
    assert wait_until(lambda: sandbox.count("sleep") == 2, timeout=5)
    t.join(30)
    res = out
    assert res["timed_out"] is True and res["status"] == "timed_out"
    assert res["exit_code"] is None
    assert "timed out" in res["message"]
    assert 900 <= res["duration_ms"] < 5000
    assert wait_until(lambda: sandbox.count("sleep") == 0, timeout=5), sandbox.procs()
    # Only init is left.
    assert [c for _, c in sandbox.procs()] == ["hutch-init"] or len(sandbox.procs()) == 1


def test_timeout_kills_grandchildren_cli(hutch, sandbox):
    t0 = time.monotonic()
    r = hutch("exec", sandbox.id, "--timeout", "1", "--", "sh", "-c",
              "(sleep 1000 &); sleep 1000 & wait", timeout=30)
    assert r.returncode == 124, r.stderr
    assert b"timed out" in r.stderr
    assert time.monotonic() - t0 < 10
    assert wait_until(lambda: sandbox.count("sleep") == 0, timeout=5), sandbox.procs()


def test_timeout_kills_setsid_grandchild(sandbox):
    res = sandbox.run("setsid sleep 1000 & sleep 1000", timeout=1)
    assert res["timed_out"] is True
    assert wait_until(lambda: sandbox.count("sleep") == 0, timeout=2), sandbox.procs()


def test_timeout_zero_means_none(sandbox):
    res = sandbox.run("sleep 0.2; echo done", timeout=0)
    assert res["timed_out"] is False and res["stdout"] == "done\n"


# ---- output cap and supervisor memory ----

def test_max_output_bytes_truncates(sandbox):
    res = sandbox.run("printf 0123456789abcdef; printf XYZ >&2", max_output_bytes=10)
    assert res["stdout"] == "0123456789"
    assert res["stdout_truncated"] is True
    assert res["stderr"] == "XYZ" and res["stderr_truncated"] is False
    res = sandbox.run("printf 0123456789", max_output_bytes=10)
    assert res["stdout"] == "0123456789" and res["stdout_truncated"] is False
    # The command ran to its end: the rest was read and dropped.
    res = sandbox.run("head -c 300000 /dev/zero; echo end >&2", max_output_bytes=3)
    assert res["exit_code"] == 0 and res["stderr"] == "end"
    assert len(res["stdout"]) == 3 and res["stdout_truncated"] is True


def test_sandbox_max_output_option(hutch):
    sb = hutch.create("--max-output", "5")
    try:
        assert sb.status()["config"]["max_output_bytes"] == 5
        res = sb.run("echo hello world")
        assert res["stdout"] == "hello" and res["stdout_truncated"] is True
        res = sb.run("echo hello world", max_output_bytes=100)
        assert res["stdout"] == "hello world\n" and res["stdout_truncated"] is False
    finally:
        sb.rm()


PRINT_1GIB = ("import sys\nb = b'a' * (1 << 20)\nn = 0\n"
              "for i in range(1024):\n    n += sys.stdout.buffer.write(b)\n"
              "sys.stdout.flush()\nprint(n, file=sys.stderr)\n")


def test_supervisor_memory_bounded_when_command_prints_1gib(sandbox):
    spid = sandbox.status()["supervisor_pid"]
    before = proc_status_kib(spid, "VmRSS")
    res = sandbox.run(argv=["python3", "-c", PRINT_1GIB], timeout=60)
    assert res["exit_code"] == 0, res["stderr"][-500:]
    assert res["stderr"] == f"{1 << 30}\n"  # all of it went through the pipe
    assert len(res["stdout"]) == 4 << 20 and res["stdout_truncated"] is True
    after = proc_status_kib(spid, "VmRSS")
    peak = proc_status_kib(spid, "VmHWM")
    assert after - before < 16 * 1024, (before, after)
    assert peak < 64 * 1024, peak


def test_supervisor_memory_bounded_with_slow_streaming_client(sandbox):
    spid = sandbox.status()["supervisor_pid"]
    size = 128 << 20
    conn = UnixHTTPConnection(sandbox.sock, timeout=60)
    conn.request("POST", "/v1/run_streaming",
                 body=json.dumps({"cmd": f"head -c {size} /dev/zero | tr '\\0' a"}).encode(),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    # The client does not read yet: the command must be held back by the
    # pipes, not buffered by the supervisor.
    time.sleep(0.5)
    mid = proc_status_kib(spid, "VmHWM")
    got, last = 0, None
    for line in resp:
        if line.startswith(b"data: "):
            d = json.loads(line[6:])
            if "data" in d:
                got += len(d["data"])
            else:
                last = d
    conn.close()
    assert got == size
    assert last and last["exit_code"] == 0
    assert mid < 64 * 1024 and proc_status_kib(spid, "VmHWM") < 64 * 1024


# ---- /run_streaming ----

def test_streaming_event_order(sandbox):
    events = sse_events(sandbox.sock, {"cmd": "echo a; echo b >&2; echo c; exit 3"})
    kinds = [e for e, _ in events]
    assert kinds[-1] == "exit"
    assert set(kinds[:-1]) <= {"stdout", "stderr"} and kinds.count("exit") == 1
    assert "".join(d["data"] for e, d in events if e == "stdout") == "a\nc\n"
    assert "".join(d["data"] for e, d in events if e == "stderr") == "b\n"
    final = events[-1][1]
    assert final["exit_code"] == 3 and final["status"] == "exited"
    assert "stdout" not in final  # output was streamed, not repeated


def test_streaming_multibyte_split_across_chunks(sandbox):
    # Bytes of one character written in two writes arrive as one character.
    events = sse_events(sandbox.sock, {"cmd": r"printf '\303'; sleep 0.1; printf '\251\n'"})
    assert "".join(d["data"] for e, d in events if e == "stdout") == "\u00e9\n"


def test_streaming_output_arrives_before_end_and_disconnect_kills(sandbox):
    conn = UnixHTTPConnection(sandbox.sock, timeout=20)
    conn.request("POST", "/v1/run_streaming", body=json.dumps({"cmd": "echo first; exec sleep 30"}).encode(),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    t0 = time.monotonic()
    seen = b""
    while b"first" not in seen:
        line = resp.readline()
        assert line, "stream ended before the first output"
        seen += line
    assert time.monotonic() - t0 < 10
    # The command is still running (blocked in sleep) while we have its output.
    assert wait_until(lambda: sandbox.count("sleep") == 1, timeout=5)
    resp.close()
    conn.close()
    assert wait_until(lambda: sandbox.count("sleep") == 0, timeout=5), sandbox.procs()
    assert sandbox.sh("echo still-serving") == "still-serving\n"


def test_run_disconnect_kills_command(sandbox):
    conn = UnixHTTPConnection(sandbox.sock, timeout=20)
    conn.request("POST", "/v1/run", body=json.dumps({"cmd": "sleep 30 & sleep 31; true"}).encode(),
                 headers={"Content-Type": "application/json"})
    assert wait_until(lambda: sandbox.count("sleep") == 2, timeout=5)
    conn.close()
    assert wait_until(lambda: sandbox.count("sleep") == 0, timeout=5), sandbox.procs()
    # The supervisor learns of the exit from init's message, which may come
    # a moment after the processes are gone from /proc.
    assert wait_until(lambda: sandbox.status()["commands_running"] == 0, timeout=5)


# ---- concurrency ----

def test_concurrent_runs_each_get_their_own_output(sandbox):
    n = 8
    results = [None] * n

    def one(i):
        results[i] = sandbox.run(f"echo out{i}; sleep 1; echo err{i} >&2; exit {i}")

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    elapsed = time.monotonic() - t0
    for i, res in enumerate(results):
        assert res["stdout"] == f"out{i}\n" and res["stderr"] == f"err{i}\n", res
        assert res["exit_code"] == i
    assert elapsed < 4, f"{n} one-second commands took {elapsed:.1f} s: not concurrent"


def test_concurrent_cli_execs_and_streams(hutch, sandbox):
    procs = [hutch.popen("exec", sandbox.id, "--", "sh", "-c",
                         f"for j in 1 2 3; do echo p{i}-$j; sleep 0.1; done; exit {i + 1}")
             for i in range(4)]
    streams = []
    t = threading.Thread(target=lambda: streams.append(
        sse_events(sandbox.sock, {"cmd": "seq 1 1000"})))
    t.start()
    for i, p in enumerate(procs):
        out, err = p.communicate(timeout=60)
        assert p.returncode == i + 1, err
        assert out.decode() == "".join(f"p{i}-{j}\n" for j in (1, 2, 3))
    t.join(60)
    ev = streams[0]
    assert "".join(d["data"] for e, d in ev if e == "stdout") == "".join(f"{k}\n" for k in range(1, 1001))
    assert ev[-1][0] == "exit"


def test_background_child_does_not_hold_the_answer(sandbox):
    # The background sleep keeps the pipes open; the answer still comes
    # when the main process exits, and the child keeps running.
    t0 = time.monotonic()
    res = sandbox.run("sleep 1000 & echo main-done", timeout=30)
    assert time.monotonic() - t0 < 5
    assert res["exit_code"] == 0 and res["stdout"] == "main-done\n"
    assert res["timed_out"] is False
    # The shell's background child may still be a copy of sh, before its
    # exec of sleep, when the answer comes.
    assert wait_until(lambda: sandbox.count("sleep") == 1, timeout=5), sandbox.procs()
    events = sse_events(sandbox.sock, {"cmd": "sleep 1001 & echo s-done"}, timeout=10)
    assert events[-1][0] == "exit" and events[-1][1]["exit_code"] == 0
    assert wait_until(lambda: sandbox.count("sleep") == 2, timeout=5), sandbox.procs()


def test_commands_do_not_inherit_ignored_signals(hutch):
    """A caller that ignores signals (a shell's `cmd &` ignores SIGINT and
    SIGQUIT) must not pass that on to the sandbox's commands."""
    import signal as _signal
    import subprocess as _sp

    def ignore():
        for sig in (_signal.SIGINT, _signal.SIGQUIT, _signal.SIGUSR1):
            _signal.signal(sig, _signal.SIG_IGN)

    from conftest import HUTCH
    r = _sp.run([HUTCH, "run", "--", "grep", "^SigIgn", "/proc/self/status"], env=hutch.env,
                stdin=_sp.DEVNULL, capture_output=True, timeout=60, preexec_fn=ignore)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [b"SigIgn:", b"0000000000000000"], r.stdout
