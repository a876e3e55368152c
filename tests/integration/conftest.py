# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures for hutch integration tests.

Each test gets its own HUTCH_RUNTIME_DIR and HUTCH_IMAGE_STORE, passed
explicitly (the Hutch wrapper); at teardown every sandbox left in the
runtime dir is removed and the test fails if any state, cgroup or process
remains. Nothing a test does reads or changes the machine's /var/lib/hutch
or /run/hutch: a hutch started without the wrapper's environment inherits
the session's own (pytest_configure). Tests drive the real CLI and the
real API socket, as root.
"""
import base64
import fcntl
import glob
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HUTCH = os.environ.get("HUTCH_BIN") or os.path.join(REPO, "build", "hutch")
HELPERS = os.environ.get("HUTCH_HELPERS_DIR") or os.path.join(REPO, "build", "tests")
# Bounds that time the host (not hutch's own deadlines) scale by this: the
# pure-v2 VM's run sets it (tests/v2/hutch-v2-suite.sh: emulated, TCG).
SLOWDOWN = float(os.environ.get("HUTCH_TEST_SLOWDOWN") or 1)


def pytest_configure(config):
    if os.geteuid() != 0:
        pytest.exit("integration tests need root (they create namespaces and cgroups)", returncode=77)
    if not os.access(HUTCH, os.X_OK):
        pytest.exit(f"hutch binary not found at {HUTCH}: build first (cmake --build build)", returncode=1)
    # What a hutch started with the inherited environment (subprocess
    # without env=, the tools a test drives) uses: the session's own store
    # (empty) and runtime dir, never the machine's /var/lib/hutch, /run/hutch.
    global SESSION_DIR
    SESSION_DIR = tempfile.mkdtemp(prefix="hutch-it-")
    os.environ["HUTCH_IMAGE_STORE"] = os.path.join(SESSION_DIR, "store")
    os.environ["HUTCH_RUNTIME_DIR"] = os.path.join(SESSION_DIR, "rt")


def pytest_unconfigure(config):
    if SESSION_DIR:
        rt = os.path.join(SESSION_DIR, "rt")
        if os.path.isdir(rt):
            subprocess.run([HUTCH, "rm", "--all"], capture_output=True, timeout=120,
                           env=dict(os.environ, HUTCH_RUNTIME_DIR=rt))
        shutil.rmtree(SESSION_DIR, ignore_errors=True)


SESSION_DIR = None


def lxcfs_mounts_under(top):
    """Runtime dirs under top whose lxcfs (/proc views) is still mounted."""
    top = os.path.realpath(top) + "/"
    dirs = []
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            mnt = fields[1].replace("\\040", " ")
            if fields[2] == "fuse.lxcfs" and mnt.startswith(top) and mnt.endswith("/.lxcfs/mnt"):
                dirs.append(mnt[: -len("/.lxcfs/mnt")])
    return dirs


def lxcfs_stop_under(top):
    """gc every runtime dir under top whose lxcfs is still mounted (gc stops
    it once no supervisor holds it); the dirs where it stays."""
    left = []
    for rt in lxcfs_mounts_under(top):
        subprocess.run([HUTCH, "gc"], capture_output=True, timeout=60,
                       env=dict(os.environ, HUTCH_RUNTIME_DIR=rt))
        if not wait_until(lambda: not os.path.ismount(os.path.join(rt, ".lxcfs", "mnt")), 10):
            left.append(rt)
    return left


@pytest.fixture(autouse=True)
def no_lxcfs_left(request):
    """Every runtime dir a test made under its own tmp_path (not only the
    hutch fixture's) ends without its lxcfs: after the test, gc each one; a
    mount still there after that is a sandbox the test left running, and
    fails it. Cleanup first, so a failing test leaves no FUSE mount behind
    (rm -rf of such a dir fails). Module-scoped sandboxes (tmp_path_factory)
    live across tests: pytest_sessionfinish stops theirs."""
    # Asked for before the test (so it is torn down after this check).
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp is None:
        return
    left = lxcfs_stop_under(tmp)
    assert not left, f"lxcfs still mounted (a sandbox left running) in {left}"


def pytest_sessionfinish(session, exitstatus):
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None:
        lxcfs_stop_under(factory.getbasetemp())


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("sandbox", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def api(sock_path, method, path, body=None, raw=None, timeout=60, headers=None):
    """One request; returns (status, parsed JSON or text)."""
    conn = UnixHTTPConnection(sock_path, timeout=timeout)
    try:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        text = resp.read().decode("utf-8", "replace")
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text
    finally:
        conn.close()


def sse_events(sock_path, body, timeout=60):
    """POST /run_streaming; returns the list of (event, data dict)."""
    conn = UnixHTTPConnection(sock_path, timeout=timeout)
    conn.request("POST", "/v1/run_streaming", body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    events, event, data = [], None, []
    for line in resp:
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line == "" and event:
            events.append((event, json.loads("\n".join(data))))
            event, data = None, []
    conn.close()
    return events


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class Hutch:
    """The CLI bound to one runtime dir and one image store (by default
    "<rtdir>-store", empty: the host-derived root; a test that wants
    images sets env["HUTCH_IMAGE_STORE"])."""

    def __init__(self, rtdir, store=None):
        self.rtdir = str(rtdir)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HUTCH_RUNTIME_DIR": self.rtdir,
                    "HUTCH_IMAGE_STORE": str(store) if store else self.rtdir + "-store"}
        # Sanitizer builds: let ASAN_OPTIONS (e.g. log_path) reach the CLI
        # and, through fork, the supervisors.
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if k in os.environ:
                self.env[k] = os.environ[k]

    def __call__(self, *args, input=None, timeout=120, env=None):
        e = dict(self.env)
        e.update(env or {})
        return subprocess.run([HUTCH, *args], input=input, capture_output=True, timeout=timeout,
                              env=e, stdin=None if input is not None else subprocess.DEVNULL)

    def popen(self, *args, **kw):
        # A suite started in the background of a non-interactive shell
        # inherits SIGINT ignored, which the Ctrl-C tests must not.
        kw.setdefault("preexec_fn", _default_sigint)
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen([HUTCH, *args], env=self.env, **kw)

    def create(self, *opts):
        r = self(*opts and ("create", *opts) or ("create",), "--json")
        assert r.returncode == 0, r.stderr.decode()
        return Sandbox(self, json.loads(r.stdout))

    def ids(self):
        if not os.path.isdir(self.rtdir):
            return []
        return sorted(d for d in os.listdir(self.rtdir) if re.fullmatch(r"[0-9a-f]{12}", d))


class Sandbox:
    def __init__(self, hutch, info):
        self.hutch = hutch
        self.info = info
        self.id = info["id"]
        self.sock = info["socket"]

    def api(self, method, path, body=None, **kw):
        return api(self.sock, method, path, body, **kw)

    def run(self, cmd=None, argv=None, **kw):
        body = dict(kw)
        if cmd is not None:
            body["cmd"] = cmd
        if argv is not None:
            body["argv"] = argv
        status, res = self.api("POST", "/v1/run", body, timeout=kw.get("timeout", 60) + 30 if kw.get("timeout") else 120)
        assert status == 200, res
        return res

    def sh(self, cmd, **kw):
        """Run a shell command, assert exit 0, return stdout."""
        res = self.run(cmd, **kw)
        # A string, not the dict: pytest cuts a dict's repr before stderr,
        # which is what tells why a command failed.
        assert res["exit_code"] == 0, f"{cmd!r}: {json.dumps(res)}"
        return res["stdout"]

    def put_file(self, path, data: bytes, mode="755"):
        """Copy bytes into the sandbox through stdin (base64: stdin is text)."""
        res = self.run(f"base64 -d > {path} && chmod {mode} {path}", stdin=base64.b64encode(data).decode())
        assert res["exit_code"] == 0, res

    def install_helper(self, name):
        with open(os.path.join(HELPERS, name), "rb") as f:
            self.put_file(f"/tmp/{name}", f.read())
        return f"/tmp/{name}"

    def host_pids(self):
        """Host pids of every process in the sandbox (through its init's pid namespace)."""
        st = json.loads(self.hutch("inspect", self.id).stdout)
        init = st["init_pid"]
        ns = os.readlink(f"/proc/{init}/ns/pid")
        pids = []
        for p in glob.glob("/proc/[0-9]*"):
            try:
                if os.readlink(p + "/ns/pid") == ns:
                    pids.append(int(p.rsplit("/", 1)[1]))
            except OSError:
                pass
        return pids

    def status(self):
        status, res = self.api("GET", "/status")
        assert status == 200, res
        return res

    def procs(self):
        """(host pid, comm) of every process in the sandbox, init included."""
        out = []
        for pid in self.host_pids():
            c = proc_comm(pid)
            if c is not None:
                out.append((pid, c))
        return out

    def count(self, comm):
        """How many processes named comm run in the sandbox."""
        return sum(1 for _, c in self.procs() if c == comm)

    def rm(self):
        return self.hutch("rm", self.id)


def cgroup_dirs_named(sid):
    return glob.glob(f"/sys/fs/cgroup/**/hutch-{sid}", recursive=True)


def retired_dirs(rtdir):
    """Sandbox dirs a supervisor retired (".dead-<id>") and has not removed
    yet: it answers DELETE / before removing cgroups and host links."""
    try:
        return [d for d in os.listdir(rtdir) if d.startswith(".dead-")]
    except FileNotFoundError:
        return []


def cgroups_gone(sid, timeout=10.0):
    """A sandbox's cgroups go when it ends by itself (TTL, crash; after rm
    they are gone when it returns): wait for it, fail if they stay."""
    return wait_until(lambda: not cgroup_dirs_named(sid), timeout)


def paths_gone(paths, timeout=10.0):
    return wait_until(lambda: not any(os.path.exists(d) for d in paths), timeout)


def loops_of(rtdir):
    """Loop devices whose file is (or was, deleted) in rtdir: a sandbox's
    disk (runtime/disk.h) is a nameless file there."""
    out = []
    for f in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(f) as fh:
                if fh.read().startswith(rtdir.rstrip("/") + "/"):
                    out.append(f.split("/")[3])
        except OSError:
            pass  # detached meanwhile
    return out


def loop_story(rtdir):
    """Why a runtime dir's loop device stays: what is open on it (or on the
    file system behind it, the disks' pool), the loop devices backed by
    files there, hutch's processes and what .disk holds."""
    lines = []
    devs = {}
    for name in loops_of(rtdir):
        with open(f"/sys/block/{name}/dev") as f:
            devs[f.read().strip()] = name
    r = subprocess.run(["losetup", "-l", "-n", "-O", "NAME,BACK-MAJ:MIN,BACK-INO,BACK-FILE"],
                       capture_output=True, text=True)
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) > 1 and f[1] in devs:
            lines.append(f"loop backed by a file on {devs[f[1]]}: {line}")
    majmin = {tuple(int(x) for x in d.split(":")): n for d, n in devs.items()}
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            st = os.stat(fd)
            on = majmin.get((os.major(st.st_dev), os.minor(st.st_dev))) or \
                (st.st_rdev and majmin.get((os.major(st.st_rdev), os.minor(st.st_rdev))))
            if on:
                pid = fd.split("/")[2]
                with open(f"/proc/{pid}/comm") as c:
                    lines.append(f"pid {pid} ({c.read().strip()}) has {fd} -> {os.readlink(fd)}"
                                 f" on {on}")
        except OSError:
            pass
    for c in glob.glob("/proc/[0-9]*/comm"):
        try:
            with open(c) as f:
                comm = f.read().strip()
            if comm.startswith("hutch") or comm in ("exe", "mkfs.xfs", "mke2fs"):
                lines.append(f"process {c.split('/')[2]} {comm}")
        except OSError:
            pass
    d = os.path.join(rtdir, ".disk")
    lines.append(f".disk: {sorted(os.listdir(d)) if os.path.isdir(d) else 'absent'}")
    return "\n".join(lines)


def assert_runtime_dir_clean(h, leftovers):
    """Fixture teardown: every sandbox was removed; what supervisors remove
    after answering (retired dirs, cgroups) goes too, within seconds."""
    remaining = h.ids()
    assert not remaining, f"sandboxes left behind: {remaining}"
    gone = []
    if os.path.isdir(os.path.join(h.rtdir, ".gone")):
        # tombstones "<id>" (and the supervisors' logs "<id>.events")
        gone = [g for g in os.listdir(os.path.join(h.rtdir, ".gone")) if "." not in g]
    sids = set(leftovers) | set(gone)
    wait_until(lambda: not retired_dirs(h.rtdir)
               and not any(cgroup_dirs_named(sid) for sid in sids), 10)
    assert not retired_dirs(h.rtdir), f"retired sandboxes left: {retired_dirs(h.rtdir)}"
    cg = [d for sid in sids for d in cgroup_dirs_named(sid)]
    assert not cg, f"cgroups left behind: {cg}"
    # The dir's lxcfs (/proc views): gc stops it once the last supervisor
    # has exited, and its mount and files go with it.
    lx = os.path.join(h.rtdir, ".lxcfs")
    wait_until(lambda: not os.path.exists(lx) or (h("gc") and not os.path.exists(lx)), 10)
    assert not os.path.exists(lx), f"lxcfs left running in {lx}"
    # The disks: each loop device detaches itself once its sandbox's
    # mounts went (the supervisor's last step, after the DELETE answer);
    # the dir's stock of disks made ahead of time (runtime/disk-stock.c)
    # ends at gc, with no sandbox left. While the dir has a stock, gc runs:
    # a maker may be making its disk, its loop device not attached yet (the
    # stock refills once its takers are done, which a short test's create
    # may just have been).
    last = []
    disk = os.path.join(h.rtdir, ".disk")

    def gc_clean():
        last[:] = [h("gc")]
        return not loops_of(h.rtdir)

    wait_until(lambda: (not loops_of(h.rtdir) and not os.path.exists(disk)) or gc_clean(), 30)
    assert not loops_of(h.rtdir), \
        f"loop devices left on {h.rtdir}: {loops_of(h.rtdir)}\n{loop_story(h.rtdir)}\n" \
        f"the last gc: {last and (last[0].returncode, last[0].stderr)}"


def files_holding(top, needle):
    """The files under top (a runtime dir) that hold needle: what hutch
    wrote there. Mounts under it (lxcfs's views) are not walked; a sparse
    file (a disk's template, .disk/ext4-SIZE: a 20 GB file of ~1 MB of
    data) is read by its data segments only, as reading its holes would
    take minutes."""
    hits = []
    for d, dirs, names in os.walk(top):
        dirs[:] = [x for x in dirs if not os.path.ismount(os.path.join(d, x))]
        for n in names:
            p = os.path.join(d, n)
            try:
                if not os.path.isfile(p) or os.path.islink(p):
                    continue
                with open(p, "rb") as f:
                    if any(needle in chunk for chunk in _data_chunks(f)):
                        hits.append(p)
            except OSError:
                pass  # gone
    return hits


def _data_chunks(f, size=1 << 20):
    """A file's data, in chunks overlapping by nothing the callers need
    (needles are short: each chunk also carries the next one's first 4 KiB),
    skipping its holes (SEEK_DATA/SEEK_HOLE)."""
    fd, end, pos = f.fileno(), os.fstat(f.fileno()).st_size, 0
    while pos < end:
        try:
            pos = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:
            return  # ENXIO: only a hole is left
        hole = os.lseek(fd, pos, os.SEEK_HOLE)
        while pos < hole:
            n = min(size, hole - pos)
            yield os.pread(fd, n + 4096, pos)
            pos += n


def supervisor_alive(hutch, sid):
    """Does a supervisor hold the sandbox's lock (the runtime's liveness test)?"""
    try:
        fd = os.open(os.path.join(hutch.rtdir, sid, "lock"), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def wait_until(pred, timeout=10.0, interval=0.01):
    """Poll a condition that the system makes true asynchronously (not a
    sleep-and-hope: the test fails if it never becomes true). The bound
    scales by SLOWDOWN (emulation); a true condition returns at once."""
    end = time.monotonic() + timeout * SLOWDOWN
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def state_of(hutch, sid):
    """The status a sandbox's state.json says (running, sleeping, ...), or
    None while it is missing or being replaced."""
    try:
        with open(os.path.join(hutch.rtdir, sid, "state.json")) as f:
            return json.load(f).get("status")
    except (OSError, ValueError):
        return None


def proc_stat(pid):
    """/proc/PID/stat's fields after the command name, or None once the
    process is gone (a process listed by os.listdir can end before it is
    read: the CI run of 12-05 failed on that race)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def proc_comm(pid):
    """comm of a host pid, or None if it is gone (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    state = stat[stat.rindex(")") + 2]
    return None if state in "ZX" else comm


def proc_children(pid):
    """The pids of a process's children (its main thread's), [] once it is gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def proc_status_kib(pid, key):
    """A kB field of /proc/PID/status (VmRSS, VmHWM...)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def raw_http(sock_path, data, timeout=10):
    """Send raw bytes on a new connection; return everything read until the
    server closes it or timeout passes (for requests that are not HTTP)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    try:
        s.sendall(data)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
    finally:
        s.close()


def hutch_in(rt):
    """The hutch fixture's body for the runtime dir rt: what is left there
    removed afterwards, and the dir checked clean."""
    h = Hutch(rt)
    yield h
    leftovers = h.ids()
    if leftovers:
        h("rm", "--all")
    h("gc")
    assert_runtime_dir_clean(h, leftovers)


@pytest.fixture
def hutch(tmp_path):
    yield from hutch_in(tmp_path / "rt")


@pytest.fixture
def sandbox(hutch):
    sb = hutch.create()
    yield sb
    sb.rm()


# The fake internet of the network tests: one session fixture for every
# module that uses it (imported here, not per module, so it is set up once).
from netfake import fakenet, fakenet_here, fakenet_world, own_net  # noqa: E402,F401
# The matrix of roots: `root` (host, image, default) and the session's images.
from roots import default_root, image_root, root  # noqa: E402,F401
