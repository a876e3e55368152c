# SPDX-License-Identifier: Apache-2.0
"""Background processes: /start_process, /list_processes, /kill_process,
/process_output, and the CLI verbs ps, logs, kill, exec -d."""
import base64
import json
import re
import time

import pytest

from conftest import UnixHTTPConnection, proc_comm, wait_until

RING = 1 << 20
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def start(sb, body):
    status, res = sb.api("POST", "/v1/start_process", body)
    assert status == 200, res
    return res


def listing(sb):
    status, res = sb.api("GET", "/v1/list_processes")
    assert status == 200, res
    return {p["id"]: p for p in res["processes"]}


def output(sb, pid, offset=0, stream="stdout", **q):
    qs = "&".join(f"{k}={v}" for k, v in dict(id=pid, offset=offset, stream=stream, **q).items())
    status, res = sb.api("GET", f"/process_output?{qs}")
    assert status == 200, res
    return res


def kill(sb, pid, **kw):
    return sb.api("POST", "/v1/kill_process", {"id": pid, **kw}, timeout=90)


def wait_done(sb, pid, timeout=20):
    assert wait_until(lambda: listing(sb)[pid]["status"] != "running", timeout), listing(sb)[pid]
    return listing(sb)[pid]


def assert_error(status, res, want_status, want_code, *words):
    assert status == want_status, (status, res)
    assert isinstance(res, dict) and set(res) == {"error"}, res
    assert res["error"]["code"] == want_code, res
    for w in words:
        assert w in res["error"]["message"], res


def test_start_list_output(sandbox):
    res = start(sandbox, {"cmd": "echo out; echo err >&2; echo $FOO; pwd; exit 3",
                          "env": {"FOO": "bar"}, "cwd": "/tmp"})
    assert res["id"] == "p1" and isinstance(res["pid"], int) and res["pid"] > 1
    assert res["status"] in ("running", "exited")
    p = wait_done(sandbox, "p1")
    assert p["status"] == "exited" and p["exit_code"] == 3 and p["signal"] is None
    assert RFC3339.match(p["started_at"]) and RFC3339.match(p["ended_at"])
    assert p["command"].startswith("echo out")
    out = output(sandbox, "p1")
    assert out["data"] == "out\nbar\n/tmp\n" and out["offset"] == 0 and out["dropped"] == 0
    assert out["next_offset"] == len(out["data"]) and out["eof"] is True
    err = output(sandbox, "p1", stream="stderr")
    assert err["data"] == "err\n" and err["eof"] is True
    b = output(sandbox, "p1", offset=4, encoding="base64")
    assert base64.b64decode(b["data"]) == b"bar\n/tmp\n" and b["offset"] == 4
    # argv form, ids increase, argv[0] not found is exit 127 with the reason
    res = start(sandbox, {"argv": ["sh", "-c", "echo $0", "zero"]})
    assert res["id"] == "p2" and res["command"] == "sh -c echo $0 zero"
    assert wait_done(sandbox, "p2")["exit_code"] == 0
    assert output(sandbox, "p2")["data"] == "zero\n"
    start(sandbox, {"argv": ["no-such-program"]})
    p3 = wait_done(sandbox, "p3")
    assert p3["exit_code"] == 127
    assert "no-such-program" in output(sandbox, "p3", stream="stderr")["data"]
    assert list(listing(sandbox)) == ["p1", "p2", "p3"]


def test_long_poll_returns_on_output_and_exit(sandbox):
    start(sandbox, {"cmd": "sleep 0.5; echo late; sleep 0.3"})
    t0 = time.monotonic()
    out = output(sandbox, "p1", wait="true")
    assert out["data"] == "late\n" and out["status"] == "running"
    assert 0.3 < time.monotonic() - t0 < 10
    out = output(sandbox, "p1", offset=out["next_offset"], wait="true")
    assert out["data"] == "" and out["eof"] is True and out["status"] == "exited"
    # a bounded wait with nothing new answers empty when it runs out
    start(sandbox, {"cmd": "sleep 30"})
    t0 = time.monotonic()
    out = output(sandbox, "p2", wait="0.3")
    assert out["data"] == "" and out["status"] == "running" and out["eof"] is False
    assert 0.25 < time.monotonic() - t0 < 5


def test_follow_across_reconnections_loses_and_repeats_nothing(sandbox):
    n = 3000
    start(sandbox, {"cmd": f"i=1; while [ $i -le {n} ]; do echo $i; i=$((i+1)); "
                           f"case $i in *00) sleep 0.01;; esac; done"})
    got, offset, requests = b"", 0, 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # a new connection each time, some of them dropped mid-wait
        if requests % 5 == 4:
            conn = UnixHTTPConnection(sandbox.sock, timeout=5)
            conn.request("GET", f"/process_output?id=p1&offset={offset}&wait=5")
            conn.close()  # the client goes away: nothing is lost for the next one
        res = output(sandbox, "p1", offset=offset, encoding="base64",
                     wait="true" if requests % 2 else "false")
        requests += 1
        assert res["offset"] == offset and res["dropped"] == 0
        chunk = base64.b64decode(res["data"])
        assert res["next_offset"] == offset + len(chunk)
        got += chunk
        offset = res["next_offset"]
        if res["eof"]:
            break
    assert requests > 3
    assert got.decode().split("\n")[:-1] == [str(i) for i in range(1, n + 1)]
    assert listing(sandbox)["p1"]["status"] == "exited"


def test_ring_keeps_the_last_mib_and_says_what_was_dropped(sandbox):
    start(sandbox, {"cmd": "head -c 3000000 /dev/zero | tr '\\0' x; printf END"})
    p = wait_done(sandbox, "p1")
    total = 3000000 + 3
    assert p["stdout_bytes"] == total
    res = output(sandbox, "p1", offset=0)
    assert res["dropped"] == total - RING and res["offset"] == total - RING
    assert len(res["data"]) == RING and res["data"].endswith("xxEND")
    assert res["next_offset"] == total and res["eof"] is True
    res = output(sandbox, "p1", offset=total - 5)
    assert res["data"] == "xxEND" and res["dropped"] == 0


@pytest.mark.parametrize("body,words", [
    (b'{"cmd": ', ["invalid JSON"]),
    (b'[1]', ["JSON object"]),
    (b'{}', ["missing 'cmd'"]),
    (b'{"cmd": "true", "argv": ["true"]}', ["not both"]),
    (b'{"argv": []}', ["'argv' is empty"]),
    (b'{"cmd": "true", "stdin": "x"}', ["'stdin' must be true", "POST /process_stdin"]),
    (b'{"cmd": "true", "max_output_bytes": 1}', ["unknown field", "cmd, argv, cwd, env, stdin"]),
    (b'{"cmd": "true", "timeout": 1}', ["unknown field 'timeout'"]),
    (b'{"cmd": "true", "env": {"1A": "x"}}', ["invalid environment variable name"]),
    (b'{"cmd": "true", "cwd": ""}', ["'cwd' is empty"]),
])
def test_start_bad_body_is_400(sandbox, body, words):
    status, res = sandbox.api("POST", "/v1/start_process", raw=body)
    assert_error(status, res, 400, "invalid_request", *words)
    assert listing(sandbox) == {}


def test_error_paths(sandbox):
    start(sandbox, {"cmd": "echo hi"})
    wait_done(sandbox, "p1")
    # unknown ids
    for pid in ("p9", "x", "p0", "p01", "", "p1x"):
        status, res = kill(sandbox, pid)
        if pid == "":
            assert_error(status, res, 400, "invalid_request", "missing 'id'")
        else:
            assert_error(status, res, 404, "process_not_found", "see GET /list_processes")
    status, res = sandbox.api("GET", "/process_output?id=p9")
    assert_error(status, res, 404, "process_not_found")
    # bad kill bodies
    for body in (b"", b"[]", b'{"id": 1}', b'{"id": "p1", "grace": 1}',
                 b'{"id": "p1", "grace_seconds": -1}', b'{"id": "p1", "grace_seconds": "5"}',
                 b'{"id": "p1", "grace_seconds": 1e9}'):
        status, res = sandbox.api("POST", "/v1/kill_process", raw=body)
        assert_error(status, res, 400, "invalid_request")
    # kill of an exited process
    status, res = kill(sandbox, "p1")
    assert_error(status, res, 409, "process_not_running", "p1 is not running", "exited")
    # bad output queries
    for q, words in (("", "missing query parameter 'id'"), ("id=p1&stream=both", "'stream'"),
                     ("id=p1&offset=-1", "'offset'"), ("id=p1&offset=abc", "'offset'"),
                     ("id=p1&offset=", "'offset'"), ("id=p1&encoding=hex", "'encoding'"),
                     ("id=p1&wait=forever", "'wait'"), ("id=p1&wait=61", "'wait'"),
                     ("id=p1&offset=4", "past the end of stdout (3 bytes")):
        status, res = sandbox.api("GET", f"/process_output?{q}")
        assert_error(status, res, 400, "invalid_request", words)
    # methods
    for method, path in (("GET", "/v1/start_process"), ("GET", "/v1/kill_process"),
                         ("POST", "/v1/list_processes"), ("POST", "/process_output")):
        status, res = sandbox.api(method, path)
        assert_error(status, res, 405, "method_not_allowed")
    assert sandbox.api("GET", "/health")[0] == 200


def sandbox_sleeps(sb):
    return sorted(c for _, c in sb.procs() if c == "sleep")


def test_kill_whole_tree_with_sigterm(sandbox):
    # children, a setsid grandchild (own session), a grandchild of a subshell
    start(sandbox, {"cmd": "sleep 1001 & setsid sleep 1002 & "
                           "sh -c 'setsid sleep 1003 & sleep 1004 & wait' & wait"})
    assert wait_until(lambda: len(sandbox_sleeps(sandbox)) == 4), sandbox.procs()
    t0 = time.monotonic()
    status, res = kill(sandbox, "p1", grace_seconds=20)
    assert status == 200, res
    assert time.monotonic() - t0 < 10  # obeyed SIGTERM: no grace period spent
    assert res["id"] == "p1" and res["status"] == "killed"
    assert res["signal"] == 15 and res["signal_name"] == "SIGTERM" and res["exit_code"] is None
    assert RFC3339.match(res["ended_at"])
    assert wait_until(lambda: sandbox_sleeps(sandbox) == [], 5), sandbox.procs()
    assert listing(sandbox)["p1"]["status"] == "killed"


def test_kill_escalates_to_sigkill_after_grace(sandbox):
    start(sandbox, {"cmd": "trap '' TERM; sleep 1001 & setsid sleep 1002 & "
                           "while :; do sleep 1; done"})
    assert wait_until(lambda: len(sandbox_sleeps(sandbox)) >= 3), sandbox.procs()
    t0 = time.monotonic()
    status, res = kill(sandbox, "p1", grace_seconds=0.5)
    elapsed = time.monotonic() - t0
    assert status == 200, res
    assert 0.4 < elapsed < 10
    assert res["status"] == "killed" and res["signal"] == 9
    assert wait_until(lambda: sandbox_sleeps(sandbox) == [], 5), sandbox.procs()


def test_children_that_ignore_sigterm_die_with_their_leader(sandbox):
    # the leader obeys SIGTERM; its children ignore it: they get SIGKILL as
    # soon as the leader is gone, not after the grace period
    start(sandbox, {"cmd": "sh -c 'trap \"\" TERM; sleep 1001' & "
                           "(trap '' TERM; setsid sleep 1002) & wait"})
    assert wait_until(lambda: len(sandbox_sleeps(sandbox)) == 2), sandbox.procs()
    t0 = time.monotonic()
    status, res = kill(sandbox, "p1", grace_seconds=30)
    assert status == 200 and res["status"] == "killed", res
    assert time.monotonic() - t0 < 10
    assert wait_until(lambda: sandbox_sleeps(sandbox) == [], 5), sandbox.procs()


def test_kill_with_zero_grace_and_concurrent_kills(sandbox):
    start(sandbox, {"cmd": "trap '' TERM; sleep 1000"})
    wait_until(lambda: len(sandbox_sleeps(sandbox)) == 1)
    conn = UnixHTTPConnection(sandbox.sock, timeout=30)
    conn.request("POST", "/v1/kill_process", body=json.dumps({"id": "p1", "grace_seconds": 20}),
                 headers={"Content-Type": "application/json"})
    time.sleep(0.2)
    status, res = kill(sandbox, "p1", grace_seconds=0)  # a shorter grace wins
    assert status == 200 and res["signal"] == 9, res
    first = conn.getresponse()
    assert first.status == 200 and json.loads(first.read())["status"] == "killed"
    conn.close()


def test_processes_survive_clients_and_die_with_the_sandbox(hutch):
    sb = hutch.create()
    # started over a connection that is then dropped
    conn = UnixHTTPConnection(sb.sock, timeout=10)
    conn.request("POST", "/v1/start_process", body=json.dumps({"cmd": "sleep 1000"}),
                 headers={"Content-Type": "application/json"})
    assert conn.getresponse().status == 200
    conn.close()
    start(sb, {"cmd": "setsid sleep 1001 & while :; do echo tick; sleep 0.05; done"})
    assert wait_until(lambda: len(sandbox_sleeps(sb)) >= 2)
    time.sleep(0.3)
    procs = listing(sb)
    assert procs["p1"]["status"] == "running" and procs["p2"]["status"] == "running"
    assert output(sb, "p2")["data"].startswith("tick\n")
    # /run requests come and go meanwhile
    assert sb.sh("echo ok") == "ok\n"
    assert sb.status()["commands_running"] >= 2
    pids = sb.host_pids()
    assert len(pids) >= 4
    r = sb.rm()
    assert r.returncode == 0, r.stderr
    assert all(proc_comm(p) is None for p in pids)


def test_too_many_running_processes(sandbox):
    for i in range(64):
        start(sandbox, {"argv": ["sleep", "1000"]})
    status, res = sandbox.api("POST", "/v1/start_process", {"argv": ["sleep", "1000"]})
    assert_error(status, res, 429, "too_many_processes", "64 background processes")
    status, res = kill(sandbox, "p1", grace_seconds=0)
    assert status == 200, res
    start(sandbox, {"argv": ["true"]})


def test_finished_processes_are_bounded(sandbox):
    for i in range(70):
        start(sandbox, {"argv": ["true"]})
    assert wait_until(lambda: all(p["status"] == "exited" for p in listing(sandbox).values()))
    procs = listing(sandbox)
    assert len(procs) == 64 and "p1" not in procs and "p70" in procs


# ---- CLI ----

def test_cli_exec_d_ps_logs_kill(hutch, sandbox):
    r = hutch("exec", "-d", sandbox.id, "--", "sh", "-c",
              "echo one; echo two >&2; sleep 0.3; echo three; sleep 1000")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"p1\n"
    r = hutch("exec", sandbox.id[:6], "-d", "-e", "A=1", "--cwd", "/tmp", "--",
              "sh", "-c", "echo $A $PWD")
    assert r.returncode == 0 and r.stdout == b"p2\n", r.stderr
    assert wait_until(lambda: listing(sandbox)["p2"]["status"] == "exited")
    r = hutch("logs", sandbox.id, "p2")
    assert r.returncode == 0 and r.stdout == b"1 /tmp\n", r.stderr
    r = hutch("ps", sandbox.id)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0].split() == ["ID", "PID", "STATUS", "EXIT", "STARTED", "COMMAND"]
    assert lines[1].split()[0] == "p1" and lines[1].split()[2] == "running"
    assert lines[2].split()[:4][2:] == ["exited", "0"]
    r = hutch("ps", sandbox.id, "--json")
    assert [p["id"] for p in json.loads(r.stdout)] == ["p1", "p2"]
    assert wait_until(lambda: b"three" in hutch("logs", sandbox.id, "p1").stdout)
    r = hutch("logs", sandbox.id, "1")
    assert r.stdout == b"one\nthree\n" and r.stderr == b"two\n"
    r = hutch("kill", sandbox.id, "p1", "--grace", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"p1 killed (SIGTERM)\n"
    assert listing(sandbox)["p1"]["status"] == "killed"
    r = hutch("kill", sandbox.id, "p1", "--json")
    assert r.returncode == 70 and b"not running" in r.stderr


def test_cli_logs_follow(hutch, sandbox):
    r = hutch("exec", "-d", sandbox.id, "--", "sh", "-c",
              "i=1; while [ $i -le 200 ]; do echo $i; echo e$i >&2; i=$((i+1)); sleep 0.005; done")
    assert r.returncode == 0, r.stderr
    r = hutch("logs", "-f", sandbox.id, "p1", timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == [str(i) for i in range(1, 201)]
    assert r.stderr.decode().split() == [f"e{i}" for i in range(1, 201)]


def test_cli_logs_follow_exits_with_the_process_exit_code(hutch, sandbox):
    """logs -f ends with the process, and with its exit status: its code,
    or 128 + the signal that killed it (issue 17); logs without -f is 0."""
    r = hutch("exec", "-d", sandbox.id, "--", "sh", "-c", "echo out; exit 7")
    pid = r.stdout.decode().strip()
    r = hutch("logs", "-f", sandbox.id, pid, timeout=60)
    assert (r.returncode, r.stdout) == (7, b"out\n"), r
    assert hutch("logs", sandbox.id, pid).returncode == 0
    r = hutch("exec", "-d", sandbox.id, "--", "sleep", "100")
    pid = r.stdout.decode().strip()
    follow = hutch.popen("logs", "-f", sandbox.id, pid)
    assert hutch("kill", "--grace", "0", sandbox.id, pid).returncode == 0
    assert follow.wait(timeout=60) == 128 + 9


def test_cli_logs_follow_stops_on_ctrl_c_and_process_keeps_running(hutch, sandbox):
    import signal
    hutch("exec", "-d", sandbox.id, "--", "sh", "-c", "while :; do echo x; sleep 0.1; done")
    p = hutch.popen("logs", sandbox.id, "p1", "-f")
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=10)
    assert out.startswith(b"x\n")
    assert listing(sandbox)["p1"]["status"] == "running"


@pytest.mark.parametrize("args,code,words", [
    (["ps"], 64, "missing sandbox id"),
    (["ps", "ID", "--bogus"], 64, "unknown option"),
    (["logs", "ID"], 64, "missing process id"),
    (["logs", "ID", "q1"], 64, "not a process id"),
    (["logs", "ID", "p7"], 65, "no background process 'p7'"),
    (["kill", "ID", "p7"], 65, "no background process 'p7'"),
    (["kill", "ID", "p1", "--grace", "-1"], 64, "--grace"),
    (["kill", "ID"], 64, "missing process id"),
    (["exec", "-d", "ID"], 64, "missing command"),
    (["exec", "-d"], 64, "missing sandbox id"),
    (["exec", "-d", "ID", "--timeout", "3", "--", "true"], 64, "does not apply"),
    (["logs", "000000000000", "p1"], 65, "no sandbox"),
])
def test_cli_errors(hutch, sandbox, args, code, words):
    args = [sandbox.id if a == "ID" else a for a in args]
    r = hutch(*args)
    assert r.returncode == code, (r.returncode, r.stderr)
    assert words.encode() in r.stderr, r.stderr


def test_cli_help(hutch):
    r = hutch("--help")
    for verb in (b"exec -d ID", b"ps ID", b"logs ID PROC", b"kill ID PROC"):
        assert verb in r.stdout
    for verb in ("ps", "logs", "kill"):
        r = hutch(verb, "--help")
        assert r.returncode == 0 and r.stdout.startswith(f"usage: hutch {verb}".encode())
    r = hutch("exec", "--help")
    assert b"-d (--detach)" in r.stdout
