# SPDX-License-Identifier: Apache-2.0
"""Exact bytes and streamed stdin (issue 12): POST /exec's framed stream
through the CLI (exec -i, run -i) and raw sockets, /run's base64 form, the
half-close of issue 18 #7, and the supervisor's memory under a client that
does not read."""
import base64
import hashlib
import json
import os
import random
import signal
import socket
import struct
import subprocess
import threading

import pytest

from conftest import HUTCH, proc_status_kib, sse_events, wait_until

STDIN, STDOUT, STDERR, EXIT, ERROR, RESIZE, SIGNAL = range(7)


def frame(kind, data=b""):
    return struct.pack(">BI", kind, len(data)) + data


class Exec:
    """POST /exec on a raw socket: the upgrade, then frames both ways."""

    def __init__(self, sock_path, body, headers=None, tail=b""):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(60)
        self.s.connect(sock_path)
        data = json.dumps(body).encode()
        hdrs = headers if headers is not None else {"Connection": "Upgrade",
                                                     "Upgrade": "hutch-exec"}
        head = "POST /exec HTTP/1.1\r\nHost: x\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in hdrs.items()) + f"Content-Length: {len(data)}\r\n\r\n"
        self.s.sendall(head.encode() + data + tail)
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                break
            self.buf += chunk
        self.head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        self.status = int(self.head.split()[1]) if self.head else 0

    def send(self, kind, data=b""):
        self.s.sendall(frame(kind, data))

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError
            self.buf += chunk

    def next(self):
        self._need(5)
        kind, n = struct.unpack(">BI", self.buf[:5])
        self._need(5 + n)
        data, self.buf = self.buf[5:5 + n], self.buf[5 + n:]
        return kind, data

    def collect(self):
        """Every frame to the last: (stdout, stderr, kind, result)."""
        out, err = bytearray(), bytearray()
        while True:
            kind, data = self.next()
            if kind == STDOUT:
                out += data
            elif kind == STDERR:
                err += data
            else:
                return bytes(out), bytes(err), kind, json.loads(data)

    def close(self):
        self.s.close()


def cli(hutch, *args, **kw):
    return subprocess.run([HUTCH, *args], env=hutch.env, capture_output=True,
                          timeout=kw.pop("timeout", 120), **kw)


# ---- bytes exact through the CLI ----

def test_gib_of_random_bytes_in_and_out(hutch, sandbox, tmp_path):
    # 1 GiB through exec -i into sha256sum, and into a file that exec
    # without -i then reads back out: every hash is the host's.
    src = tmp_path / "random"
    with open(src, "wb") as f:
        rnd = random.Random(12)
        for _ in range(1024):
            f.write(rnd.randbytes(1 << 20))
    want = hashlib.sha256(src.read_bytes()).hexdigest()
    with open(src, "rb") as f:
        r = cli(hutch, "exec", "-i", sandbox.id, "--", "sha256sum", stdin=f)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0].decode() == want
    with open(src, "rb") as f:
        r = cli(hutch, "exec", "-i", sandbox.id, "--", "sh", "-c", "cat > /workspace/big", stdin=f)
    assert r.returncode == 0, r.stderr
    os.unlink(src)
    p = subprocess.Popen([HUTCH, "exec", sandbox.id, "--", "cat", "/workspace/big"],
                         env=hutch.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    h, n = hashlib.sha256(), 0
    for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
        h.update(chunk)
        n += len(chunk)
    assert p.wait(timeout=120) == 0
    assert n == 1 << 30 and h.hexdigest() == want


@pytest.mark.parametrize("data", [b"\x00", b"a\x00b\x00", b"\xff\xfe\x80", b"\r", b"x\ry\r",
                                  b"\xe2\x82", bytes(range(256))])
def test_awkward_bytes_round_trip(hutch, sandbox, data):
    r = cli(hutch, "exec", "-i", sandbox.id, "--", "cat", input=data)
    assert r.returncode == 0 and r.stdout == data, r
    # stderr too, kept apart from stdout
    r = cli(hutch, "exec", "-i", sandbox.id, "--", "sh", "-c", "cat >&2; printf o", input=data)
    assert r.stdout == b"o" and r.stderr == data


def test_spliced_and_copied_streams_mix(hutch, sandbox, tmp_path):
    # stdin from a pipe and stderr to a pipe are spliced by the CLI; stdout
    # to a regular file is written; the two output streams interleave
    blob = os.urandom(3 << 20) + bytes(range(256))
    script = "head -c 1000000 >&2; cat; printf end >&2"
    with open(tmp_path / "out", "wb") as out:
        p = subprocess.Popen([HUTCH, "exec", "-i", sandbox.id, "--", "sh", "-c", script],
                             env=hutch.env, stdin=subprocess.PIPE, stdout=out,
                             stderr=subprocess.PIPE)
        err = p.communicate(blob, timeout=120)[1]
    assert p.returncode == 0
    assert err == blob[:1000000] + b"end"
    assert (tmp_path / "out").read_bytes() == blob[1000000:]
    # stdin from /dev/null and from a regular file
    r = subprocess.run([HUTCH, "exec", "-i", sandbox.id, "--", "wc", "-c"], env=hutch.env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert r.stdout.strip() == b"0"
    (tmp_path / "in").write_bytes(blob)
    with open(tmp_path / "in", "rb") as f:
        r = subprocess.run([HUTCH, "exec", "-i", sandbox.id, "--", "sha256sum"], env=hutch.env,
                           stdin=f, capture_output=True, timeout=60)
    assert r.stdout.split()[0].decode() == hashlib.sha256(blob).hexdigest()


def test_endless_stdin_to_a_command_that_exits_at_once(hutch, sandbox):
    # the CLI is splicing stdin when the sandbox ends the stream: no
    # SIGPIPE (141), the command's exit code (failed 4 in 10 before)
    for _ in range(10):
        yes = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
        r = subprocess.run([HUTCH, "exec", "-i", sandbox.id, "--", "sh", "-c", "exit 7"],
                           env=hutch.env, stdin=yes.stdout, capture_output=True, timeout=60)
        yes.kill()
        yes.wait()
        yes.stdout.close()
        assert r.returncode == 7, r


@pytest.mark.parametrize("size", [300_000, 700_000, 1_000_000])
def test_output_of_a_command_that_ends_while_the_client_waits(sandbox, size):
    # The client reads nothing until the command has exited: the supervisor
    # had spliced part of a frame when the socket filled, and takes the
    # rest from the pipes by reading; every byte arrives, in order, each
    # stream apart.
    sandbox.sh(f"head -c {size} /dev/urandom > /tmp/f")
    want = sandbox.run("base64 -w0 /tmp/f")["stdout"]
    want = base64.b64decode(want)
    x = Exec(sandbox.sock, {"cmd": "cat /tmp/f; cat /tmp/f >&2; printf x; printf y >&2"},
             tail=frame(STDIN))
    assert x.status == 101
    assert wait_until(lambda: sandbox.run("pgrep -x cat")["exit_code"] == 1, timeout=30)
    out, err, kind, res = x.collect()
    x.close()
    assert kind == EXIT and res["exit_code"] == 0
    assert out == want + b"x" and err == want + b"y"


def test_tar_pipe_reproduces_a_tree(hutch, sandbox, tmp_path):
    src = tmp_path / "src"
    (src / "bin").mkdir(parents=True)
    (src / "bin" / "true").write_bytes(open("/bin/true", "rb").read())
    os.chmod(src / "bin" / "true", 0o755)
    (src / "blob").write_bytes(random.Random(3).randbytes(3 << 20))
    (src / "empty").write_bytes(b"")
    os.symlink("blob", src / "link")
    tar = subprocess.Popen(["tar", "c", "-C", str(src), "."], stdout=subprocess.PIPE)
    r = cli(hutch, "exec", "-i", sandbox.id, "--", "sh", "-c",
            "mkdir -p /workspace/t && tar x -C /workspace/t", stdin=tar.stdout)
    assert tar.wait() == 0 and r.returncode == 0, r.stderr
    assert sandbox.run("/workspace/t/bin/true")["exit_code"] == 0
    dst = tmp_path / "dst"
    dst.mkdir()
    out = cli(hutch, "exec", sandbox.id, "--", "tar", "c", "-C", "/workspace/t", ".")
    assert out.returncode == 0
    subprocess.run(["tar", "x", "-C", str(dst)], input=out.stdout, check=True)
    for name in ("bin/true", "blob", "empty"):
        assert (dst / name).read_bytes() == (src / name).read_bytes(), name
    assert os.readlink(dst / "link") == "blob"
    assert os.stat(dst / "bin" / "true").st_mode & 0o111


# ---- stdin: opt-in, streamed ----

def test_stdin_is_not_read_without_i(hutch, sandbox):
    r = cli(hutch, "exec", sandbox.id, "--", "wc", "-c", input=b"ignored")
    assert r.stdout.strip() == b"0"
    # every line of a while-read loop reaches its own exec
    script = (f'printf "a\\nb\\nc\\n" | while read x; do "{HUTCH}" exec {sandbox.id} -- '
              f'echo "got $x"; done')
    r = subprocess.run(["sh", "-c", script], env=hutch.env, capture_output=True, timeout=60)
    assert r.stdout == b"got a\ngot b\ngot c\n", r


def test_command_starts_before_stdin_ends(hutch, sandbox):
    # Without -i: a writer that never closes does not hold the command.
    r, w = os.pipe()
    try:
        res = cli(hutch, "exec", sandbox.id, "--", "echo", "hi", stdin=r, timeout=30)
        assert res.stdout == b"hi\n"
        # With -i: the command runs (and answers) while its input is open.
        p = subprocess.Popen([HUTCH, "exec", "-i", sandbox.id, "--", "sh", "-c",
                              "echo started; read line; echo \"line=$line\"; cat"],
                             env=hutch.env, stdin=r, stdout=subprocess.PIPE)
        os.close(r)
        r = -1
        assert p.stdout.readline() == b"started\n"
        os.write(w, b"one\n")
        assert p.stdout.readline() == b"line=one\n"
        os.write(w, b"rest")
        os.close(w)
        w = -1
        assert p.stdout.read() == b"rest" and p.wait(timeout=30) == 0
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)


def test_sigint_while_streaming_stdin_kills_the_command(hutch, sandbox):
    r, w = os.pipe()
    try:
        p = subprocess.Popen([HUTCH, "exec", "-i", sandbox.id, "--", "sh", "-c",
                              "cat > /tmp/got; touch /tmp/finished"],
                             env=hutch.env, stdin=r, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        os.close(r)
        os.write(w, b"partial input")
        assert wait_until(lambda: sandbox.run("cat /tmp/got 2>/dev/null")["stdout"] ==
                          "partial input", timeout=20)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
    finally:
        os.close(w)
    assert p.returncode == 130
    assert wait_until(lambda: sandbox.run("pgrep -x cat")["exit_code"] == 1, timeout=10)
    assert sandbox.run("test -e /tmp/finished")["exit_code"] == 1


def test_run_i_streams_stdin(hutch):
    r = cli(hutch, "run", "-i", "--", "sh", "-c", "cat; exit 4", input=b"\x00to run\xff")
    assert r.returncode == 4 and r.stdout == b"\x00to run\xff"


# ---- POST /exec on the wire ----

def test_exec_frames_and_exit(sandbox):
    x = Exec(sandbox.sock, {"argv": ["sh", "-c", "cat; echo e >&2; exit 7"]})
    assert x.status == 101 and b"hutch-exec" in x.head
    x.send(STDIN, b"\x00\xff")
    x.send(STDIN, b"more")
    x.send(STDIN)
    out, err, kind, res = x.collect()
    x.close()
    assert (out, err, kind) == (b"\x00\xffmore", b"e\n", EXIT)
    assert res["exit_code"] == 7 and res["status"] == "exited"


def test_exec_half_close_ends_stdin_not_the_command(sandbox):
    # issue 18 #7: a client that half-closes has sent all its input.
    x = Exec(sandbox.sock, {"cmd": "cat; sleep 0.2; echo after"})
    x.send(STDIN, b"in")
    x.s.shutdown(socket.SHUT_WR)
    out, _, kind, res = x.collect()
    x.close()
    assert out == b"inafter\n" and kind == EXIT and res["exit_code"] == 0


@pytest.mark.parametrize("path", ["/v1/run", "/v1/run_streaming"])
def test_half_close_after_a_request_is_not_a_hang_up(sandbox, path):
    body = json.dumps({"cmd": "sleep 0.5; echo done"}).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sandbox.sock)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (path.encode(), len(body))
              + body)
    s.shutdown(socket.SHUT_WR)
    data = b""
    while b'"exit_code":0' not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    assert b'"exit_code":0' in data and b"done" in data, data


def test_exec_hang_up_kills_the_command(sandbox):
    x = Exec(sandbox.sock, {"cmd": "sleep 1000"})
    assert x.status == 101
    assert wait_until(lambda: sandbox.run("pgrep -x sleep")["exit_code"] == 0)
    x.close()
    assert wait_until(lambda: sandbox.run("pgrep -x sleep")["exit_code"] == 1, timeout=10)


def test_exec_broken_frame_kills_the_command(sandbox):
    x = Exec(sandbox.sock, {"cmd": "sleep 1000"})
    assert wait_until(lambda: sandbox.run("pgrep -x sleep")["exit_code"] == 0)
    x.s.sendall(struct.pack(">BI", 99, 0))  # no such type
    assert x.s.recv(100) == b""  # closed
    x.close()
    assert wait_until(lambda: sandbox.run("pgrep -x sleep")["exit_code"] == 1, timeout=10)
    x = Exec(sandbox.sock, {"cmd": "cat"})
    x.s.sendall(struct.pack(">BI", STDIN, (1 << 20) + 1))  # over the bound
    assert x.s.recv(100) == b""
    x.close()
    assert sandbox.sh("echo alive") == "alive\n"


def test_exec_signal_frame(sandbox):
    # one process, no shell: what SIGTERM does to it is its handler alone
    x = Exec(sandbox.sock, {"argv": ["python3", "-c",
                                     "import os, signal, time\n"
                                     "def term(*a):\n"  # no print(): it may interrupt one
                                     "    os.write(1, b'term\\n')\n"
                                     "    os._exit(5)\n"
                                     "signal.signal(signal.SIGTERM, term)\n"
                                     "print('ready', flush=True)\n"
                                     "time.sleep(100)\n"]})
    assert x.next() == (STDOUT, b"ready\n")
    x.send(SIGNAL, struct.pack(">I", signal.SIGTERM))
    out, _, kind, res = x.collect()
    x.close()
    assert out == b"term\n" and res["exit_code"] == 5, (out, res)


def test_exec_refusals(sandbox):
    x = Exec(sandbox.sock, {"cmd": "true"}, headers={})
    assert x.status == 426 and b"upgrade_required" in x.buf
    x.close()
    x = Exec(sandbox.sock, {"cmd": "true", "stdin": "x"})
    assert x.status == 400 and b"frames" in x.buf
    x.close()
    x = Exec(sandbox.sock, {"cmdd": "true"})
    assert x.status == 400 and b"unknown field" in x.buf
    x.close()


def test_exec_output_waits_for_a_slow_client_with_flat_memory(sandbox):
    # 256 MiB of output to a client that reads nothing for a while: the
    # command is paused, not buffered in the supervisor.
    x = Exec(sandbox.sock, {"cmd": "head -c 268435456 /dev/zero; echo end >&2"}, tail=frame(STDIN))
    pid = sandbox.api("GET", "/status")[1]["supervisor_pid"]
    # the command stops (its pipe is full) with most of it unsent
    assert wait_until(lambda: sandbox.run("pgrep -x head")["exit_code"] == 0)
    before = proc_status_kib(pid, "VmRSS")
    threading.Event().wait(0.5)
    assert proc_status_kib(pid, "VmRSS") < before + 16 * 1024
    n = 0
    while True:
        kind, data = x.next()
        if kind == STDOUT:
            n += len(data)
        elif kind != STDERR:
            break
    x.close()
    assert n == 268435456 and kind == EXIT
    assert proc_status_kib(pid, "VmHWM") < 64 * 1024


def test_sandbox_deleted_during_exec_ends_with_an_error_frame(hutch):
    sb = hutch.create()
    x = Exec(sb.sock, {"cmd": "sleep 1000"})
    assert x.status == 101
    threading.Thread(target=sb.rm).start()
    _, _, kind, res = x.collect()
    x.close()
    assert kind == ERROR and res["error"]["code"] == "sandbox_deleted"


# ---- /run's byte-exact form ----

def test_run_base64_both_ways(sandbox):
    data = bytes(range(256)) + b"\r\x00"
    res = sandbox.run("cat; printf '\\377' >&2", stdin=base64.b64encode(data).decode(),
                      encoding="base64")
    assert res["encoding"] == "base64"
    assert base64.b64decode(res["stdout"]) == data
    assert base64.b64decode(res["stderr"]) == b"\xff"
    # the text form is unchanged
    res = sandbox.run("printf 'a\\377'")
    assert res["stdout"] == "a\ufffd" and "encoding" not in res


def test_run_streaming_base64(sandbox):
    events = sse_events(sandbox.sock, {"cmd": "printf '\\000\\377'", "encoding": "base64"})
    out = b"".join(base64.b64decode(d["data"]) for e, d in events if e == "stdout")
    assert out == b"\x00\xff" and events[-1][0] == "exit"


@pytest.mark.parametrize("body,words", [
    ({"cmd": "true", "encoding": "latin-1"}, ["'encoding' must be"]),
    ({"cmd": "true", "encoding": "base64", "stdin": "@@@"}, ["'stdin' is not valid base64"]),
])
def test_run_encoding_refusals(sandbox, body, words):
    status, res = sandbox.api("POST", "/v1/run", body)
    assert status == 400
    for w in words:
        assert w in res["error"]["message"]
