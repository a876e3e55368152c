# SPDX-License-Identifier: Apache-2.0
"""The HTTP API over the raw socket: bad requests get a JSON 4xx and the
supervisor goes on serving; /health, /status, keep-alive, slow clients."""
import json
import os
import socket
import threading
import time

import pytest

from conftest import UnixHTTPConnection, api, raw_http, wait_until


def healthy(sb):
    status, res = sb.api("GET", "/health", timeout=10)
    return status == 200 and res == {"status": "ok"}


def assert_error(status, res, want_status, want_code, *words):
    assert status == want_status, (status, res)
    assert isinstance(res, dict) and set(res) == {"error"}, res
    err = res["error"]
    assert err["code"] == want_code, res
    assert isinstance(err["message"], str) and err["message"]
    for w in words:
        assert w in err["message"], res


def test_health_and_status(sandbox):
    assert healthy(sandbox)
    st = sandbox.status()
    assert st["id"] == sandbox.id and st["state"] == "running"
    assert st["socket"] == sandbox.sock
    assert st["commands_running"] == 0
    assert 86300 < st["expires_in_seconds"] <= 86400
    assert st["config"]["instance_type"] == "medium" and st["config"]["network"] == "none"
    assert os.readlink(f"/proc/{st['supervisor_pid']}/ns/pid") == os.readlink("/proc/self/ns/pid")
    assert os.readlink(f"/proc/{st['init_pid']}/ns/pid") != os.readlink("/proc/self/ns/pid")


@pytest.mark.parametrize("body,words", [
    (b'{"cmd": ', ["invalid JSON", "byte"]),
    (b'{"cmd": "true",}', ["invalid JSON"]),
    (b"", ["invalid JSON"]),
    (b"\xff\xfe\x00", ["invalid JSON"]),
    (b'{"cmd": "true"} trailing', []),
    (b'[1, 2]', ["JSON object"]),
    (b'"cmd"', ["JSON object"]),
    (b'null', ["JSON object"]),
    (b'{"cmdd": "true"}', ["unknown field 'cmdd'"]),
    (b'{"cmd": "true", "argv": ["true"]}', ["not both"]),
    (b'{}', ["missing 'cmd'"]),
    (b'{"cmd": 1}', ["'cmd' must be a string"]),
    (b'{"cmd": null}', ["'cmd' must be a string"]),
    (b'{"argv": "true"}', ["'argv' must be an array"]),
    (b'{"argv": []}', ["'argv' is empty"]),
    (b'{"argv": [""]}', ["'argv[0]' is empty"]),
    (b'{"argv": ["echo", 1]}', ["'argv[1]' must be a string"]),
    (b'{"cmd": "true", "env": ["A=1"]}', ["'env' must be an object"]),
    (b'{"cmd": "true", "env": {"A": 1}}', ["'env.A' must be a string"]),
    (b'{"cmd": "true", "cwd": 5}', ["'cwd' must be a string"]),
    (b'{"cmd": "true", "cwd": ""}', ["'cwd' is empty"]),
    (b'{"cmd": "true", "stdin": 5}', ["'stdin' must be a string"]),
    (b'{"cmd": "true", "timeout": "1"}', ["'timeout'"]),
    (b'{"cmd": "true", "timeout": -1}', ["'timeout'"]),
    (b'{"cmd": "true", "max_output_bytes": 0}', ["'max_output_bytes'"]),
    (b'{"cmd": "true", "max_output_bytes": 1.5}', ["'max_output_bytes'"]),
])
@pytest.mark.parametrize("endpoint", ["/v1/run", "/v1/run_streaming"])
def test_bad_run_bodies(sandbox, endpoint, body, words):
    status, res = sandbox.api("POST", endpoint, raw=body)
    if body == b'{"cmd": "true"} trailing':
        # Trailing bytes after the object are refused, not ignored.
        assert status == 400, res
        return
    assert_error(status, res, 400, "invalid_request", *words)
    assert healthy(sandbox)
    assert sandbox.status()["commands_running"] == 0


def test_oversized_body_with_content_length(sandbox):
    # The bound is checked on the header, before any of the body is read:
    # the answer comes without the client sending the 9 MiB.
    head = (b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (9 << 20))
    out = raw_http(sandbox.sock, head + b'{"cmd": "true", "stdin": "xxxx', timeout=10)
    assert out.startswith(b"HTTP/1.1 413 "), out[:200]
    res = json.loads(out.split(b"\r\n\r\n", 1)[1])
    assert_error(413, res, 413, "too_large", "8388608")
    assert "PUT /files" in res["error"]["message"], res  # the fix
    assert healthy(sandbox)


def test_oversized_body_chunked(sandbox):
    # No Content-Length: the bound applies while the body streams in.
    conn = UnixHTTPConnection(sandbox.sock, timeout=30)
    chunk = b"x" * (1 << 20)

    def gen():
        yield b'{"cmd": "true", "stdin": "'
        for _ in range(9):
            yield chunk
        yield b'"}'

    try:
        conn.request("POST", "/v1/run", body=gen(), encode_chunked=True,
                     headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        resp = conn.getresponse()
        res = json.loads(resp.read())
        assert_error(resp.status, res, 413, "too_large")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may answer and close before the body is sent
    finally:
        conn.close()
    assert healthy(sandbox)


def test_body_just_under_the_bound_is_served(sandbox):
    stdin = "y" * ((8 << 20) - 100)
    res = sandbox.run("wc -c", stdin=stdin, timeout=30)
    assert res["stdout"].strip() == str(len(stdin))


def test_command_too_large_for_init(sandbox):
    status, res = sandbox.api("POST", "/v1/run", {"argv": ["true", "a" * (2 << 20)]})
    assert_error(status, res, 413, "too_large", "file")
    assert healthy(sandbox)


@pytest.mark.parametrize("method,path,want,code", [
    ("GET", "/nope", 404, "not_found"),
    ("POST", "/runx", 404, "not_found"),
    ("GET", "/run/../health", 404, "not_found"),
    ("GET", "/v1/run", 405, "method_not_allowed"),
    ("PUT", "/v1/run_streaming", 405, "method_not_allowed"),
    ("POST", "/v1/health", 405, "method_not_allowed"),
    ("DELETE", "/status", 405, "method_not_allowed"),
    ("GET", "/", 405, "method_not_allowed"),
])
def test_unknown_endpoint_and_wrong_method(sandbox, method, path, want, code):
    status, res = sandbox.api(method, path)
    assert_error(status, res, want, code, method)
    assert healthy(sandbox)


def test_a_wrong_endpoint_reads_the_body_and_keeps_the_connection(sandbox):
    conn = UnixHTTPConnection(sandbox.sock)
    try:
        body = b"{" + b" " * 50000 + b"}"
        conn.putrequest("POST", "/runx")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        conn.send(body)
        resp = conn.getresponse()
        assert resp.status == 404 and b"no endpoint POST /runx" in resp.read()
        assert not resp.will_close
        conn.request("POST", "/v1/run", body=json.dumps({"cmd": "echo ok"}).encode())
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["stdout"] == "ok\n"
    finally:
        conn.close()


@pytest.mark.parametrize("data", [
    b"\x00\x01\x02garbage\xff\xfe\r\n\r\n",
    b"HELLO\r\n\r\n",
    b"GET /health HTTP/9.9\r\n\r\n",
    b"GET /health\r\n\r\n",
    b"POST /v1/run HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    b"POST /v1/run HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    b"POST /v1/run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET /health HTTP/1.1\r\n" + b"X-Big: " + b"a" * 200000 + b"\r\n\r\n",
    b"\r\n" * 1000,
], ids=["binary", "no-method", "bad-version", "http09", "negative-length", "huge-length",
        "bad-chunk", "huge-header", "empty-lines"])
def test_garbage_that_is_not_http(sandbox, data):
    out = raw_http(sandbox.sock, data, timeout=1)
    # Whatever the server answers, it is an HTTP error or nothing at all
    # (a line it skips as empty leaves the connection waiting for a request
    # line), never a 2xx, and the supervisor keeps serving.
    if out:
        assert out.startswith(b"HTTP/1."), out[:100]
        assert int(out.split()[1]) >= 400, out[:200]
    assert healthy(sandbox)
    assert sandbox.sh("echo ok") == "ok\n"


def test_half_sent_request_does_not_block_others(sandbox):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sandbox.sock)
    s.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"cmd\":")
    try:
        assert healthy(sandbox)
        assert sandbox.sh("echo meanwhile") == "meanwhile\n"
    finally:
        s.close()
    assert healthy(sandbox)


def test_many_idle_connections(sandbox):
    socks = []
    try:
        for _ in range(100):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sandbox.sock)
            socks.append(s)
        assert healthy(sandbox)
    finally:
        for s in socks:
            s.close()
    assert healthy(sandbox)


def test_keep_alive(sandbox):
    conn = UnixHTTPConnection(sandbox.sock, timeout=10)
    try:
        for i in range(5):
            conn.request("POST", "/v1/run", body=json.dumps({"cmd": f"echo {i}"}).encode(),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            assert json.loads(resp.read())["stdout"] == f"{i}\n"
        conn.request("GET", "/health")
        resp = conn.getresponse()
        assert json.loads(resp.read()) == {"status": "ok"}
    finally:
        conn.close()


def test_socket_is_root_only(sandbox):
    st = os.stat(sandbox.sock)
    assert st.st_uid == 0 and st.st_mode & 0o777 == 0o600


def test_delete_answers_and_later_requests_fail_cleanly(hutch):
    sb = hutch.create()
    status, res = sb.api("DELETE", "/")
    assert status == 200 and res == {"id": sb.id, "deleted": True}
    # The socket is gone with the state dir: a client gets a connection
    # error, and the CLI says the sandbox was deleted.
    assert not os.path.exists(sb.sock)
    r = hutch("exec", sb.id, "--", "true")
    assert r.returncode == 66 and b"deleted" in r.stderr


def test_body_refusals_name_the_fix_and_change_nothing(sandbox):
    """Refusals of /diff, /run, /snapshot and /process_output that no
    other test reached: 400, the endpoint's code, the words that name the
    fix; no snapshot made, the process untouched."""
    st, res = sandbox.api("POST", "/v1/start_process", {"cmd": "printf abc"})
    assert st == 200 and res["id"] == "p1", res
    assert wait_until(lambda: sandbox.api("GET", "/v1/list_processes")[1]
                      ["processes"][0]["status"] != "running", 30)
    cases = [
        ("POST", "/v1/diff", None, b"[1]", "invalid_json",
         ["the body must be a JSON object", '{"since_command": SEQ}']),
        ("POST", "/v1/diff", {"since_command": 1, "since_snapshot": "x"}, None,
         "invalid_request", ["give one of 'since_command', 'since_snapshot', 'since_process'"]),
        ("POST", "/v1/run", {"cmd": "true", "tty": {"rows": 24, "cols": 80}}, None,
         "invalid_request", ["'tty' needs a stream both ways: use POST /exec"]),
        ("POST", "/v1/snapshot", {"type": "bogus"}, None, "invalid_request",
         ["'type' must be \"filesystem\" or \"full\""]),
        ("POST", "/v1/snapshot", {"env": ["1X=y"]}, None, "invalid_request",
         ["'env' must be at most 128 \"NAME=VALUE\" strings"]),
        ("POST", "/v1/snapshot", None, b"[1]", "invalid_json",
         ["the body must be a JSON object: {\"name\": \"NAME\"}"]),
        ("GET", "/v1/process_output?id=p1&offset=99", None, None, "invalid_request",
         ["'offset' 99 is past the end of stdout (3 bytes written so far)"]),
    ]
    for method, path, body, raw, code, words in cases:
        st, res = sandbox.api(method, path, body, raw=raw)
        assert_error(st, res, 400, code, *words)
    st, res = sandbox.api("GET", "/v1/process_output?id=p1")
    assert st == 200 and res["data"] == "abc", res
    assert not os.path.exists(sandbox.hutch.env["HUTCH_IMAGE_STORE"])
