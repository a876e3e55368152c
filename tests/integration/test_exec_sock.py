# SPDX-License-Identifier: Apache-2.0
"""hutch exec's own socket (issue 31): exec.sock beside api.sock takes the
request as hutch run's hand-over does (its length, 4 bytes big-endian, and
POST /exec's JSON body), then POST /exec's frames both ways; no HTTP, no
libmicrohttpd connection (its 256 KiB pool was 31 of the supervisor's 33
page faults per exec: test_budgets.py's exec.supervisor_faults). The API's
rules hold there as on POST /exec: --access, a pooled sandbox (test_pool.py),
a sleeping sandbox woken and kept awake while its command runs, the
journal's caller, a request that never comes."""
import json
import os
import resource
import signal
import socket
import stat
import struct
import time

from conftest import state_of, wait_until

STDIN, STDOUT, STDERR, EXIT, ERROR = range(5)
REFUSED, RESULT = 7, 8


def frame(kind, data=b""):
    return struct.pack(">BI", kind, len(data)) + data


def exec_sock(sb):
    return os.path.join(os.path.dirname(sb.sock), "exec.sock")


def request(sb, body, tail=b""):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(exec_sock(sb))
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    s.sendall(struct.pack(">I", len(data)) + data + tail)
    return s


def frames(s):
    """Every frame until the socket's end: [(kind, payload)]."""
    buf, out = b"", []
    while True:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        buf += chunk
    while len(buf) >= 5:
        kind, n = struct.unpack(">BI", buf[:5])
        out.append((kind, buf[5:5 + n]))
        buf = buf[5 + n:]
    assert buf == b"", buf
    return out


def test_the_socket_takes_the_request_then_frames(sandbox):
    st = os.stat(exec_sock(sandbox))
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.getuid()
    s = request(sandbox, {"argv": ["sh", "-c", "cat; echo e >&2; exit 3"]},
                frame(STDIN, b"\x00in") + frame(STDIN))
    got = frames(s)
    s.close()
    out = b"".join(d for k, d in got if k == STDOUT)
    err = b"".join(d for k, d in got if k == STDERR)
    assert (out, err) == (b"\x00in", b"e\n"), got
    assert got[-1][0] == EXIT and json.loads(got[-1][1])["exit_code"] == 3
    s = request(sandbox, b"{not json")
    got = frames(s)
    s.close()
    assert [k for k, _ in got] == [REFUSED] and json.loads(got[0][1])["status"] == 400, got


def test_a_refusal_is_one_refused_frame_with_the_status(hutch):
    sb = hutch.create("--access", "files")
    try:
        s = request(sb, {"cmd": "touch /tmp/ran"}, frame(STDIN))
        got = frames(s)
        s.close()
        assert [k for k, _ in got] == [REFUSED], got
        res = json.loads(got[0][1])
        assert res["status"] == 403 and res["error"]["code"] == "access_denied"
        assert 'access "files"' in res["error"]["message"]
        # the CLI says the same as on POST /exec (test_cloud_options.py)
        r = hutch("exec", sb.id, "--", "touch", "/tmp/ran")
        assert r.returncode != 0 and b'access "files"' in r.stderr
    finally:
        sb.rm()


def test_wakes_a_sleeping_sandbox_and_keeps_it_awake(hutch):
    """The stream is activity from its connection to its end, as a request
    is: a command longer than the idle timeout is not frozen under it."""
    sb = hutch.create("--idle-timeout", "1")
    try:
        assert wait_until(lambda: state_of(hutch, sb.id) == "sleeping", timeout=15)
        t0 = time.monotonic()
        r = hutch("exec", sb.id, "--", "sh", "-c", "sleep 3; echo done", timeout=30)
        assert r.returncode == 0 and r.stdout == b"done\n", r
        assert time.monotonic() - t0 < 20
        js = [json.loads(line) for line in
              hutch("journal", sb.id, "--json").stdout.decode().splitlines()]
        ex = [x for x in js if x.get("route") == "POST /exec"]
        assert ex and ex[-1]["caller"]["uid"] == os.getuid() and ex[-1]["exit"] == 0
    finally:
        sb.rm()


def test_a_request_that_never_comes_is_closed(sandbox):
    """As a connection without its request's headers (10 s): it does not
    hold one of the socket's places."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(exec_sock(sandbox))
    t0 = time.monotonic()
    assert sandbox.sh("echo meanwhile") == "meanwhile\n"
    assert s.recv(1) == b""
    assert 9 <= time.monotonic() - t0 < 25
    s.close()


def test_without_the_socket_hutch_exec_uses_post_exec(hutch, sandbox):
    """A supervisor without exec.sock (an older one; a run's, a
    container's): the CLI falls back to POST /exec."""
    os.unlink(exec_sock(sandbox))
    r = hutch("exec", sandbox.id, "--", "sh", "-c", "echo via http; exit 4")
    assert r.returncode == 4 and r.stdout == b"via http\n"


def ctxt_switches(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


def test_out_of_fds_the_connection_waits_then_is_served(hutch, sandbox):
    """The listener is edge-triggered: a connection it could not take
    (EMFILE) gets no new edge when an fd frees elsewhere. It waits in the
    backlog while the supervisor has no fd, and is served once it has one
    (was: waited for ever, until another connection came)."""
    with open(os.path.join(hutch.rtdir, sandbox.id, "state.json")) as f:
        pid = json.load(f)["supervisor_pid"]
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    # no new fd at all: the lowest free one is above 1
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (1, hard))
    nfds = len(os.listdir(f"/proc/{pid}/fd"))
    try:
        before = ctxt_switches(pid)
        s = request(sandbox, {"argv": ["echo", "served"]}, frame(STDIN))
        s.settimeout(20)
        # the supervisor woke for the connection and went back to sleep:
        # it tried accept4() and was refused an fd
        assert wait_until(lambda: ctxt_switches(pid) > before and
                          proc_state(pid) == "S")
        # no fd more (one of the create's may still close meanwhile: the
        # disk stock's connection, read at the disk step, goes at its pace)
        assert len(os.listdir(f"/proc/{pid}/fd")) <= nfds
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
    got = frames(s)
    s.close()
    assert b"".join(d for k, d in got if k == STDOUT) == b"served\n", got
    assert got[-1][0] == EXIT and json.loads(got[-1][1])["exit_code"] == 0
    assert sandbox.sh("echo after") == "after\n"


def proc_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def supervisor_maps_json(sb):
    with open(os.path.join(os.path.dirname(sb.sock), "state.json")) as f:
        pid = json.load(f)["supervisor_pid"]
    with open(f"/proc/{pid}/maps") as f:
        return "libcjson" in f.read()


def test_an_older_supervisor_is_served_by_post_exec(hutch):
    """hutch exec sends its request without JSON on exec-forms.sock, a
    symlink to exec.sock made by a supervisor that reads that form; a
    supervisor of an older hutch (after an upgrade) has none, and hutch exec
    goes by POST /exec's JSON there (its supervisor then loads libcjson):
    the same bytes, cwd, variables and exit both ways."""
    sb = hutch.create("--instance-type", "nano")
    try:
        link = os.path.join(os.path.dirname(sb.sock), "exec-forms.sock")
        assert os.readlink(link) == "exec.sock"
        argv = ["exec", "-i", "-e", b"V=\x01\xff", "-w", "/tmp", sb.id, "--", "sh", "-c",
                'cat; printf "%s" "$V"; pwd; exit 4']
        r = hutch(*argv, input=b"\x00in")
        assert (r.returncode, r.stdout) == (4, b"\x00in\x01\xff/tmp\n"), r
        assert not supervisor_maps_json(sb)
        os.unlink(link)
        r = hutch(*argv, input=b"\x00in")
        assert (r.returncode, r.stdout) == (4, b"\x00in\x01\xff/tmp\n"), r
        assert supervisor_maps_json(sb)
    finally:
        sb.rm()


def test_a_request_that_meets_inits_death_is_410_not_a_failure(hutch):
    """init dies while a request waits to be read: the supervisor reads the
    request before it sees the death (the listener's event comes first in
    the same wake-up) and finds init's socket closed. That is the sandbox
    ending (410 sandbox_deleted, the CLI's exit 66), not an engine failure
    (was: 500 "send command to sandbox init: Broken pipe", exit 70;
    test_faults.py met it at random)."""
    sb = hutch.create()
    with open(os.path.join(hutch.rtdir, sb.id, "state.json")) as f:
        st = json.load(f)
    sup, init = st["supervisor_pid"], st["init_pid"]
    os.kill(sup, signal.SIGSTOP)
    try:
        assert wait_until(lambda: proc_state(sup) == "T")
        s = request(sb, {"argv": ["true"]}, frame(STDIN))
        os.kill(init, signal.SIGKILL)
        # its parent stopped: dead, not reaped
        assert wait_until(lambda: proc_state(init) == "Z")
    finally:
        os.kill(sup, signal.SIGCONT)
    got = frames(s)
    s.close()
    assert [k for k, _ in got] == [REFUSED], got
    res = json.loads(got[0][1])
    assert res["status"] == 410 and res["error"]["code"] == "sandbox_deleted", res
    assert "init has exited" in res["error"]["message"], res
    assert wait_until(lambda: sb.id not in hutch.ids(), timeout=20)
