"""Shared by every group of rows: errors, log, the timed runner, the API client over the unix
socket, mount namespaces, /proc readers, results, interleaving and stats."""

import ctypes
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time

# this file is scripts/benchlib/common.py
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLONE_NEWNS = 0x00020000
# ids for the crun container's user namespace; hutch uses 0x10000000 and up
CRUN_ID_BASE = 200000


class HutchError(Exception):
    """hutch itself failed: fatal, exit 1."""


class PeerError(Exception):
    """A peer runtime failed: reported, not fatal."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# running commands

class Runner:
    """Runs commands with stdout discarded and stderr kept in a scratch file
    (no pipes, no threads: the same cheap path for every variant)."""

    def __init__(self, tmpdir, env):
        self.errf = open(os.path.join(tmpdir, "stderr.txt"), "w+b")
        self.env = env

    def _stderr(self):
        self.errf.seek(0)
        return self.errf.read().decode(errors="replace").strip()[-2000:]

    def timed(self, argv, exc=PeerError, capture=False):
        """Run argv; return (seconds, stdout or None). Raise exc on failure."""
        self.errf.seek(0)
        self.errf.truncate()
        out = subprocess.PIPE if capture else subprocess.DEVNULL
        t0 = time.perf_counter()
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out,
                           stderr=self.errf, env=self.env)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise exc("%s exited with %d: %s" % (" ".join(argv), p.returncode,
                                                 self._stderr() or "(no stderr)"))
        return dt, (p.stdout.decode() if capture else None)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class ApiClient:
    """One kept-open HTTP/1.1 connection to a sandbox's API socket."""

    def __init__(self, path):
        self.path = path
        self.conn = UnixHTTPConnection(path)
        self.reconnects = -1  # the first connect is not a reconnect
        self.server_ms = {}   # argv[0] -> the server's own duration_ms (in s)
        self.run_path = "/v1/run"  # "/run" for a baseline from before /v1/

    def run(self, argv):
        body = json.dumps({"argv": argv}).encode()
        t0 = time.perf_counter()
        if self.conn.sock is None:
            self.reconnects += 1
        self.conn.request("POST", self.run_path, body=body,
                          headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        data = resp.read()
        dt = time.perf_counter() - t0
        if resp.status == 404 and self.run_path == "/v1/run":
            self.run_path = "/run"  # an older hutch (--baseline)
            return self.run(argv)
        if resp.status != 200:
            raise HutchError("POST /run %s: HTTP %d: %s" % (argv, resp.status, data[:500]))
        doc = self.last = json.loads(data)
        if doc.get("exit_code") != 0:
            raise HutchError("POST /run %s: %s" % (argv, data[:500]))
        if isinstance(doc.get("duration_ms"), (int, float)):
            self.server_ms.setdefault(argv[0], []).append(doc["duration_ms"] / 1000.0)
        if resp.will_close:
            self.conn.close()
        return dt

    def close(self):
        self.conn.close()


# --------------------------------------------------------------------------
# mount namespace switching (for crun on hybrid cgroup hosts)

_libc = ctypes.CDLL(None, use_errno=True)


def setns(fd, nstype):
    if _libc.setns(fd, nstype) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns: " + os.strerror(e))


class MountNs:
    """A private mount namespace, held open by a sleeping helper process,
    in which the hybrid cgroup2 mount /sys/fs/cgroup/unified is unmounted.
    crun 1.8 refuses to run on hybrid hosts whose cgroup2 tree has any
    controller; seen from this namespace the host is plain cgroup v1, and
    crun runs with --cgroup-manager=disabled (it creates no cgroup). The
    host's own mounts are untouched."""

    def __init__(self):
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
             "umount /sys/fs/cgroup/unified || exit 1; exec sleep infinity"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 5
        while True:
            if self.proc.poll() is not None:
                raise PeerError("could not prepare a private mount namespace: %s"
                                % self.proc.stderr.read().decode(errors="replace").strip())
            try:
                with open("/proc/%d/comm" % self.proc.pid) as f:
                    if f.read().strip() == "sleep":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise PeerError("mount namespace helper did not start")
            time.sleep(0.005)
        self.fd = os.open("/proc/%d/ns/mnt" % self.proc.pid, os.O_RDONLY)
        self.host_fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)

    def __enter__(self):
        self.cwd = os.getcwd()
        setns(self.fd, CLONE_NEWNS)
        os.chdir(self.cwd)
        return self

    def __exit__(self, *exc):
        setns(self.host_fd, CLONE_NEWNS)
        os.chdir(self.cwd)
        return False

    def close(self):
        try:
            self.proc.kill()
            self.proc.wait()
        except OSError:
            pass
        for fd in (self.fd, self.host_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class NullNs:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass


# --------------------------------------------------------------------------
# /proc helpers

def proc_children(pid):
    out = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def proc_tree(pid):
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += proc_children(p)
    return seen


def proc_comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def pss_kib(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise OSError("no Pss in /proc/%d/smaps_rollup" % pid)


# --------------------------------------------------------------------------
# the measurements

class Results:
    def __init__(self):
        self.items = []      # (item, [(variant, samples_or_None, note)], pairs)
        self.memory = []     # (variant, per_sandbox_kib, detail)
        self.notes = []
        self.density = None  # --density

    def group(self, item):
        g = {"item": item, "variants": {}, "order": [], "errors": {}, "pairs": []}
        self.items.append(g)
        return g


def interleave(g, variants, n, warmup=1):
    """variants: list of (name, fn) where fn() returns seconds. A B A B ...;
    the starting variant rotates every round, and every other round goes
    backwards (A B C, then B A C), so that each variant
    follows its neighbours in the list as often as it precedes them: in one
    direction alone a variant always ran right after the one before it in
    the list, with that one's libraries warm in the caches ("plain true"
    right after "hutch version" measured 1.35x faster than after other
    work, and swapping the two flipped the CLI-start ratio; issue 31).
    A failing peer is dropped (its error kept); a failing hutch variant
    raises."""
    live = []
    for name, fn in variants:
        g["order"].append(name)
        g["variants"][name] = []
        live.append((name, fn))
    for name, fn in list(live):  # warm-up: page cache, dentry cache, probe
        try:
            for _ in range(warmup):
                fn()
        except PeerError as e:
            g["errors"][name] = str(e)
            live.remove((name, fn))
    for i in range(n):
        k = len(live)
        for j in range(k):
            if not live:
                break
            step = j if i % 2 == 0 else -j
            name, fn = live[(i + step) % len(live)]
            try:
                g["variants"][name].append(fn())
            except PeerError as e:
                g["errors"][name] = str(e)
                live.remove((name, fn))


def stats(samples):
    ms = [s * 1000 for s in samples]
    return statistics.median(ms), min(ms), max(ms)
