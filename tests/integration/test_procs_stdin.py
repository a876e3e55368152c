# SPDX-License-Identifier: Apache-2.0
"""Standard input of background processes (issue 12): /start_process with
"stdin": true, POST /process_stdin (raw bytes, exact, back-pressure, one
writer at a time, eof), and the CLI's exec -d -i and hutch stdin."""
import base64
import hashlib
import os
import socket
import subprocess
import threading

from conftest import HUTCH, UnixHTTPConnection, wait_until
from test_procs import assert_error, listing, output, start, wait_done


def send(sb, pid, data=b"", eof=None, timeout=60):
    q = f"/process_stdin?id={pid}" + ("" if eof is None else f"&eof={eof}")
    return sb.api("POST", q, raw=data, timeout=timeout,
                  headers={"Content-Type": "application/octet-stream"})


def out_bytes(sb, pid):
    res = output(sb, pid, encoding="base64")
    return base64.b64decode(res["data"])


def test_every_byte_value_and_3mb_random_arrive_exact(sandbox):
    res = start(sandbox, {"argv": ["sha256sum"], "stdin": True})
    assert res["stdin_open"] is True and res["stdin_bytes"] == 0
    every = bytes(range(256))
    blob = os.urandom(3 << 20)
    status, res = send(sandbox, "p1", every)
    assert status == 200 and res == {"id": "p1", "stdin_bytes": 256, "stdin_open": True}
    status, res = send(sandbox, "p1", blob)  # beyond any pipe: back-pressure
    assert status == 200 and res["stdin_bytes"] == 256 + len(blob)
    status, res = send(sandbox, "p1", eof="true")
    assert status == 200 and res["stdin_open"] is False
    p = wait_done(sandbox, "p1")
    assert p["exit_code"] == 0 and p["stdin_open"] is False and p["stdin_bytes"] == 256 + len(blob)
    want = hashlib.sha256(every + blob).hexdigest()
    assert output(sandbox, "p1")["data"] == f"{want}  -\n"


def test_stdin_written_later_reaches_the_running_process_in_order(sandbox):
    start(sandbox, {"argv": ["cat"], "stdin": True})
    send(sandbox, "p1", b"\x00first\xff\n")
    assert wait_until(lambda: out_bytes(sandbox, "p1") == b"\x00first\xff\n")
    assert listing(sandbox)["p1"]["status"] == "running"  # it waits for more
    status, _ = send(sandbox, "p1", b"\r\nsecond", eof="true")  # data, then end of file
    assert status == 200
    assert wait_done(sandbox, "p1")["exit_code"] == 0
    assert out_bytes(sandbox, "p1") == b"\x00first\xff\n\r\nsecond"


def test_error_paths(sandbox):
    start(sandbox, {"cmd": "cat >/dev/null", "stdin": True})
    start(sandbox, {"cmd": "sleep 100"})  # p2: no stdin
    status, res = sandbox.api("POST", "/process_stdin", raw=b"x")
    assert_error(status, res, 400, "invalid_request", "missing query parameter 'id'")
    status, res = send(sandbox, "p1", b"x", eof="maybe")
    assert_error(status, res, 400, "invalid_request", "'eof' must be true or false")
    status, res = send(sandbox, "p9", b"x")
    assert_error(status, res, 404, "process_not_found", "p9")
    status, res = send(sandbox, "p2", b"x")
    assert_error(status, res, 409, "stdin_closed", 'without "stdin": true')
    status, res = sandbox.api("GET", "/process_stdin?id=p1")
    assert status == 405
    assert send(sandbox, "p1", eof="true")[0] == 200
    status, res = send(sandbox, "p1", b"late")
    assert_error(status, res, 409, "stdin_closed", "closed", "0 bytes")
    assert send(sandbox, "p1", eof="true")[0] == 200  # closing twice is fine
    wait_done(sandbox, "p1")
    status, res = send(sandbox, "p1", b"x")
    assert_error(status, res, 409, "stdin_closed", "the process ended")
    status, res = start_raw(sandbox, b'{"cmd": "cat", "stdin": 1}')
    assert_error(status, res, 400, "invalid_request", "'stdin' must be true")


def start_raw(sb, body):
    return sb.api("POST", "/v1/start_process", raw=body)


def test_one_writer_at_a_time_and_a_process_that_does_not_read(sandbox):
    # sleep never reads: the first writer fills the pipe and waits
    start(sandbox, {"cmd": "sleep 1000", "stdin": True})
    box = {}

    def writer():
        box["r"] = send(sandbox, "p1", os.urandom(4 << 20), timeout=120)
    t = threading.Thread(target=writer)
    t.start()
    # while it waits, a second writer is refused (the pieces would interleave)
    assert wait_until(lambda: send(sandbox, "p1", b"x")[0] == 409, timeout=20)
    status, res = send(sandbox, "p1", b"x")
    assert_error(status, res, 409, "stdin_busy", "one after the other")
    # the process dies: the waiting writer is answered, with what went in
    status, res = sandbox.api("POST", "/v1/kill_process", {"id": "p1", "grace_seconds": 0})
    assert status == 200
    t.join(60)
    assert not t.is_alive()
    status, res = box["r"]
    assert_error(status, res, 409, "stdin_closed", "the process ended")


def test_a_writer_that_hangs_up_releases_stdin(sandbox):
    # it reads only once told to: the writer's body fills the pipe first
    start(sandbox, {"cmd": "while [ ! -e /tmp/go ]; do sleep 0.05; done; cat", "stdin": True})
    body = os.urandom(4 << 20)
    s = socket.socket(socket.AF_UNIX)
    s.connect(sandbox.sock)
    s.sendall(b"POST /process_stdin?id=p1 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
              % len(body))
    s.settimeout(2)
    sent = 0
    try:
        while sent < len(body):
            sent += s.send(body[sent:sent + 65536])
    except socket.timeout:
        pass  # the pipe is full: the supervisor stopped reading us
    assert sent < len(body)
    assert send(sandbox, "p1", b"x")[1]["error"]["code"] == "stdin_busy"
    s.close()  # the writer hangs up while it waits
    # a new writer gets stdin once the first one is gone (not stdin_busy)
    assert wait_until(lambda: send(sandbox, "p1", b"", eof="true")[0] == 200, timeout=30)
    sandbox.sh("touch /tmp/go")
    p = wait_done(sandbox, "p1", timeout=30)
    assert p["exit_code"] == 0 and 0 < p["stdin_bytes"] <= sent


def test_cli_exec_d_i_and_hutch_stdin(hutch, sandbox):
    r = hutch("exec", "-d", "-i", sandbox.id, "--", "sha256sum")
    assert r.returncode == 0, r.stderr
    pid = r.stdout.decode().strip()
    blob = bytes(range(256)) * 7 + os.urandom(3 << 20)
    r = hutch("stdin", sandbox.id, pid, input=blob[:1000])
    assert r.returncode == 0, r.stderr
    r = hutch("stdin", sandbox.id, pid, "--close", input=blob[1000:])
    assert r.returncode == 0, r.stderr
    wait_done(sandbox, pid)
    r = hutch("logs", sandbox.id, pid)
    assert r.stdout.decode() == hashlib.sha256(blob).hexdigest() + "  -\n"
    # its stdin is closed now; and exec -d without -i never had one
    r = hutch("stdin", sandbox.id, pid, input=b"x")
    assert r.returncode == 70 and b"standard input of process" in r.stderr
    r = hutch("exec", "-d", sandbox.id, "--", "sleep", "100")
    pid2 = r.stdout.decode().strip()
    r = hutch("stdin", sandbox.id, pid2, input=b"x")
    assert r.returncode == 70 and b'without "stdin": true' in r.stderr
    r = hutch("stdin", sandbox.id, "p99", input=b"x")
    assert r.returncode == 65
    # stdin a directory (< DIR): usage, said before anything is sent (70 before)
    d = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        r = subprocess.run([HUTCH, "stdin", sandbox.id, pid2], stdin=d, capture_output=True,
                           env=hutch.env, timeout=60)
    finally:
        os.close(d)
    assert r.returncode == 64 and b"standard input is a directory" in r.stderr, r.stderr
    assert listing(sandbox)[pid2]["status"] == "running"
    r = hutch("stdin", sandbox.id, input=b"x")
    assert r.returncode == 64
    r = hutch("exec", "-d", "-t", sandbox.id, "--", "cat")
    assert r.returncode == 64 and b"exec -d" in r.stderr
