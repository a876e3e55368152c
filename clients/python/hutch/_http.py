# SPDX-License-Identifier: Apache-2.0
"""A minimal HTTP/1.1 client over the sandbox's unix socket.

``http.client`` with a unix-socket connection; idle connections are kept
open in a small pool (thread-safe, so the asyncio form can use it from
worker threads). Connection failures are turned into the sandbox's fate
(expired, deleted) by asking ``hutch inspect ID``, which reads the record
the runtime leaves (its format is the CLI's, not this client's).
"""
import datetime
import http.client
import json
import os
import select
import socket
import subprocess
import threading
import time
import urllib.parse

from . import errors
from ._binary import find_hutch

CHUNK = 1 << 20
DEFAULT_TIMEOUT = 300.0


SUN_PATH_MAX = 107  # sun_path's 108 bytes, its NUL included


def connect_unix(sock, path):
    """``sock.connect(path)`` for a path of any length: one longer than
    sun_path (a long HUTCH_RUNTIME_DIR) is reached through an O_PATH fd of
    its directory, as ``/proc/self/fd/N/NAME`` (the CLI's way)."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        sock.connect(path)
        return
    head, name = os.path.split(path)
    dirfd = os.open(head, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sock.connect(f"/proc/self/fd/{dirfd}/{name}")
    finally:
        os.close(dirfd)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=None):
        super().__init__("sandbox", timeout=timeout, blocksize=CHUNK)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            connect_unix(s, self.unix_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _fmt_time(ts):
    try:
        return datetime.datetime.fromtimestamp(int(ts), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return str(ts)


class Client:
    """Requests to one sandbox. ``request()`` returns ``(response, conn)``;
    give the connection back with ``release()`` once the body is read."""

    _RETRYABLE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)

    def __init__(self, socket_path, sandbox_id):
        self.socket_path = socket_path
        self.sandbox_id = sandbox_id
        self.runtime_dir = os.path.dirname(os.path.dirname(socket_path))
        self._idle = []
        self._lock = threading.Lock()
        self._closed = False

    # -- connections -------------------------------------------------------
    def _take(self):
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                sock = conn.sock
                if sock is None:
                    continue
                try:
                    readable, _, _ = select.select([sock], [], [], 0)
                except (OSError, ValueError):
                    readable = [sock]
                if readable:  # closed by the server (or junk): drop it
                    conn.close()
                    continue
                return conn, True
        return UnixHTTPConnection(self.socket_path), False

    def release(self, conn, resp=None):
        if resp is not None and (resp.will_close or not resp.isclosed()):
            conn.close()
            return
        with self._lock:
            if not self._closed and len(self._idle) < 8 and conn.sock is not None:
                self._idle.append(conn)
                return
        conn.close()

    def close(self):
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    # -- fate of a vanished sandbox ------------------------------------------
    def tombstone(self):
        """``(reason, unix time)`` if the runtime recorded the sandbox's end.
        Asked of the CLI (``hutch inspect ID`` answers an ended sandbox with
        JSON and exit status 66), which owns the record's format: this
        client never reads the file. Only error paths call this."""
        env = dict(os.environ, HUTCH_RUNTIME_DIR=self.runtime_dir)
        try:
            r = subprocess.run([find_hutch(), "inspect", self.sandbox_id], env=env,
                               capture_output=True, text=True, timeout=30, check=False)
            if r.returncode != 66:
                return None
            j = json.loads(r.stdout)
            return j["status"], str(j["ended_at_unix"])
        except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError,
                errors.HutchNotFoundError):
            return None

    def gone_error(self, cause=None, wait=3.0):
        deadline = time.monotonic() + wait
        while True:
            tomb = self.tombstone()
            if tomb or time.monotonic() >= deadline:
                break
            if os.path.exists(self.socket_path) and not isinstance(cause, (FileNotFoundError,)):
                # Still there: a transient error, not the end of the sandbox.
                if os.path.exists(os.path.join(os.path.dirname(self.socket_path), "state.json")):
                    break
            time.sleep(0.05)
        sid = self.sandbox_id
        if tomb:
            reason, ts = tomb
            when = _fmt_time(ts) if ts else "an unknown time"
            if reason == "expired":
                return errors.SandboxExpiredError(
                    f"sandbox {sid} expired at {when} (ttl reached); create a new sandbox "
                    "(raise ttl_seconds if it needs to live longer)", sandbox_id=sid, at=when)
            words = {"crashed": "crashed",
                     "supervisor-died": "ended: its supervisor died (killed or crashed) and "
                                        "hutch gc removed it"}.get(reason, "was deleted")
            return errors.SandboxDeletedError(
                f"sandbox {sid} {words} at {when}; create a new sandbox", sandbox_id=sid,
                at=when)
        if not os.path.exists(self.socket_path):
            return errors.SandboxDeletedError(
                f"sandbox {sid} no longer exists (its socket {self.socket_path} is gone, and no "
                "record says why: its supervisor died or its state was removed); create a new "
                "sandbox, and run 'hutch gc' to clean up", sandbox_id=sid)
        return errors.SandboxError(f"lost the connection to sandbox {sid} ({cause!r}); "
                                   "the sandbox may still run: retry, or check 'hutch ls'")

    # -- requests ----------------------------------------------------------
    def request(self, method, path, body=None, headers=None, timeout=DEFAULT_TIMEOUT,
                encode_chunked=False):
        if self._closed:
            raise errors.SandboxDeletedError(
                f"sandbox {self.sandbox_id} was closed; open a new sandbox", sandbox_id=self.sandbox_id)
        retryable = body is None or isinstance(body, (bytes, bytearray))
        for attempt in (0, 1):
            conn, reused = self._take()
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            try:
                conn.request(method, path, body=body, headers=headers or {},
                             encode_chunked=encode_chunked)
                resp = conn.getresponse()
                return resp, conn
            except self._RETRYABLE as e:
                conn.close()
                if reused and retryable and attempt == 0:
                    continue
                raise self.gone_error(e) from e
            except socket.timeout as e:
                conn.close()
                raise errors.SandboxError(
                    f"sandbox {self.sandbox_id} did not answer {method} {path} within {timeout} s") from e
            except OSError as e:
                conn.close()
                raise self.gone_error(e) from e
        raise AssertionError("unreachable")

    def read_body(self, resp, conn):
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise self.gone_error(e) from e
        self.release(conn, resp)
        return data

    def check(self, resp, conn):
        """Raise the API error of a non-2xx answer (reading its body)."""
        if 200 <= resp.status < 300:
            return
        data = self.read_body(resp, conn)
        try:
            body = json.loads(data)
        except ValueError:
            body = data.decode("utf-8", "replace")
        raise errors.from_api(resp.status, body, self.sandbox_id)

    def call(self, method, path, obj=None, timeout=DEFAULT_TIMEOUT):
        """A JSON request; returns the JSON answer or raises the mapped error."""
        body = json.dumps(obj).encode() if obj is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        resp, conn = self.request(method, path, body, headers, timeout)
        self.check(resp, conn)
        data = self.read_body(resp, conn)
        try:
            return json.loads(data)
        except ValueError as e:
            raise errors.SandboxError(f"sandbox {self.sandbox_id} sent invalid JSON for {path}: "
                                      f"{data[:200]!r}") from e


def query(endpoint, **params):
    q = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
    return f"{endpoint}?{q}" if q else endpoint
