# SPDX-License-Identifier: Apache-2.0
"""hutch in scripts (issue 17): run --json and exec --json say how a
command ended in one JSON object (exit code, signal, OOM, timeout,
duration, the output and its sizes); ls --filter and --format as docker
has them. Every error path: exit 64 naming the option, nothing on stdout.
"""
import base64
import json
import os
import re
import subprocess

import pytest

from conftest import wait_until
from test_cli import GONE, NOT_FOUND, USAGE, check

RESULT_KEYS = ["sandbox", "sandbox_id", "status", "exit_code", "signal", "signal_name",
               "timed_out", "oom_killed", "duration_ms", "stdout", "stdout_bytes", "stdout_truncated",
               "stderr", "stderr_bytes", "stderr_truncated"]


def result(r):
    res = json.loads(r.stdout)
    assert [k for k in res if k not in ("message", "encoding")] == RESULT_KEYS, res
    return res


def test_run_json_exit_code_output_and_sizes(hutch):
    r = hutch("run", "--json", "--instance-type", "nano", "--",
              "sh", "-c", "printf 'hi\\n'; printf 'über' >&2; exit 3")
    # The exit status stays the command's, as without --json.
    assert r.returncode == 3, r.stderr
    assert r.stderr == b""
    res = result(r)
    assert re.fullmatch(r"[0-9a-f]{12}", res["sandbox_id"])
    assert (res["status"], res["exit_code"], res["signal"], res["signal_name"]) == \
        ("exited", 3, None, None)
    assert (res["timed_out"], res["oom_killed"]) == (False, False)
    assert (res["stdout"], res["stdout_bytes"], res["stdout_truncated"]) == ("hi\n", 3, False)
    # Sizes are bytes, not characters.
    assert (res["stderr"], res["stderr_bytes"]) == ("über", 5)
    assert "encoding" not in res and "message" not in res
    assert 0 < res["duration_ms"] < 10000
    # run deleted its sandbox.
    assert hutch.ids() == []


def test_run_json_timeout_and_signal(hutch):
    r = hutch("run", "--json", "--instance-type", "nano", "--timeout", "0.5", "--",
              "sh", "-c", "echo started; sleep 30")
    assert r.returncode == 124, r.stderr
    # The message is in the JSON, not on stderr.
    assert r.stderr == b""
    res = result(r)
    assert (res["status"], res["timed_out"], res["exit_code"]) == ("timed_out", True, None)
    assert res["stdout"] == "started\n"
    assert res["message"].startswith("timed out after 0.5 s"), res
    assert 500 <= res["duration_ms"] < 10000, res

    r = hutch("run", "--json", "--instance-type", "nano", "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + 15, r.stderr
    res = result(r)
    assert (res["status"], res["signal"], res["signal_name"], res["exit_code"]) == \
        ("signaled", 15, "SIGTERM", None)


def test_run_json_oom(hutch):
    r = hutch("run", "--json", "--instance-type", "nano", "--",
              "python3", "-c", "b = bytearray(2 << 30)\nprint('survived')", timeout=120)
    assert r.returncode == 137, r.stderr
    res = result(r)
    assert (res["status"], res["oom_killed"], res["signal"]) == ("oom_killed", True, 9), res
    assert "out of memory" in res["message"] and "survived" not in res["stdout"]


def test_exec_json_binary_output_is_base64(hutch, sandbox):
    r = hutch("exec", "--json", sandbox.id, "--", "sh", "-c", "printf 'a\\377\\000b'; echo e >&2")
    assert r.returncode == 0, r.stderr
    res = result(r)
    assert res["sandbox_id"] == sandbox.id
    # Not valid UTF-8 (and a NUL byte): both streams base64, nothing lost.
    assert res["encoding"] == "base64"
    assert base64.b64decode(res["stdout"]) == b"a\xff\x00b" and res["stdout_bytes"] == 4
    assert base64.b64decode(res["stderr"]) == b"e\n"


def test_exec_json_stdin_and_truncation(hutch):
    sb = hutch.create("--instance-type", "nano", "--max-output", "5")
    try:
        r = hutch("exec", "-i", "--json", sb.id, "--", "sh", "-c", "cat; echo done >&2",
                  input=b"hello world\n")
        assert r.returncode == 0, r.stderr
        res = result(r)
        # The sandbox's --max-output is kept of each stream, as /run keeps;
        # the sizes count everything the command wrote.
        assert (res["stdout"], res["stdout_bytes"], res["stdout_truncated"]) == \
            ("hello", 12, True)
        assert (res["stderr"], res["stderr_bytes"], res["stderr_truncated"]) == \
            ("done\n", 5, False)
        # A multi-byte character cut by the limit: the text keeps what is whole.
        r = hutch("exec", "--json", sb.id, "--", "printf", "abcdé")
        res = result(r)
        assert (res["stdout"], res["stdout_bytes"], res["stdout_truncated"]) == \
            ("abcd", 6, True)
        assert "encoding" not in res
    finally:
        sb.rm()


@pytest.mark.parametrize("verb", ["run", "exec"])
def test_json_refuses_a_terminal(hutch, verb):
    args = ["run", "--json", "-t", "--", "true"] if verb == "run" else \
        ["exec", "--json", "-t", "abcdefabcdef", "--", "true"]
    r = hutch(*args)
    check(r, USAGE, "--json does not go with -t", f"hutch {verb} --help")
    assert r.stdout == b"" and hutch.ids() == []


def test_exec_json_errors_print_no_json(hutch):
    r = hutch("exec", "--json", "abcdefabcdef", "--", "true")
    check(r, NOT_FOUND, "no sandbox 'abcdefabcdef'")
    assert r.stdout == b""
    sb = hutch.create("--instance-type", "nano")
    assert sb.rm().returncode == 0
    r = hutch("exec", "--json", sb.id, "--", "true")
    check(r, GONE, "deleted")
    assert r.stdout == b""


def test_exec_json_when_the_sandbox_is_deleted_meanwhile(hutch):
    sb = hutch.create("--instance-type", "nano")
    p = hutch.popen("exec", "--json", sb.id, "--", "sh", "-c", "echo up; sleep 60")
    try:
        # The command runs (its output is kept, not printed): wait for it.
        from conftest import wait_until
        assert wait_until(lambda: sb.count("sleep") == 1, 10)
        assert sb.rm().returncode == 0
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == GONE, err
    assert out == b"" and b"deleted" in err


# ---- ls --filter, --format ----

@pytest.fixture
def three(own_net, hutch):
    # (own_net: c's network all is wired in a netns of the test's own)
    a = hutch.create("--instance-type", "nano", "--description", "web worker")
    b = hutch.create("--instance-type", "micro", "--network", "allow:example.com")
    c = hutch.create("--instance-type", "nano", "--network", "all")
    yield a, b, c
    hutch("rm", "-q", a.id, b.id, c.id)


def ls_ids(hutch, *args):
    r = hutch("ls", "-q", *args)
    assert r.returncode == 0, r.stderr
    return sorted(r.stdout.decode().split())


def test_ls_filter(hutch, three):
    a, b, c = three
    assert ls_ids(hutch, "--filter", "instance-type=nano") == sorted([a.id, c.id])
    # One key twice: either value; two keys: both.
    assert ls_ids(hutch, "-f", "instance-type=nano", "-f", "instance-type=micro") == \
        sorted([a.id, b.id, c.id])
    assert ls_ids(hutch, "-f", "instance-type=nano", "-f", "network=all") == [c.id]
    # allow is every allow:... spec; a whole spec is itself.
    assert ls_ids(hutch, "-f", "network=allow") == [b.id]
    assert ls_ids(hutch, "-f", "network=allow:example.com") == [b.id]
    assert ls_ids(hutch, "-f", "network=allow:other.example") == []
    assert ls_ids(hutch, "-f", "network=none") == [a.id]
    assert ls_ids(hutch, "-f", f"id={b.id[:4]}") == [b.id]
    assert ls_ids(hutch, "-f", "status=running") == sorted([a.id, b.id, c.id])
    assert ls_ids(hutch, "-f", "status=sleeping") == []
    assert ls_ids(hutch, "-f", "region=nl-north-1") == sorted([a.id, b.id, c.id])
    assert ls_ids(hutch, "-f", "description=worker") == [a.id]
    # --json and the table filter alike.
    listed = json.loads(hutch("ls", "--json", "--filter=network=all").stdout)
    assert [s["id"] for s in listed] == [c.id]
    lines = hutch("ls", "-f", "network=all").stdout.decode().splitlines()
    assert lines[0].startswith("ID") and len(lines) == 2 and lines[1].startswith(c.id)


def test_ls_filter_dead(hutch, three):
    import os
    import signal
    from conftest import wait_until
    a, b, c = three
    os.kill(json.loads(hutch("inspect", a.id).stdout)["supervisor_pid"], signal.SIGKILL)
    assert wait_until(lambda: ls_ids(hutch, "-f", "status=dead") == [a.id], 10)
    assert ls_ids(hutch, "-f", "status=running") == sorted([b.id, c.id])
    assert hutch("gc").returncode == 0


def test_ls_format(hutch, three):
    a, b, c = three
    r = hutch("ls", "-f", f"id={a.id}", "--format", "{{.ID}} {{.Status}} {{.Type}} {{.Network}} "
              "{{upper .Network}} {{.Region}} {{.Live}} {{.Config.ttl_seconds}} {{.Description}}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == \
        f"{a.id} running nano none NONE nl-north-1 true 86400 web worker\n"
    listed = {s["id"]: s for s in json.loads(hutch("ls", "--json").stdout)}
    # {{json .}} is the sandbox as ls --json gives it, one per line; so is 'json'.
    for fmt in ("{{json .}}", "json"):
        lines = hutch("ls", "--format", fmt).stdout.decode().splitlines()
        got = [json.loads(line) for line in lines]
        assert sorted(s["id"] for s in got) == sorted(listed)
        for s in got:
            assert s["config"] == listed[s["id"]]["config"] and s["status"] == "running"
    r = hutch("ls", "-f", f"id={a.id}", "--format", "{{json .Config.description}}|{{.Created}}")
    desc, created = r.stdout.decode().rstrip("\n").split("|")
    assert desc == '"web worker"' and created == listed[a.id]["created_at"]


def test_ls_format_table(hutch, three):
    a, b, c = three
    r = hutch("ls", "-f", "instance-type=nano", "--format", "table {{.ID}}\\t{{.Network}}\\t{{.Type}}")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    # Columns as docker's tabwriter makes them: the widest cell plus 3,
    # at least 10; the last column unpadded.
    assert lines[0] == "ID" + " " * 13 + "NETWORK" + " " * 3 + "TYPE"
    rows = sorted(lines[1:])
    assert rows == sorted([f"{a.id}   none      nano", f"{c.id}   all       nano"])
    # 'table' alone: ls's columns; a table of nothing is its header.
    r = hutch("ls", "--format", "table")
    assert r.stdout.decode().split("\n")[0].split() == \
        ["ID", "STATUS", "TYPE", "NETWORK", "EXPIRES", "REGION", "PORTS"]
    r = hutch("ls", "-f", "status=sleeping", "--format", "table {{.ID}}\\t{{.Status}}")
    assert r.stdout.decode() == "ID" + " " * 8 + "STATUS\n"


LS_ERRORS = [
    (["--filter", "foo=1"], ["unknown --filter key 'foo'", "instance-type"]),
    (["--filter", "status"], ["invalid --filter 'status'", "KEY=VALUE"]),
    (["--filter", "=x"], ["invalid --filter '=x'", "KEY=VALUE"]),
    (["--filter", "status=bogus"], ["invalid --filter 'status=bogus'", "sleeping"]),
    (["--filter", "id=XYZ"], ["invalid --filter 'id=XYZ'", "hex"]),
    (["--filter", "network=bogus"], ["invalid --filter 'network=bogus'", "allow:"]),
    (["--filter", "instance-type=huge"], ["invalid --filter 'instance-type=huge'", "nano"]),
    (["--filter", "name=x"], ["no names or labels", "description="]),
    (["--filter", "label=a=b"], ["no names or labels"]),
    (["--filter"], ["option '--filter' needs a value"]),
    (["--format", "{{.Foo}}"], ["unknown field '.Foo'", ".Status"]),
    (["--format", "{{.id}}"], ["unknown field '.id'"]),
    (["--format", "x {{.ID"], ["'{{' at byte 2 is not closed"]),
    (["--format", "{{}}"], ["empty '{{}}'"]),
    (["--format", "{{json}}"], ["json needs an argument"]),
    (["--format", "{{foo .ID}}"], ["unknown function 'foo'"]),
    (["--format", "{{ID}}"], ["unknown function 'ID'", "a field is written .Field"]),
    (["--format", "{{.ID .Status}}"], ["write {{.Field}} or {{FUNCTION .Field}}"]),
    (["--format", "{{json .ID .X}}"], ["write {{.Field}} or {{FUNCTION .Field}}"]),
    (["--format", "{{upper ID}}"], ["the argument is a field"]),
    (["--format", "{{- .ID}}"], ["trim markers"]),
    (["--format", "{{.ID.x}}"], ["only .Config has fields"]),
    (["--format", "{{.Config.}}"], ["only .Config has fields"]),
    (["--format", "{{.ID}}" * 129], ["more than 128 parts"]),
    (["--format", "x" * 4097], ["longer than 4096 bytes"]),
    (["--format", "{{.ID}}", "--json"], ["give --format or --json, not both"]),
    (["--format", "{{.ID}}", "-q"], ["give --format or -q, not both"]),
]


def test_ls_filter_and_format_errors(hutch):
    # A sandbox exists: nothing of it is printed before the error (one
    # sandbox for every case, so not parametrized).
    sb = hutch.create("--instance-type", "nano")
    try:
        for args, words in LS_ERRORS:
            r = hutch("ls", *args)
            check(r, USAGE, *words)
            assert r.stdout == b"", args
    finally:
        sb.rm()


# ---- create --progress: the setup steps' output as it comes ----

WAITING_SETUP = ("echo first\n"
                 "while [ ! -e /workspace/go ]; do sleep 0.02; done\n"
                 "echo second >&2\n")


def setup_file(tmp_path, text, name="setup.sh"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def creating_init_pid(hutch):
    """The init of the one sandbox being created in this runtime dir: the
    supervisor's child (state.json says init_pid only once it is ready)."""
    def pid():
        for sid in hutch.ids():
            try:
                with open(os.path.join(hutch.rtdir, sid, "state.json")) as f:
                    sup = json.load(f)["supervisor_pid"]
                with open(f"/proc/{sup}/task/{sup}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                # init is pid 1 of a pid namespace of its own (the
                # supervisor's other children, a disk's maker, are not)
                for k in kids:
                    with open(f"/proc/{k}/status") as f:
                        nspid = [ln.split()[1:] for ln in f if ln.startswith("NSpid:")][0]
                    if nspid[-1] == "1":
                        return k
            except (OSError, ValueError, KeyError, IndexError):
                pass
        return None
    assert wait_until(lambda: pid() is not None, 30)
    return pid()


def shown(err):
    """The progress stream after its first line, which says which root the
    sandbox got (hutch: root: ...)."""
    first, _, rest = err.partition(b"\n")
    assert first.startswith(b"hutch: root: "), err[:200]
    return rest


def test_create_progress_streams_the_setup_output(hutch, tmp_path):
    script = setup_file(tmp_path, WAITING_SETUP)
    # Were the output shown only at the end, readline() would return after
    # --setup-timeout (the script waits for us), with the failure.
    p = hutch.popen("create", "--progress", "always", "--instance-type", "nano",
                    "--setup-script", script, "--setup-timeout", "30")
    try:
        # "first" arrives while the script still runs (it waits for us).
        assert p.stderr.readline().startswith(b"hutch: root: ")
        assert p.stderr.readline() == b"first\n"
        assert p.poll() is None
        init = creating_init_pid(hutch)
        # As appuser, in the sandbox's user and mount namespaces (host root
        # owns nothing in its tmpfs).
        subprocess.run(["nsenter", "-t", str(init), "-U", "-m", "-S", "1000", "-G", "1000",
                        "touch", "/workspace/go"], check=True, timeout=30)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    sid = out.decode().strip()
    assert err == b"second\n"
    # The whole output stays in the state directory for the sandbox's life.
    with open(os.path.join(hutch.rtdir, sid, "setup.log"), "rb") as f:
        assert f.read() == b"first\nsecond\n"
    assert hutch("rm", sid).returncode == 0


def test_create_progress_never_and_auto_without_a_terminal(hutch, tmp_path):
    script = setup_file(tmp_path, "echo quiet please\n")
    for args in (["--progress", "never"], []):  # auto: stderr is a pipe here
        r = hutch("create", *args, "--instance-type", "nano", "--setup-script", script)
        assert r.returncode == 0 and r.stderr == b"", r.stderr
        sid = r.stdout.decode().strip()
        with open(os.path.join(hutch.rtdir, sid, "setup.log"), "rb") as f:
            assert f.read() == b"quiet please\n"
        assert hutch("rm", sid).returncode == 0


def test_create_progress_failure_says_it_once(hutch, tmp_path):
    script = setup_file(tmp_path, "echo doing it\nexit 3\n")
    r = hutch("create", "--progress", "always", "--instance-type", "nano",
              "--setup-script", script)
    err = shown(r.stderr).decode()
    assert r.returncode == 71, err
    # The output went by as it came: not again as "last bytes".
    assert err.startswith("doing it\nhutch: cannot create sandbox: setup_script failed with "
                          "exit status 3"), err
    assert "last" not in err and err.count("doing it") == 1
    assert hutch.ids() == []
    # on_create's output too, after the setup script's.
    r = hutch("run", "--progress", "always", "--instance-type", "nano", "--setup-script",
              setup_file(tmp_path, "echo set up\n", "ok.sh"), "--on-create", "echo created",
              "--", "echo", "command")
    assert r.returncode == 0, r.stderr
    assert (shown(r.stderr), r.stdout) == (b"set up\ncreated\n", b"command\n")


def test_setup_log_is_bounded(hutch, tmp_path):
    script = setup_file(tmp_path, "head -c 1500000 /dev/zero | tr '\\000' a\n"
                                  "echo; echo the end; exit 1\n")
    r = hutch("create", "--progress", "always", "--instance-type", "nano",
              "--setup-script", script)
    err = shown(r.stderr)
    assert r.returncode == 71
    # The first 1 MiB, a note, and (since not all of it was shown) the tail.
    assert err.startswith(b"a" * (1 << 20) + b"\n[hutch: the rest of the output is not shown")
    assert b"hutch: last 2048 bytes of its output:" in err and err.endswith(b"the end\n")
    assert len(err) < (1 << 20) + 4096


def test_progress_errors(hutch):
    for verb in (["create"], ["run", "--", "true"]):
        r = hutch(verb[0], "--progress", "sometimes", *verb[1:])
        check(r, USAGE, "invalid --progress 'sometimes'", "auto, always or never")
        assert r.stdout == b"" and hutch.ids() == []


def test_ls_format_ports(hutch):
    sb = hutch.create("--instance-type", "nano", "-p", "0:7000")
    try:
        ports = json.loads(hutch("ls", "--json").stdout)[0]["ports"]
        host = ports[0]["host"]
        assert host.startswith("127.0.0.1:"), ports
        r = hutch("ls", "--format", "{{.Ports}}|{{json .Ports}}")
        text, arr = r.stdout.decode().rstrip("\n").split("|", 1)
        # As docker ps shows them; json .Ports is the array itself.
        assert text == f"{host}->7000/tcp" and json.loads(arr) == ports
        header = hutch("ls").stdout.decode().splitlines()[0].split()
        assert header[-1] == "PORTS"
        assert hutch("ls", "--format", "table").stdout.decode().splitlines()[1].endswith(
            f"{host}->7000/tcp")
    finally:
        sb.rm()
