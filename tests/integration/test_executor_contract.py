"""The cloud executor's contract, as hutch serves it (issue 13).

Written from the executor's own sources, not from hutch's: its server
(koyeb/sandbox-container, pkg/server/handlers.go, process.go, auth.go,
middleware.go, docs/sandbox_executor.md) and its client (koyeb/koyeb-python-
sdk, koyeb/sandbox/executor_client.py, exec.py, filesystem.py, sandbox.py).
The requests are the ones the client sends: JSON bodies with
Content-Type: application/json and "Authorization: Bearer <secret>". Every
endpoint, its success and each of its errors, the SSE streams event by
event, the process lifecycle; over the TCP listener of --executor-port and,
for the unauthenticated contract, over the unix socket.

test_koyeb_client_* drive the real client module (not vendored: read from a
checkout of the SDK, $HUTCH_KOYEB_SDK_GIT, and skipped without one).
"""
import http.client
import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
import types
import uuid

import pytest

from conftest import Hutch, api, wait_until

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    """One sandbox serving the contract on a TCP port of its own."""
    h = Hutch(tmp_path_factory.mktemp("rt"))
    r = h("create", "--executor-port", "0", "--json")
    assert r.returncode == 0, r.stderr.decode()
    info = json.loads(r.stdout)
    e = info["executor"]
    ns = types.SimpleNamespace(h=h, info=info, id=info["id"], sock=info["socket"],
                               port=e["port"], url=e["url"], secret=e["secret"])
    yield ns
    h("rm", "--all")
    h("gc")


def call(ex, method, path, body=None, token="ok", raw=None, headers=None, timeout=60):
    """One request as the cloud client makes it; returns (status, headers, text)."""
    conn = http.client.HTTPConnection("127.0.0.1", ex.port, timeout=timeout)
    hdrs = {"Content-Type": "application/json"}
    if token == "ok":
        hdrs["Authorization"] = "Bearer " + ex.secret
    elif token is not None:
        hdrs["Authorization"] = token
    hdrs.update(headers or {})
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp, resp.read().decode()
    finally:
        conn.close()


def jcall(ex, method, path, body=None, **kw):
    status, resp, text = call(ex, method, path, body, **kw)
    assert resp.getheader("Content-Type") == "application/json", (status, text)
    return status, json.loads(text)


def events(text):
    """SSE text -> [(event, data dict)], checking the framing line by line."""
    out = []
    for block in text.split("\n\n"):
        if not block:
            continue
        lines = block.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and \
            lines[1].startswith("data: "), block
        out.append((lines[0][7:], json.loads(lines[1][6:])))
    assert text.endswith("\n\n")
    return out


def native_run(ex, cmd):
    status, res = api(ex.sock, "POST", "/v1/run", {"cmd": cmd})
    assert status == 200, res
    return res


# ---- the listener and its secret ----

def test_secret_printed_once_and_kept_from_others(ex):
    assert re.fullmatch(r"[0-9a-f]{64}", ex.secret)
    assert ex.url == "http://127.0.0.1:%d" % ex.port
    path = os.path.join(ex.h.rtdir, ex.id, "executor.secret")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    with open(path) as f:
        assert f.read() == ex.secret
    for verb in (("inspect", ex.id), ("ls", "--json")):
        r = ex.h(*verb)
        assert r.returncode == 0
        assert ex.secret.encode() not in r.stdout
        assert b'"port"' in r.stdout  # where it is served is shown
    status, res = api(ex.sock, "GET", "/status")
    assert res["executor"] == {"address": "127.0.0.1", "port": ex.port, "url": ex.url}


def test_listens_on_loopback_only(ex):
    lines = subprocess.run(["ss", "-Hltn", "sport = :%d" % ex.port], capture_output=True,
                           text=True).stdout.splitlines()
    # one listening socket, its local address the loopback one
    assert [ln.split()[3] for ln in lines] == ["127.0.0.1:%d" % ex.port], lines


PROTECTED = [("POST", "/run", {"cmd": "touch /workspace/pwned-run"}),
             ("POST", "/run_streaming", {"cmd": "touch /workspace/pwned-stream"}),
             ("POST", "/write_file", {"path": "/workspace/pwned-write", "content": "x"}),
             ("POST", "/make_dir", {"path": "/workspace/pwned-dir"}),
             ("POST", "/start_process", {"cmd": "touch /workspace/pwned-proc"}),
             ("POST", "/read_file", {"path": "/etc/passwd"}),
             ("POST", "/list_dir", {"path": "/"}),
             ("POST", "/delete_file", {"path": "/workspace/keep"}),
             ("POST", "/delete_dir", {"path": "/workspace/keepdir"}),
             ("GET", "/list_processes", None),
             ("POST", "/kill_process", {"id": "x"}),
             ("GET", "/process_logs_streaming?id=x", None),
             ("POST", "/bind_port", {"port": "8080"}),
             ("POST", "/unbind_port", {})]


@pytest.mark.parametrize("token", [None, "Bearer wrong", "Bearer ", "bearer {s}", "Bearer {s}x",
                                   "Bearer {short}", "Basic {s}", "{s}", "Bearer  {s}"])
def test_wrong_or_missing_token_is_401_and_runs_nothing(ex, token):
    native_run(ex, "rm -rf /workspace/pwned-* /workspace/keep /workspace/keepdir; "
                   "touch /workspace/keep; mkdir /workspace/keepdir")
    if token is not None:
        token = token.format(s=ex.secret, short=ex.secret[:-1])
    for method, path, body in PROTECTED:
        status, resp, text = call(ex, method, path, body, token=token)
        assert (status, text) == (401, "Unauthorized\n"), (method, path, token)
        assert resp.getheader("Content-Type") == "text/plain; charset=utf-8"
    time.sleep(0.2)  # a background process would have had time to run
    res = native_run(ex, "ls /workspace")
    assert res["stdout"].split() == ["keep", "keepdir"], res
    assert api(ex.sock, "GET", "/status")[1]["ports"] == []  # no forward was bound


def test_bind_port_over_tcp(ex):
    # the ports part of issue 13 serves these in the executor's shapes; the
    # TCP listener serves them as it serves the rest of the contract
    status, res = jcall(ex, "POST", "/bind_port", {"port": "8080"})
    assert status == 200 and res["success"] is True and res["port"] == "8080", res
    status, res = jcall(ex, "POST", "/bind_port", {"port": "8081"})
    assert status == 409 and res["success"] is False and res["current_port"] == "8080", res
    status, res = jcall(ex, "POST", "/unbind_port", {})
    assert status == 200 and res["success"] is True, res


def test_health_needs_no_token_and_any_method(ex):
    for method in ("GET", "POST", "HEAD"):
        status, resp, text = call(ex, method, "/health", token=None)
        assert status == 200
        if method != "HEAD":
            assert json.loads(text) == {"status": "ok"}


def test_unknown_path_is_404_before_the_token(ex):
    for token in (None, "ok"):
        status, _, text = call(ex, "GET", "/nope", token=token)
        assert (status, text) == (404, "404 page not found\n")


def test_tcp_serves_the_contract_only(ex):
    for method, path in [("GET", "/status"), ("POST", "/v1/run"), ("DELETE", "/"),
                         ("GET", "/files?path=x"), ("POST", "/exec"), ("POST", "/claim"),
                         ("GET", "/process_output?id=p1")]:
        status, _, text = call(ex, method, path, {"cmd": "true"})
        assert (status, text) == (404, "404 page not found\n"), path


# ---- /run ----

def test_run_success_has_code_and_no_error(ex):
    status, res = jcall(ex, "POST", "/run", {"cmd": "echo hi; echo warn >&2"})
    assert status == 200
    assert res == {"stdout": "hi\n", "stderr": "warn\n", "code": 0}


def test_run_failure_reports_code_and_error(ex):
    status, res = jcall(ex, "POST", "/run", {"cmd": "echo out; exit 3"})
    assert (status, res) == (200, {"stdout": "out\n", "stderr": "", "error": "Non-zero exit code",
                                   "code": 3})


def test_run_killed_by_a_signal_is_code_minus_one(ex):
    status, res = jcall(ex, "POST", "/run", {"cmd": "kill -9 $$"})
    assert (status, res["code"], res["error"]) == (200, -1, "Non-zero exit code")


def test_run_cwd_and_env(ex):
    status, res = jcall(ex, "POST", "/run",
                        {"cmd": "pwd; echo $FOO", "cwd": "/tmp", "env": {"FOO": "bar"}})
    assert (status, res["stdout"], res["code"]) == (200, "/tmp\nbar\n", 0)


@pytest.mark.parametrize("cwd", ["/nope", "/etc/passwd", "/workspace/missing/deeper"])
def test_run_bad_cwd_is_400_and_runs_nothing(ex, cwd):
    native_run(ex, "rm -f /tmp/cwd-marker")
    for path in ("/run", "/run_streaming"):
        status, resp, text = call(ex, "POST", path,
                                  {"cmd": "touch /tmp/cwd-marker", "cwd": cwd})
        assert (status, text) == (400, "Invalid working directory: %s\n" % cwd)
    assert native_run(ex, "test -e /tmp/cwd-marker")["exit_code"] == 1


@pytest.mark.parametrize("raw", [b"", b"{", b"[1]", b'"cmd"', b'{"cmd": 5}', b'{"env": [1]}',
                                 b'{"cwd": {}}'])
def test_run_undecodable_body_is_400(ex, raw):
    for path in ("/run", "/run_streaming", "/start_process"):
        status, _, text = call(ex, "POST", path, raw=raw)
        assert (status, text) == (400, "Invalid request\n"), (path, raw)


def test_run_decodes_as_go_does(ex):
    # unknown fields ignored, null is the zero value, keys match without case
    status, res = jcall(ex, "POST", "/run", {"cmd": "echo x", "timeout": 5, "cwd": None})
    assert (status, res["stdout"]) == (200, "x\n")
    status, res = jcall(ex, "POST", "/run", {"CMD": "echo y"})
    assert (status, res["stdout"]) == (200, "y\n")
    status, res = jcall(ex, "POST", "/run", raw=b"null")
    assert (status, res) == (200, {"stdout": "", "stderr": "", "code": 0})


def test_run_any_method(ex):
    status, res = jcall(ex, "PUT", "/run", {"cmd": "echo m"})
    assert (status, res["stdout"]) == (200, "m\n")


# ---- /run_streaming ----

def test_run_streaming_one_event_per_line_then_complete(ex):
    status, resp, text = call(ex, "POST", "/run_streaming",
                              {"cmd": "echo one; echo two >&2; printf 'a\\r\\n\\nb'; exit 0"})
    assert status == 200
    assert resp.getheader("Content-Type") == "text/event-stream"
    ev = events(text)
    assert ev[-1] == ("complete", {"code": 0, "error": False})
    out = [d for e, d in ev[:-1]]
    assert all(e == "output" for e, _ in ev[:-1])
    assert [d["data"] for d in out if d["stream"] == "stdout"] == ["one", "a", "", "b"]
    assert [d["data"] for d in out if d["stream"] == "stderr"] == ["two"]
    assert all(set(d) == {"stream", "data"} for d in out)


def test_run_streaming_failure_complete_event(ex):
    status, _, text = call(ex, "POST", "/run_streaming", {"cmd": "echo x; exit 7"})
    assert events(text) == [("output", {"stream": "stdout", "data": "x"}),
                            ("complete", {"code": 7, "error": True})]


def test_run_streaming_lines_come_as_written(ex):
    conn = http.client.HTTPConnection("127.0.0.1", ex.port, timeout=30)
    conn.request("POST", "/run_streaming",
                 body=json.dumps({"cmd": "echo first; read x < /dev/fd/0 || sleep 30"}),
                 headers={"Authorization": "Bearer " + ex.secret})
    resp = conn.getresponse()
    # the first line arrives while the command still runs
    assert resp.readline() == b"event: output\n"
    assert json.loads(resp.readline()[6:]) == {"stream": "stdout", "data": "first"}
    conn.close()


# ---- files ----

def fcall(ex, path, body):
    status, res = jcall(ex, "POST", path, body)
    assert status == 200, res
    return res


def test_files_round_trip(ex):
    native_run(ex, "rm -rf /workspace/f; mkdir /workspace/f")
    assert fcall(ex, "/write_file", {"path": "/workspace/f/a.txt", "content": "héllo\n"}) == \
        {"success": True}
    assert fcall(ex, "/read_file", {"path": "/workspace/f/a.txt"}) == {"content": "héllo\n"}
    assert fcall(ex, "/write_file", {"path": "/workspace/f/a.txt", "content": "x"}) == \
        {"success": True}  # overwrite
    assert fcall(ex, "/read_file", {"path": "/workspace/f/a.txt"}) == {"content": "x"}
    assert fcall(ex, "/make_dir", {"path": "/workspace/f/d/e/f"}) == {"success": True}
    assert fcall(ex, "/make_dir", {"path": "/workspace/f/d"}) == {"success": True}  # exists
    assert fcall(ex, "/write_file", {"path": "/workspace/f/b", "content": ""}) == \
        {"success": True}
    assert fcall(ex, "/read_file", {"path": "/workspace/f/b"}) == {}  # content omitted
    assert fcall(ex, "/list_dir", {"path": "/workspace/f"}) == {"entries": ["a.txt", "b", "d"]}
    assert fcall(ex, "/list_dir", {"path": "/workspace/f/d/e/f"}) == {}  # entries omitted
    assert fcall(ex, "/delete_file", {"path": "/workspace/f/a.txt"}) == {"success": True}
    assert fcall(ex, "/delete_file", {"path": "/workspace/f/d/e/f"}) == {"success": True}
    assert fcall(ex, "/delete_dir", {"path": "/workspace/f/d"}) == {"success": True}
    assert fcall(ex, "/delete_dir", {"path": "/workspace/f/b"}) == {"success": True}
    assert fcall(ex, "/delete_dir", {"path": "/workspace/f/missing"}) == {"success": True}
    assert fcall(ex, "/list_dir", {"path": "/workspace/f"}) == {}
    assert fcall(ex, "/write_file", {"path": "rel.txt", "content": "r"}) == {"success": True}
    assert native_run(ex, "cat /workspace/rel.txt; stat -c %a /workspace/rel.txt")["stdout"] == \
        "r644\n"


@pytest.mark.parametrize("path,body,error", [
    ("/write_file", {"path": "/workspace/nodir/x", "content": "x"},
     "open /workspace/nodir/x: no such file or directory"),
    ("/write_file", {"path": "/workspace", "content": "x"}, "open /workspace: is a directory"),
    ("/write_file", {"path": "/etc/x", "content": "x"}, "open /etc/x: read-only file system"),
    ("/read_file", {"path": "/workspace/nope"}, "open /workspace/nope: no such file or directory"),
    ("/read_file", {"path": "/workspace"}, "read /workspace: is a directory"),
    ("/read_file", {"path": ""}, "open : no such file or directory"),
    ("/delete_file", {"path": "/workspace/nope"},
     "remove /workspace/nope: no such file or directory"),
    ("/delete_file", {"path": "/workspace/full"}, "remove /workspace/full: directory not empty"),
    ("/make_dir", {"path": "/workspace/afile/sub"},
     "mkdir /workspace/afile/sub: not a directory"),
    ("/make_dir", {"path": "/workspace/afile"}, "mkdir /workspace/afile: not a directory"),
    ("/list_dir", {"path": "/workspace/nope"}, "open /workspace/nope: no such file or directory"),
    ("/list_dir", {"path": "/workspace/afile"}, "readdirent /workspace/afile: not a directory"),
])
def test_file_errors_are_200_with_gos_message(ex, path, body, error):
    native_run(ex, "rm -rf /workspace/full /workspace/afile; mkdir -p /workspace/full/x; "
                   "echo a > /workspace/afile")
    res = fcall(ex, path, body)
    change = path not in ("/read_file", "/list_dir")
    assert res == ({"error": error, "success": False} if change else {"error": error})


def test_file_error_words_match_the_clients_checks(ex):
    # filesystem.py raises SandboxFileNotFoundError on these words (utils.py
    # ERROR_MESSAGES, matched without case)
    res = fcall(ex, "/read_file", {"path": "/workspace/nope"})
    assert "no such file or directory" in res["error"].lower()
    res = fcall(ex, "/delete_dir", {"path": "/"})
    assert res["success"] is False and res["error"]


@pytest.mark.parametrize("path", ["/write_file", "/read_file", "/delete_file", "/make_dir",
                                  "/delete_dir", "/list_dir"])
def test_file_undecodable_body_is_400(ex, path):
    for raw in (b"", b"{", b'{"path": 1}', b"[]"):
        status, _, text = call(ex, "POST", path, raw=raw)
        assert (status, text) == (400, "Invalid request\n"), (path, raw)


# ---- processes ----

def list_procs(ex):
    status, res = jcall(ex, "GET", "/list_processes")
    assert status == 200 and list(res) == ["processes"]
    for p in res["processes"]:
        assert set(p) == {"id", "pid", "status", "command"}, p
    return {p["id"]: p for p in res["processes"]}


def wait_status(ex, pid, want, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        p = list_procs(ex)[pid]
        if p["status"] == want:
            return p
        time.sleep(0.05)
    raise AssertionError((pid, list_procs(ex)[pid], want))


def start(ex, cmd, **kw):
    status, res = jcall(ex, "POST", "/start_process", dict(cmd=cmd, **kw))
    assert status == 201, res
    assert set(res) == {"id", "pid", "status"} and res["status"] == "running"
    assert UUID_RE.match(res["id"]) and isinstance(res["pid"], int) and res["pid"] > 0
    return res["id"]


def test_process_lifecycle(ex):
    a = start(ex, "sleep 60")
    b = start(ex, "exit 0")
    c = start(ex, "exit 3")
    d = start(ex, "pwd > /tmp/proc-cwd; echo $V >> /tmp/proc-cwd", cwd="/tmp", env={"V": "w"})
    assert list_procs(ex)[a] == {"id": a, "pid": list_procs(ex)[a]["pid"], "status": "running",
                                 "command": "sleep 60"}
    wait_status(ex, b, "completed")
    wait_status(ex, c, "failed")
    wait_status(ex, d, "completed")
    assert native_run(ex, "cat /tmp/proc-cwd")["stdout"] == "/tmp\nw\n"
    status, res = jcall(ex, "POST", "/kill_process", {"id": a})
    assert (status, res) == (200, {"success": True, "message": "Process killed successfully"})
    assert list_procs(ex)[a]["status"] == "killed"
    status, res = jcall(ex, "POST", "/kill_process", {"id": a})
    assert (status, res) == (400, {"success": False,
                                   "error": "process is not running (status: killed)"})
    status, res = jcall(ex, "POST", "/kill_process", {"id": b})
    assert (status, res) == (400, {"success": False,
                                   "error": "process is not running (status: completed)"})
    nope = str(uuid.uuid4())
    status, res = jcall(ex, "POST", "/kill_process", {"id": nope})
    assert (status, res) == (400, {"success": False, "error": "process not found: " + nope})


def test_kill_process_kills_the_tree(ex):
    a = start(ex, "sleep 300 & sleep 301 & wait")

    def sleeps(rx="sleep 30[01]"):  # unanchored: the shell's command line too
        return native_run(ex, f"pgrep -f '{rx}' || true")["stdout"].split()
    assert wait_until(lambda: len(sleeps("^sleep 30[01]$")) == 2), sleeps()
    assert jcall(ex, "POST", "/kill_process", {"id": a})[0] == 200
    # SIGKILL is sent when the answer comes; the tree is gone just after
    assert wait_until(lambda: sleeps() == [], 10), sleeps()


def test_process_errors(ex):
    for body, text in [({}, "Command is required"), ({"cmd": ""}, "Command is required"),
                       ({"cmd": "true", "cwd": "/nope"}, "Invalid working directory: /nope")]:
        status, _, got = call(ex, "POST", "/start_process", body)
        assert (status, got) == (400, text + "\n"), body
    for body in ({}, {"id": ""}, None):
        status, _, got = call(ex, "POST", "/kill_process", body, raw=b"{}" if body is None else None)
        assert (status, got) == (400, "Process ID is required\n")
    status, _, got = call(ex, "POST", "/kill_process", raw=b"nope")
    assert (status, got) == (400, "Invalid request\n")
    for method, path in [("GET", "/start_process"), ("POST", "/list_processes"),
                         ("GET", "/kill_process"), ("POST", "/process_logs_streaming?id=x")]:
        status, _, got = call(ex, method, path)
        assert (status, got) == (405, "Method not allowed\n"), (method, path)


def test_process_logs_streaming_history_live_complete(ex):
    pid = start(ex, "echo one; echo err1 >&2; printf 'two\\r\\n'; sleep 0.5; echo three; "
                    "printf tail")
    conn = http.client.HTTPConnection("127.0.0.1", ex.port, timeout=30)
    conn.request("GET", "/process_logs_streaming?id=" + pid,
                 headers={"Authorization": "Bearer " + ex.secret})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    ev = events(resp.read().decode())
    conn.close()
    assert ev[-1] == ("complete", {"message": "stream ended"})
    logs = [d for e, d in ev[:-1]]
    assert all(e == "log" for e, _ in ev[:-1])
    for d in logs:
        assert list(d) == ["timestamp", "stream", "data"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z", d["timestamp"])
    assert [d["data"] for d in logs if d["stream"] == "stdout"] == ["one", "two", "three", "tail"]
    assert [d["data"] for d in logs if d["stream"] == "stderr"] == ["err1"]
    # an ended process: everything held, then complete
    status, _, text = call(ex, "GET", "/process_logs_streaming?id=" + pid)
    ev2 = events(text)
    assert [d["data"] for e, d in ev2 if e == "log" and d["stream"] == "stdout"] == \
        ["one", "two", "three", "tail"]
    assert ev2[-1] == ("complete", {"message": "stream ended"})


def test_process_logs_streaming_errors(ex):
    status, resp, text = call(ex, "GET", "/process_logs_streaming?id=nope")
    assert status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    assert events(text) == [("error", {"error": "process not found: nope"})]
    status, _, text = call(ex, "GET", "/process_logs_streaming")
    assert (status, text) == (400, "Process ID is required\n")


def test_native_api_keeps_its_ids_for_the_same_processes(ex):
    pid = start(ex, "exit 5")
    wait_status(ex, pid, "failed")
    status, res = api(ex.sock, "GET", "/v1/list_processes")
    mine = [p for p in res["processes"] if p["uuid"] == pid]
    assert len(mine) == 1 and mine[0]["id"].startswith("p") and mine[0]["exit_code"] == 5


# ---- the unix socket serves the same contract, without a secret ----

def test_unix_socket_contract(ex):
    status, res = api(ex.sock, "POST", "/run", {"cmd": "exit 2"})
    assert (status, res) == (200, {"stdout": "", "stderr": "", "error": "Non-zero exit code",
                                   "code": 2})
    status, res = api(ex.sock, "POST", "/run", {"cmd": "true", "cwd": "/nope"})
    assert (status, res) == (400, "Invalid working directory: /nope\n")
    status, res = api(ex.sock, "POST", "/list_dir", {"path": "/nope"})
    assert res == {"error": "open /nope: no such file or directory"}
    # the native API is under /v1/
    status, res = api(ex.sock, "POST", "/v1/run", {"cmd": "exit 2"})
    assert (status, res["exit_code"], res["status"]) == (200, 2, "exited")


def test_executor_port_in_use_names_it(tmp_path):
    h = Hutch(tmp_path / "rt")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        r = h("create", "--executor-port", str(port))
        assert r.returncode != 0
        assert ("127.0.0.1:%d is already in use" % port).encode() in r.stderr
        assert h.ids() == []
    finally:
        s.close()
        h("gc")


@pytest.mark.parametrize("value", ["70000", "x", "1.2.3:80", ":80", "-1", "80x"])
def test_executor_port_invalid(tmp_path, value):
    r = Hutch(tmp_path / "rt")("create", "--executor-port", value)
    assert r.returncode == 64 and b"executor-port" in r.stderr


# ---- the real cloud client ----

SDK_GIT = os.environ.get("HUTCH_KOYEB_SDK_GIT", "/work/.mirror/koyeb+koyeb-python-sdk/repo")


def _sdk_source(path):
    r = subprocess.run(["git", "--git-dir", SDK_GIT, "show", "HEAD:" + path],
                       capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


@pytest.fixture(scope="module")
def koyeb():
    """koyeb.sandbox.executor_client and exec as modules, from a checkout of
    the SDK (not vendored). Its utils module pulls in the whole generated
    cloud API client: the three names executor_client and exec take from it
    are given by a stand-in."""
    pytest.importorskip("httpx")
    src = {m: _sdk_source("koyeb/sandbox/%s.py" % m) for m in ("executor_client", "exec")}
    if not all(src.values()):
        pytest.skip("no checkout of koyeb-python-sdk at %s (HUTCH_KOYEB_SDK_GIT)" % SDK_GIT)
    pkg = types.ModuleType("koyeb_sdk_sandbox")
    pkg.__path__ = []
    utils = types.ModuleType("koyeb_sdk_sandbox.utils")

    class SandboxError(Exception):
        pass

    class SandboxServiceError(SandboxError):
        def __init__(self, status_code, message):
            super().__init__(message)
            self.status_code = status_code

    utils.DEFAULT_HTTP_TIMEOUT = 30
    utils.SandboxError = SandboxError
    utils.SandboxServiceError = SandboxServiceError
    utils.SandboxTimeoutError = type("SandboxTimeoutError", (SandboxError,), {})
    mods = {"koyeb_sdk_sandbox": pkg, "koyeb_sdk_sandbox.utils": utils}
    saved = {k: sys.modules.get(k) for k in list(mods) + ["koyeb_sdk_sandbox.executor_client",
                                                           "koyeb_sdk_sandbox.exec"]}
    sys.modules.update(mods)
    try:
        out = {}
        for name in ("executor_client", "exec"):
            m = types.ModuleType("koyeb_sdk_sandbox." + name)
            m.__package__ = "koyeb_sdk_sandbox"
            sys.modules[m.__name__] = m
            exec(compile(src[name], "koyeb/sandbox/%s.py" % name, "exec"), m.__dict__)
            out[name] = m
        yield types.SimpleNamespace(**out, utils=utils)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


@pytest.fixture
def client(ex, koyeb, monkeypatch):
    for k in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(k, raising=False)
    ec = koyeb.executor_client
    c = ec.SandboxClient(ec.ConnectionInfo(public_url=ex.url, routing_key=None,
                                           secret=ex.secret))
    yield c
    c.close()


def test_koyeb_client_commands(client, koyeb):
    assert client.health() == {"status": "ok"}
    assert client.run("echo hi") == {"stdout": "hi\n", "stderr": "", "code": 0}
    r = client.run("false")
    assert r["code"] == 1 and r["error"] == "Non-zero exit code"
    ev = list(client.run_streaming("echo a; echo b >&2; exit 4"))
    assert {"stream": "stdout", "data": "a"} in ev and {"stream": "stderr", "data": "b"} in ev
    assert ev[-1] == {"code": 4, "error": True}
    # exec.py's SandboxExecutor, as sandbox.exec(...) runs it
    sandbox = types.SimpleNamespace(_get_client=lambda: client)
    run = koyeb.exec.SandboxExecutor(sandbox)
    res = run("echo ok; exit 3")
    assert (res.stdout, res.exit_code, res.success) == ("ok\n", 3, False)
    res = run("echo ok")
    assert (res.exit_code, res.success) == (0, True)
    seen = []
    res = run("echo x; echo y", on_stdout=seen.append)
    assert (seen, res.exit_code) == (["x", "y"], 0)
    res = run("exit 9", on_stderr=seen.append)
    assert (res.exit_code, res.status.value) == (9, "failed")


def test_koyeb_client_files(client):
    client.run("rm -rf /workspace/k; mkdir /workspace/k")
    assert client.write_file("/workspace/k/a", "data")["success"] is True
    assert client.read_file("/workspace/k/a") == {"content": "data"}
    assert client.make_dir("/workspace/k/d/e") == {"success": True}
    assert client.list_dir("/workspace/k") == {"entries": ["a", "d"]}
    assert client.delete_file("/workspace/k/a") == {"success": True}
    assert client.delete_dir("/workspace/k/d") == {"success": True}
    assert "no such file" in client.read_file("/workspace/k/a")["error"]
    assert client.write_file("/workspace/k/x/y", "z")["success"] is False


def test_koyeb_client_processes(client):
    pid = client.start_process("sleep 60")["id"]
    assert UUID_RE.match(pid)
    done = client.start_process("true", cwd="/tmp", env={"A": "b"})["id"]
    procs = client.list_processes()["processes"]
    # sandbox.py: [ProcessInfo(**p) for p in processes]; ProcessInfo's fields
    fields = {"id", "command", "status", "pid", "exit_code", "started_at", "completed_at"}
    assert all(set(p) <= fields for p in procs)
    assert {p["id"]: p["status"] for p in procs}[pid] == "running"
    assert client.kill_process(pid) == {"success": True,
                                        "message": "Process killed successfully"}
    assert {p["id"]: p["status"] for p in client.list_processes()["processes"]}[pid] == "killed"
    end = time.time() + 10
    while {p["id"]: p["status"] for p in client.list_processes()["processes"]}[done] != \
            "completed":
        assert time.time() < end
        time.sleep(0.05)


def test_koyeb_client_wrong_secret(ex, koyeb, monkeypatch):
    import httpx
    monkeypatch.delenv("http_proxy", raising=False)
    ec = koyeb.executor_client
    c = ec.SandboxClient(ec.ConnectionInfo(public_url=ex.url, routing_key=None, secret="nope"))
    try:
        assert c.health() == {"status": "ok"}
        with pytest.raises(httpx.HTTPStatusError) as e:
            c.run("touch /workspace/koyeb-pwned")
        assert e.value.response.status_code == 401
    finally:
        c.close()
    assert native_run(ex, "test -e /workspace/koyeb-pwned")["exit_code"] == 1


# ---- from inside the sandbox ----

CONNECT = ("import socket, sys\n"
           "s = socket.socket(); s.settimeout(3)\n"
           "try:\n"
           "    s.connect((sys.argv[1], int(sys.argv[2]))); print('connected')\n"
           "except OSError as e:\n"
           "    print('refused', e)\n")


@pytest.mark.parametrize("network", ["none", "all"])
def test_sandbox_cannot_reach_its_own_executor_listener(own_net, tmp_path, network):
    """The listener is on the host's loopback; the sandbox's 127.0.0.1 is its
    own (a netns of its own in every mode), and the host is out of reach in
    mode all: a command inside cannot use the TCP API to act outside its
    request, nor read the secret."""
    h = Hutch(tmp_path / "rt")
    r = h("create", "--executor-port", "0", "--network", network, "--json")
    assert r.returncode == 0, r.stderr.decode()
    info = json.loads(r.stdout)
    try:
        port = info["executor"]["port"]
        targets = ["127.0.0.1"]
        if network == "all":
            route = api(info["socket"], "POST", "/v1/run", {"cmd": "cat /proc/net/route"})[1]
            gw = [socket.inet_ntoa(bytes.fromhex(f[2])[::-1])
                  for f in (ln.split() for ln in route["stdout"].splitlines()[1:])
                  if f[1] == "00000000"]
            assert len(gw) == 1, route  # the host's end of the sandbox's link
            targets += gw
        for addr in targets:
            status, res = api(info["socket"], "POST", "/v1/run",
                              {"argv": ["python3", "-c", CONNECT, addr, str(port)]})
            assert status == 200 and res["stdout"].startswith("refused"), (addr, res)
        secret_path = os.path.join(h.rtdir, info["id"], "executor.secret")
        status, res = api(info["socket"], "POST", "/v1/run", {
            "cmd": "test -e %s && echo visible; grep -rl %s /workspace /tmp /home /etc "
                   "2>/dev/null | head -1" % (secret_path, info["executor"]["secret"][:16]),
            "timeout": 30})
        assert res["stdout"] == "", res
    finally:
        h("rm", "--all")
        h("gc")
