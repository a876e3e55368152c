# SPDX-License-Identifier: Apache-2.0
"""The Python client over POST /exec (issue 12): execute_stream's callbacks
(bytes exact, decoded text, order, streamed stdin), the pty API (create,
input, resize, read, on_data, wait, kill; sync and asyncio) and stdin for
background processes (send_stdin, close_stdin). Against real sandboxes, as
root, like test_client.py."""
import asyncio
import hashlib
import os
import re
import threading
import time

import pytest

import hutch
from hutch import LocalSandbox, PtySize

# the same runtime directory per test, binary and skips as test_client.py
from test_client import pytestmark, runtime_dir  # noqa: F401,E402


@pytest.fixture
def sb():
    with LocalSandbox() as s:
        yield s


def wait_until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


# ---------------------------------------------------------------------------
# execute_stream with callbacks
# ---------------------------------------------------------------------------
def test_callbacks_get_exact_bytes_in_order(sb):
    got = []
    script = ("for i in 1 2 3; do printf 'o%s\\000\\377' $i; sleep 0.3; "
              "printf 'e%s\\376' $i >&2; sleep 0.3; done; exit 4")
    st = sb.execute_stream(script, text=False, on_stdout=lambda b: got.append(("out", b)),
                           on_stderr=lambda b: got.append(("err", b)))
    assert isinstance(st, hutch.ExitStatus) and st.exit_code == 4
    assert all(isinstance(d, bytes) and d for _, d in got)
    # each stream exact; across streams, in the order written (0.3 s apart)
    merged = []
    for s, d in got:
        if merged and merged[-1][0] == s:
            merged[-1] = (s, merged[-1][1] + d)
        else:
            merged.append((s, d))
    assert merged == [(s, d) for i in (1, 2, 3)
                      for s, d in (("out", b"o%d\x00\xff" % i), ("err", b"e%d\xfe" % i))]


def test_callbacks_text_decodes_whole_characters_and_names_bad_bytes(sb):
    out = []
    # "é" cut in two writes: the callback gets it whole; \377 becomes U+FFFD.
    st = sb.execute_stream("printf '\\303'; sleep 0.2; printf '\\251\\377'",
                           on_stdout=out.append)
    assert st.exit_code == 0
    assert all(isinstance(s, str) for s in out)
    assert "".join(out) == "é\ufffd"


def test_callbacks_stdin_streamed_exact(sb):
    data = os.urandom(3 << 20) + bytes(range(256))
    h, n = hashlib.sha256(), [0]

    def take(b):
        h.update(b)
        n[0] += len(b)
    st = sb.execute_stream("cat", stdin=data, text=False, on_stdout=take)
    assert st.exit_code == 0 and n[0] == len(data)
    assert h.hexdigest() == hashlib.sha256(data).hexdigest()
    # a file object and an iterable of bytes are streamed too
    got = []
    sb.execute_stream("wc -c", stdin=iter([b"ab", b"", b"\x00"]), on_stdout=got.append)
    assert "".join(got).strip() == "3"


def test_callbacks_timeout_and_errors(sb):
    with pytest.raises(hutch.CommandTimeoutError):
        sb.execute_stream("echo x; sleep 30", timeout=1, on_stdout=lambda s: None)
    # a callback that raises stops the command and the error propagates
    with pytest.raises(ZeroDivisionError):
        sb.execute_stream("echo x; sleep 30", on_stdout=lambda s: 1 / 0)
    assert wait_until(lambda: sb.execute("pgrep -x sleep").exit_code == 1)
    with pytest.raises(TypeError, match="on_stdout must be callable"):
        sb.execute_stream("true", on_stdout=3)
    with pytest.raises(TypeError, match="stdin must be"):
        sb.execute_stream("cat", stdin=5, on_stdout=print)


def test_callbacks_async():
    async def main():
        async with LocalSandbox() as s:
            got = []

            async def on_out(b):
                await asyncio.sleep(0)
                got.append(b)
            st = await s.execute_stream("printf '\\000\\377'; exit 2", text=False,
                                        on_stdout=on_out)
            assert st.exit_code == 2 and b"".join(got) == b"\x00\xff"
    asyncio.run(main())


# ---------------------------------------------------------------------------
# pty
# ---------------------------------------------------------------------------
def read_until(h, pattern, timeout=20):
    buf = b""
    deadline = time.monotonic() + timeout
    while not re.search(pattern, buf):
        left = deadline - time.monotonic()
        assert left > 0, f"no {pattern!r} in {buf[-300:]!r}"
        buf += h.read(timeout=left)
    return buf


def test_pty_session(sb):
    h = sb.pty.create(PtySize(rows=31, cols=101), cmd=["bash", "--norc", "--noprofile", "-i"],
                      env={"PS1": "P> "})
    read_until(h, rb"P> ")
    h.send_input(b"tty; stty size; echo $TERM\r")
    out = read_until(h, rb"xterm-256color\r\n")
    assert re.search(rb"/dev/pts/\d+\r\n31 101\r\n", out)
    h.resize(PtySize(40, 120))
    h.send_input("stty size\r")
    read_until(h, rb"40 120\r\n")
    h.send_input(b"sleep 100\r")
    assert wait_until(lambda: sb.execute("pgrep -x sleep").exit_code == 0)
    h.send_input(b"\x03")  # ^C reaches the foreground group
    h.send_input(b"echo rc=$?\r")
    read_until(h, rb"rc=130\r\n")
    h.send_input(b"exit 3\r")
    assert h.wait(timeout=20) == 3 and h.exit.status == "exited"
    assert b"exit" in b"".join(h)  # what wait() read is kept
    assert h.read() == b""  # the end


def test_pty_on_data_and_wait(sb):
    chunks, lock = [], threading.Lock()

    def on_data(b):
        assert isinstance(b, bytes)
        with lock:
            chunks.append(b)
    h = sb.pty.create(cmd="printf 'a\\nb'; sleep 0.2; printf '\\377'; exit 7", on_data=on_data)
    assert h.wait(timeout=20) == 7
    assert b"".join(chunks) == b"a\r\nb\xff"
    with pytest.raises(hutch.SandboxError, match="on_data"):
        h.read()


def test_pty_wait_keeps_unread_output_and_times_out(sb):
    h = sb.pty.create(cmd="cat")
    with pytest.raises(hutch.PtyWaitTimeout):
        h.wait(timeout=0.3)
    h.send_input(b"hi\r")
    h.send_input(b"\x04")  # ^D at the start of a line: cat reads end of file
    assert h.wait(timeout=20) == 0
    assert b"".join(h) == b"hi\r\nhi\r\n"


def test_pty_kill_and_close(sb):
    h = sb.pty.create(cmd="sleep 100")
    assert wait_until(lambda: sb.execute("pgrep -x sleep").exit_code == 0)
    assert h.kill() is None
    assert h.exit.signal == 9 and h.exit.status == "signaled"
    h2 = sb.pty.create(cmd="sh -c 'sleep 200 & sleep 300'")
    assert wait_until(lambda: sb.execute("pgrep -x sleep | wc -l").stdout.strip() == "2")
    h2.close()  # closing the connection kills the command and its tree
    assert wait_until(lambda: sb.execute("pgrep -x sleep").exit_code == 1)


def test_pty_login_shell_by_default_and_errors(sb):
    h = sb.pty.create()
    read_until(h, rb"\$ ")
    h.send_input(b"id -un; exit\r")
    read_until(h, rb"appuser\r\n")
    assert h.wait(timeout=20) == 0
    with pytest.raises(ValueError, match="1-65535"):
        sb.pty.create(PtySize(0, 80))
    with pytest.raises(ValueError, match="1-65535"):
        h.resize(0, 5)
    with pytest.raises(TypeError, match="PtySize"):
        sb.pty.create((24, 80))
    with pytest.raises(hutch.APIError, match="cwd"):
        sb.pty.create(cmd="true", cwd="/nonexistent/\x00")


def test_pty_async():
    async def main():
        async with LocalSandbox() as s:
            h = await s.pty.create(PtySize(20, 60), cmd=["sh"])
            await h.send_input(b"stty size; exit 9\r")
            out = b"".join([c async for c in h])
            assert b"20 60\r\n" in out and h.exit_code == 9
            got = []

            async def on_data(b):
                got.append(b)
            h = await s.pty.create(cmd="printf done", on_data=on_data)
            assert await h.wait(20) == 0 and b"".join(got) == b"done"
    asyncio.run(main())


# ---------------------------------------------------------------------------
# stdin of background processes
# ---------------------------------------------------------------------------
def test_send_stdin_exact(sb):
    p = sb.start_process(["sha256sum"], stdin=True)
    assert p.stdin_open is True and p.stdin_bytes == 0
    every, blob = bytes(range(256)), os.urandom(3 << 20)
    assert sb.send_stdin(p, every) == 256
    assert sb.send_stdin(p.id, blob) == 256 + len(blob)
    assert sb.close_stdin(p) == 256 + len(blob)
    assert wait_until(lambda: sb.list_processes()[0].status == "exited")
    info = sb.list_processes()[0]
    assert info.exit_code == 0 and info.stdin_open is False
    want = hashlib.sha256(every + blob).hexdigest()
    assert sb.process_output(p).data == f"{want}  -\n"


def test_send_stdin_text_later_and_errors(sb):
    p = sb.start_process("cat", stdin=True)
    sb.send_stdin(p, "é\n")
    assert wait_until(lambda: sb.process_output(p).data == "é\n")
    sb.send_stdin(p, b"end", close=True)
    assert wait_until(lambda: sb.process_output(p).eof)
    assert sb.process_output(p).data == "é\nend"
    with pytest.raises(hutch.StdinClosedError, match="closed"):
        sb.send_stdin(p, b"more")
    sb.close_stdin(p)  # closing a closed stdin is fine
    q = sb.start_process("sleep 100")
    assert q.stdin_open is None
    with pytest.raises(hutch.StdinClosedError, match="without"):
        sb.send_stdin(q, b"x")
    with pytest.raises(hutch.ProcessNotFoundError):
        sb.send_stdin("p99", b"x")
    with pytest.raises(TypeError, match="data must be"):
        sb.send_stdin(p, 5)
    with pytest.raises(TypeError, match="stdin must be"):
        sb.start_process("cat", stdin="yes")


def test_send_stdin_async():
    async def main():
        async with LocalSandbox() as s:
            p = await s.start_process("wc -c", stdin=True)
            await s.send_stdin(p, b"\x00\xff\x00", close=True)
            for _ in range(500):
                out = await s.process_output(p)
                if out.eof:
                    break
                await asyncio.sleep(0.02)
            assert out.data.strip() == "3"
    asyncio.run(main())


def test_frames_decode_the_same_however_they_are_split():
    # the supervisor may send a header and its bytes apart (splice)
    import struct
    from hutch import _exec
    stream = (struct.pack(">BI", 1, 3) + b"a\x00b" + struct.pack(">BI", 2, 1) + b"\xff"
              + struct.pack(">BI", 3, 15) + b'{"exit_code":0}')

    def decode(pieces):
        c = object.__new__(_exec.ExecConnection)
        c._buf, c._type, c._left, c._ctl = bytearray(), -1, 0, b""
        got = []
        for p in pieces:
            c._buf += p
            got += list(c._decode())
        merged = []
        for kind, data in got:
            assert kind in ("stdout", "stderr", "exit") and (kind == "exit" or data)
            if merged and merged[-1][0] == kind and kind != "exit":
                merged[-1] = (kind, merged[-1][1] + data)
            else:
                merged.append((kind, data))
        return merged
    want = [("stdout", b"a\x00b"), ("stderr", b"\xff"), ("exit", {"exit_code": 0})]
    assert decode([stream]) == want
    assert decode([stream[i:i + 1] for i in range(len(stream))]) == want
    for cut in range(1, len(stream)):
        assert decode([stream[:cut], stream[cut:]]) == want
