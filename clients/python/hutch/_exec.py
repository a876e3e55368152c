# SPDX-License-Identifier: Apache-2.0
"""``POST /exec``: a command's stdin, stdout and stderr byte-exact over one
upgraded connection (docs/api.md, "POST /exec"), and what is built on it:
the pseudo-terminal API (``session.pty``) and ``execute_stream``'s
callbacks.

The connection carries frames both ways: 1 byte type, 4 bytes big-endian
length, the payload. One thread reads (the caller's, or the reader thread
of a pty with ``on_data``); writes (input, resize, signals) may come from
any thread and are serialised by a lock.
"""
from __future__ import annotations

import codecs
import dataclasses
import json
import os
import select
import socket
import struct
import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from . import _http, errors
from ._cmd import ExitStatus, _cmd_body

STDIN, STDOUT, STDERR, EXIT, ERROR, RESIZE, SIGNAL = range(7)
DATA_MAX = 1 << 20  # payload of one data frame
CTL_MAX = 4096      # payload of one control frame
RECV = 256 << 10

# exec with no command: appuser's login shell, as its passwd entry says
# (what `hutch exec -it ID` starts).
LOGIN_SHELL = ["/bin/sh", "-c",
               's=$(getent passwd "$(id -u)" | cut -d: -f7); exec "${s:-/bin/sh}" -l']

Bytes = Union[bytes, bytearray, memoryview]


def _header(t: int, n: int) -> bytes:
    return struct.pack(">BI", t, n)


class ExecConnection:
    """One ``POST /exec`` stream. ``events()`` yields ``("stdout", bytes)``,
    ``("stderr", bytes)`` in the order the sandbox sent them, then one
    ``("exit", result dict)`` or ``("error", error dict)``."""

    def __init__(self, client, body: Dict[str, Any], *, stdin_open: bool,
                 connect_timeout: float = 60.0) -> None:
        self._client = client
        self._wlock = threading.Lock()
        self._closed = False
        self.stdin_open = stdin_open
        raw = json.dumps(body).encode()
        head = (b"POST /exec HTTP/1.1\r\nHost: sandbox\r\nConnection: Upgrade\r\n"
                b"Upgrade: hutch-exec\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(raw))
        # Without stdin, its end goes with the request: the command reads
        # end of file at once.
        tail = b"" if stdin_open else _header(STDIN, 0)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            s.settimeout(connect_timeout)
            _http.connect_unix(s, client.socket_path)
            s.sendall(head + raw + tail)
            self._buf = self._read_head(s)
            s.settimeout(None)
        except errors.SandboxError:
            s.close()
            raise
        except OSError as e:
            s.close()
            raise client.gone_error(e) from e
        self.sock = s
        # decoder state
        self._type = -1
        self._left = 0
        self._ctl = b""

    def _read_head(self, s: socket.socket) -> bytearray:
        buf = bytearray()
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise self._client.gone_error(EOFError("the connection closed before an answer"))
            buf += chunk
            if len(buf) > 65536:
                raise errors.SandboxError("the sandbox sent an oversized answer head to POST /exec")
        end = buf.index(b"\r\n\r\n")
        lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
        rest = buf[end + 4:]
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            raise errors.SandboxError(f"the sandbox sent a malformed answer: {lines[0]!r}") from None
        if status == 101:
            return rest
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0") or 0)
        while len(rest) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        try:
            obj = json.loads(bytes(rest[:length]))
        except ValueError:
            obj = bytes(rest[:length]).decode("utf-8", "replace")
        raise errors.from_api(status, obj, self._client.sandbox_id)

    # -- client -> sandbox ---------------------------------------------------
    def _send(self, data: bytes) -> None:
        with self._wlock:
            if self._closed:
                raise errors.SandboxError("the command's connection is closed")
            try:
                self.sock.sendall(data)
            except OSError as e:
                # The sandbox stopped reading (the command ended): its
                # answer (exit) still comes on the read side.
                raise errors.SandboxError(f"cannot send to the command: {e}") from e

    def send_stdin(self, data: Union[Bytes, str]) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        view = memoryview(bytes(data) if not isinstance(data, (bytes, memoryview)) else data)
        if not self.stdin_open:
            raise errors.SandboxError("the command's standard input is closed")
        for i in range(0, len(view), DATA_MAX):
            piece = view[i:i + DATA_MAX]
            self._send(_header(STDIN, len(piece)) + bytes(piece))

    def close_stdin(self) -> None:
        if self.stdin_open:
            self.stdin_open = False
            self._send(_header(STDIN, 0))

    def resize(self, rows: int, cols: int) -> None:
        if not (1 <= rows <= 65535 and 1 <= cols <= 65535):
            raise ValueError(f"rows and cols must be 1-65535, not {rows}x{cols}")
        self._send(_header(RESIZE, 4) + struct.pack(">HH", rows, cols))

    def signal(self, sig: int) -> None:
        if not 1 <= int(sig) <= 64:
            raise ValueError(f"not a signal number: {sig}")
        self._send(_header(SIGNAL, 4) + struct.pack(">I", int(sig)))

    # -- sandbox -> client ---------------------------------------------------
    def _decode(self) -> Iterator[Tuple[str, Any]]:
        """What the buffered bytes make: data pieces as they come, control
        frames whole."""
        buf = self._buf
        while buf:
            if self._left == 0 and self._type < 0:
                if len(buf) < 5:
                    return
                t, n = struct.unpack(">BI", bytes(buf[:5]))
                del buf[:5]
                if t not in (STDOUT, STDERR, EXIT, ERROR) or \
                        n > (DATA_MAX if t in (STDOUT, STDERR) else CTL_MAX):
                    raise errors.SandboxError(f"broken stream from the sandbox (frame type {t}, "
                                              f"length {n})")
                self._type, self._left, self._ctl = t, n, b""
                if n == 0:
                    self._type = -1
                    if t in (EXIT, ERROR):
                        yield self._control(t, b"")
                    continue
                if not buf:  # a header whose bytes come later
                    return
            take = min(self._left, len(buf))
            piece = bytes(buf[:take])
            del buf[:take]
            self._left -= take
            t = self._type
            if self._left == 0:
                self._type = -1
            if t in (STDOUT, STDERR):
                yield ("stdout" if t == STDOUT else "stderr", piece)
            else:
                self._ctl += piece
                if self._left == 0:
                    yield self._control(t, self._ctl)

    def _control(self, t: int, payload: bytes) -> Tuple[str, Any]:
        try:
            obj = json.loads(payload) if payload else {}
        except ValueError:
            obj = {"message": payload.decode("utf-8", "replace")}
        return ("exit" if t == EXIT else "error", obj)

    def events(self, timeout: Optional[float] = None) -> Iterator[Tuple[str, Any]]:
        """The stream's events until the last one; a connection that ends
        before it raises the sandbox's fate. ``timeout`` (seconds) bounds
        each wait for bytes: ``("timeout", None)`` is yielded then."""
        while True:
            for ev in self._decode():
                yield ev
                if ev[0] in ("exit", "error"):
                    return
            if timeout is not None:
                r, _, _ = select.select([self.sock], [], [], timeout)
                if not r:
                    yield ("timeout", None)
                    continue
            try:
                chunk = self.sock.recv(RECV)
            except OSError as e:
                if self._closed:
                    return
                raise self._client.gone_error(e) from e
            if not chunk:
                if self._closed:
                    return
                raise self._client.gone_error(EOFError("the sandbox closed the stream before "
                                                       "the command finished"))
            self._buf += chunk

    def close(self) -> None:
        """Close both directions: a command still running is killed."""
        with self._wlock:
            if self._closed:
                return
            self._closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def exit_status(obj: Dict[str, Any]):
    return ExitStatus(exit_code=obj.get("exit_code"), status=obj.get("status", "exited"),
                      signal=obj.get("signal"), signal_name=obj.get("signal_name"),
                      timed_out=bool(obj.get("timed_out")), oom_killed=bool(obj.get("oom_killed")),
                      duration_ms=obj.get("duration_ms") or 0.0, message=obj.get("message"),
                      changes=obj.get("changes"), egress=obj.get("egress"))


def _stdin_pieces(stdin: Any) -> Iterable[bytes]:
    """stdin as pieces: bytes, str (UTF-8), a binary file object or an
    iterable of bytes."""
    if isinstance(stdin, str):
        stdin = stdin.encode("utf-8")
    if isinstance(stdin, (bytes, bytearray, memoryview)):
        view = memoryview(stdin)
        return (view[i:i + DATA_MAX] for i in range(0, len(view), DATA_MAX))
    if hasattr(stdin, "read"):
        return iter(lambda: stdin.read(DATA_MAX), b"")
    try:
        return iter(stdin)
    except TypeError:
        raise TypeError("stdin must be str, bytes, a binary file object or an iterable of "
                        f"bytes, not {type(stdin).__name__}") from None


def _feed(conn: ExecConnection, stdin: Any, box: List[BaseException]) -> None:
    try:
        for piece in _stdin_pieces(stdin):
            if isinstance(piece, str):
                piece = piece.encode("utf-8")
            if len(piece):
                conn.send_stdin(piece)
        conn.close_stdin()
    except errors.SandboxError:
        pass  # the command stopped reading: its end comes on the read side
    except BaseException as e:  # noqa: B902 - re-raised by the reader
        box.append(e)
        conn.close()


def run_with_callbacks(client, body: Dict[str, Any], stdin: Any,
                       on_stdout: Optional[Callable[[Any], Any]],
                       on_stderr: Optional[Callable[[Any], Any]], text: bool):
    """Run a command over POST /exec, calling on_stdout / on_stderr with
    each piece of output in the order it was sent; returns the ExitStatus.
    Text mode decodes each stream incrementally (a character cut between
    two pieces comes whole; invalid bytes become U+FFFD)."""
    conn = ExecConnection(client, body, stdin_open=stdin is not None)
    failed: List[BaseException] = []
    feeder = None
    if stdin is not None:
        feeder = threading.Thread(target=_feed, args=(conn, stdin, failed), daemon=True,
                                  name="hutch-stdin")
        feeder.start()
    dec = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in ("stdout", "stderr")}
    cbs = {"stdout": on_stdout, "stderr": on_stderr}
    try:
        for kind, data in conn.events():
            if kind in cbs:
                if text:
                    data = dec[kind].decode(data)
                    if not data:
                        continue
                if cbs[kind] is not None:
                    cbs[kind](data)
            elif kind == "error":
                raise errors.from_api(410, data, client.sandbox_id)
            elif kind == "exit":
                if text:
                    for s in ("stdout", "stderr"):
                        tail = dec[s].decode(b"", final=True)
                        if tail and cbs[s] is not None:
                            cbs[s](tail)
                return exit_status(data)
        raise client.gone_error(EOFError("the stream ended without an exit"))
    except BaseException:
        if failed:
            raise failed[0]
        raise
    finally:
        conn.close()
        if feeder is not None:
            feeder.join(timeout=5)


# ---------------------------------------------------------------------------
# pseudo-terminals
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class PtySize:
    """A terminal's size in characters."""
    rows: int = 24
    cols: int = 80


class PtyHandle:
    """A command on a pseudo-terminal of the sandbox (``session.pty.create``).

    Input goes in with :meth:`send_input` (keys as bytes: ``b"\\x03"`` is
    ^C, ``b"\\x04"`` ^D at the start of a line), :meth:`resize` changes the
    window size. Output is the terminal's (stdout and stderr merged, ``\\n``
    as ``\\r\\n``), as exact bytes: iterate over the handle or call
    :meth:`read` — or, with ``on_data``, a reader thread calls it with each
    chunk. :meth:`wait` returns the exit code; :meth:`kill` ends it."""

    def __init__(self, conn: ExecConnection, on_data: Optional[Callable[[bytes], Any]] = None):
        self._conn = conn
        self._lock = threading.Lock()
        self._pending: List[bytes] = []
        self._done = threading.Event()
        self._error: Optional[BaseException] = None
        self.exit = None
        self._on_data = on_data
        self._thread = None
        if on_data is not None:
            self._thread = threading.Thread(target=self._reader, daemon=True, name="hutch-pty")
            self._thread.start()

    # -- input ---------------------------------------------------------------
    def send_input(self, data: Union[Bytes, str]) -> None:
        """Send keys (``str`` is sent as UTF-8)."""
        self._conn.send_stdin(data)

    send_stdin = send_input

    def resize(self, rows: Union[int, PtySize], cols: Optional[int] = None) -> None:
        """New window size: ``resize(40, 120)`` or ``resize(PtySize(40, 120))``;
        the foreground process gets SIGWINCH."""
        if isinstance(rows, PtySize):
            rows, cols = rows.rows, rows.cols
        if cols is None:
            raise TypeError("resize(rows, cols) or resize(PtySize(rows, cols))")
        self._conn.resize(rows, cols)

    def signal(self, sig: int) -> None:
        """Send a signal to the command (its session leader)."""
        self._conn.signal(sig)

    # -- output --------------------------------------------------------------
    def _step(self, timeout: Optional[float]) -> Optional[bytes]:
        """One event: output bytes, or None at the end / on timeout."""
        if self._done.is_set():
            return None
        try:
            for kind, data in self._conn.events(timeout):
                if kind in ("stdout", "stderr"):
                    return data
                if kind == "timeout":
                    return None
                if kind == "exit":
                    self.exit = exit_status(data)
                elif kind == "error":
                    self._error = errors.from_api(410, data, self._conn._client.sandbox_id)
                self._done.set()
                return None
        except BaseException as e:
            self._error = e
            self._done.set()
            return None
        self._done.set()
        return None

    def _reader(self) -> None:
        while not self._done.is_set():
            data = self._step(None)
            if data:
                try:
                    self._on_data(data)
                except BaseException as e:  # noqa: B902 - stops the session
                    self._error = e
                    self._conn.close()
                    self._done.set()
        self._conn.close()

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next output, or ``b""`` once the command has ended (or after
        ``timeout`` seconds with nothing new: check :attr:`exit`)."""
        if self._thread is not None:
            raise errors.SandboxError("this pty delivers its output to on_data")
        with self._lock:
            if self._pending:
                return self._pending.pop(0)
            data = self._step(timeout)
        if data is None:
            self._raise_error()
        return data or b""

    def __iter__(self) -> Iterator[bytes]:
        while True:
            data = self.read()
            if not data:
                return
            yield data

    def _raise_error(self) -> None:
        if self._error is not None and self._on_data is None:
            err, self._error = self._error, None
            raise err

    # -- the end ---------------------------------------------------------------
    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Wait for the command to end; returns its exit code (``None`` if a
        signal ended it: see :attr:`exit`). Output not read yet is kept for
        :meth:`read`. Raises :class:`hutch.PtyWaitTimeout` if it still runs
        after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise errors.PtyWaitTimeout(f"the pty's command still runs after {timeout} s")
            if self._error is not None:
                raise self._error
        else:
            while not self._done.is_set():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise errors.PtyWaitTimeout(f"the pty's command still runs after {timeout} s")
                with self._lock:
                    data = self._step(left)
                    if data:
                        self._pending.append(data)
            self._raise_error()
        self._conn.close()
        return self.exit.exit_code if self.exit else None

    @property
    def exit_code(self) -> Optional[int]:
        return self.exit.exit_code if self.exit else None

    def kill(self, timeout: float = 30.0) -> Optional[int]:
        """SIGKILL the command and wait for its end (its terminal hangs up,
        so what it started there gets SIGHUP). Returns the exit code
        (``None``: killed by a signal)."""
        if not self._done.is_set():
            try:
                self._conn.signal(9)
            except errors.SandboxError:
                pass
        try:
            return self.wait(timeout)
        finally:
            self.close()

    def close(self) -> None:
        """Close the connection; a command still running is killed."""
        self._conn.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def __enter__(self) -> "PtyHandle":
        return self

    def __exit__(self, *a: Any) -> None:
        self.close()


def pty_body(cmd: Union[str, List[str], None], size: PtySize, env: Optional[Dict[str, str]],
             cwd: Optional[str], timeout: Optional[float]) -> Dict[str, Any]:
    if cmd is None:
        cmd = LOGIN_SHELL
    env = dict(env or {})
    env.setdefault("TERM", "xterm-256color")
    body = _cmd_body(cmd, cwd, env, timeout)
    if not isinstance(size, PtySize):
        raise TypeError(f"size must be a PtySize, not {size!r}")
    if not (1 <= size.rows <= 65535 and 1 <= size.cols <= 65535):
        raise ValueError(f"rows and cols must be 1-65535, not {size.rows}x{size.cols}")
    body["tty"] = {"rows": size.rows, "cols": size.cols}
    return body


class Pty:
    """``session.pty``: commands on pseudo-terminals of the sandbox."""

    def __init__(self, client) -> None:
        self._client = client

    def create(self, size: PtySize = PtySize(), *, cmd: Union[str, List[str], None] = None,
               env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
               on_data: Optional[Callable[[bytes], Any]] = None,
               timeout: Optional[float] = None) -> PtyHandle:
        """Start ``cmd`` (a shell string or argv; default: appuser's login
        shell) on a new terminal of ``size``. ``TERM`` is
        ``xterm-256color`` unless ``env`` says otherwise. ``on_data``
        (called from a reader thread with each output chunk, as bytes)
        instead of reading; ``timeout`` kills it after that many seconds."""
        body = pty_body(cmd, size, env, cwd, timeout)
        return PtyHandle(ExecConnection(self._client, body, stdin_open=True), on_data)


# ---------------------------------------------------------------------------
# asyncio forms
# ---------------------------------------------------------------------------
def _on_loop(loop, cb: Optional[Callable[[Any], Any]]) -> Optional[Callable[[Any], Any]]:
    """cb (plain or async def) called on loop from a worker thread, which
    waits for it: order and back-pressure are kept."""
    if cb is None:
        return None

    async def call(data):
        r = cb(data)
        if hasattr(r, "__await__"):
            await r

    def wrapper(data):
        import asyncio
        asyncio.run_coroutine_threadsafe(call(data), loop).result()
    return wrapper


async def run_callbacks_async(sync_fn: Callable[..., Any], cmd: Any, kwargs: Dict[str, Any]):
    import asyncio
    loop = asyncio.get_running_loop()
    kw = dict(kwargs)
    kw["on_stdout"] = _on_loop(loop, kw.get("on_stdout"))
    kw["on_stderr"] = _on_loop(loop, kw.get("on_stderr"))
    return await asyncio.to_thread(sync_fn, cmd, **kw)


class AsyncPtyHandle:
    """The asyncio form of :class:`PtyHandle`: the same methods, awaitable;
    ``async for chunk in handle``."""

    def __init__(self, sync: PtyHandle) -> None:
        self.sync = sync

    exit = property(lambda self: self.sync.exit)
    exit_code = property(lambda self: self.sync.exit_code)

    async def send_input(self, data: Union[Bytes, str]) -> None:
        import asyncio
        await asyncio.to_thread(self.sync.send_input, data)

    send_stdin = send_input

    async def resize(self, rows: Union[int, PtySize], cols: Optional[int] = None) -> None:
        import asyncio
        await asyncio.to_thread(self.sync.resize, rows, cols)

    async def signal(self, sig: int) -> None:
        import asyncio
        await asyncio.to_thread(self.sync.signal, sig)

    async def read(self, timeout: Optional[float] = None) -> bytes:
        import asyncio
        return await asyncio.to_thread(self.sync.read, timeout)

    def __aiter__(self) -> "AsyncPtyHandle":
        return self

    async def __anext__(self) -> bytes:
        data = await self.read()
        if not data:
            raise StopAsyncIteration
        return data

    async def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        import asyncio
        return await asyncio.to_thread(self.sync.wait, timeout)

    async def kill(self, timeout: float = 30.0) -> Optional[int]:
        import asyncio
        return await asyncio.to_thread(self.sync.kill, timeout)

    async def close(self) -> None:
        import asyncio
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> "AsyncPtyHandle":
        return self

    async def __aexit__(self, *a: Any) -> None:
        await self.close()


class AsyncPty:
    """``session.pty`` of an :class:`AsyncSandboxSession`."""

    def __init__(self, sync: Pty) -> None:
        self.sync = sync

    async def create(self, size: PtySize = PtySize(), *, cmd: Union[str, List[str], None] = None,
                     env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                     on_data: Optional[Callable[[bytes], Any]] = None,
                     timeout: Optional[float] = None) -> AsyncPtyHandle:
        """As :meth:`Pty.create`; ``on_data`` may be ``async def`` (called on
        the event loop, in order)."""
        import asyncio
        cb = _on_loop(asyncio.get_running_loop(), on_data)
        h = await asyncio.to_thread(self.sync.create, size, cmd=cmd, env=env, cwd=cwd,
                                    on_data=cb, timeout=timeout)
        return AsyncPtyHandle(h)
