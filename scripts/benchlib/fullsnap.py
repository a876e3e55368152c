"""Full snapshot rows (issue 28): CRIU's dump of a Python process holding
200 MB, by hutch snapshot --full of a plain sandbox running it, next to
criu dump --leave-running of the same program run on the host (no
namespaces), with the same CRIU; then hutch create --snapshot of such a
snapshot (the restore into a new sandbox), hutch fork --full of the live
sandbox (dump + restore), and criu dump + restore of the host process
beside: the figure a full fork is held to."""

import ctypes
import json
import os
import shutil
import subprocess
import tempfile
import time

from .common import HutchError, PeerError, interleave, log

HOLDER = """
import os, socket, sys
buf = bytearray(os.urandom(200 << 20))
f = open(sys.argv[1], 'a')
s = socket.socket()
s.bind(('127.0.0.1', 0))
s.listen(4)
f.write('ready\\n'); f.flush()
while True:
    c, _ = s.accept()
    c.sendall(b'%d' % len(buf)); c.close()
"""


def find_criu(env):
    path = env.get("HUTCH_CRIU") or shutil.which("criu", path=os.environ.get("PATH", "") +
                                                 ":/usr/local/sbin:/usr/sbin:/sbin")
    if not path:
        return None, "no criu (HUTCH_CRIU, PATH)"
    if subprocess.run([path, "check"], capture_output=True).returncode != 0:
        return None, "%s fails 'criu check'" % path
    return path, None


def wait_ready(path):
    for _ in range(600):
        if os.path.exists(path) and open(path).read().startswith("ready"):
            return
        time.sleep(0.05)
    raise PeerError("the holder never got ready")


def measure_criu_cycle(args, res, criu, proc, host):
    """criu dump (the process ends) then criu restore -d of it, on the host:
    the reference a full fork in hutch would be held to (<= 1.3x). The bench
    is the child subreaper, so that each restored process is its child and
    its pid is free again once reaped (a restore needs it)."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    pid, d = proc.pid, os.path.join(host, "cycle")
    dumps, restores = [], []
    try:
        for _ in range(args.iterations):
            shutil.rmtree(d, ignore_errors=True)
            os.mkdir(d)
            t0 = time.perf_counter()
            r = subprocess.run([criu, "dump", "-t", str(pid), "-D", d, "-o", "dump.log",
                                "--network-lock", "skip"], capture_output=True)
            t1 = time.perf_counter()
            if r.returncode != 0:
                raise PeerError("criu dump: see %s/dump.log" % d)
            os.waitpid(pid, 0)
            r = subprocess.run([criu, "restore", "-d", "-D", d, "-o", "restore.log",
                                "--network-lock", "skip"], capture_output=True)
            t2 = time.perf_counter()
            if r.returncode != 0:
                raise PeerError("criu restore: see %s/restore.log" % d)
            dumps.append(t1 - t0)
            restores.append(t2 - t1)
    finally:
        os.kill(pid, 9)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    g = res.group("criu dump + restore -d of the same program on the host (the full "
                  "fork's reference)")
    for name, s in (("criu dump (host process)", dumps), ("criu restore -d", restores),
                    ("together", [a + b for a, b in zip(dumps, restores)])):
        g["order"].append(name)
        g["variants"][name] = s


def measure_full_fork(args, res, hutch, sid):
    """hutch fork --full of the live sandbox (one dump, one restore, the
    dump removed): the issue's full fork, held to criu dump + restore -d
    of the host process (the group below, "together")."""
    forks = []
    for _ in range(args.iterations):
        dt, out = hutch.r.timed([hutch.bin, "fork", sid, "--full", "--json"], HutchError,
                                capture=True)
        hutch.rm(json.loads(out)["forks"][0])
        forks.append(dt)
    g = res.group("full fork of that sandbox (dump + restore, the dump removed)")
    g["order"].append("hutch fork --full (200 MB)")
    g["variants"]["hutch fork --full (200 MB)"] = forks


def measure_fullsnap(args, res, hutch, tmpdir):
    criu, why = find_criu(hutch.r.env)
    if not criu:
        res.notes.append("full snapshots: skipped: " + why)
        log("full snapshots: skipped: " + why)
        return
    log("full snapshots: a Python process holding 200 MB")
    store = os.path.join(tmpdir, "full-store")
    env = dict(hutch.r.env, HUTCH_IMAGE_STORE=store, HUTCH_CRIU=criu)
    saved, hutch.r.env = hutch.r.env, env
    host = tempfile.mkdtemp(prefix="hutch-bench-criu-", dir="/var/tmp")
    proc = None
    try:
        _, sid = hutch.create("--image", "host", "--change-lists", "off")
        hutch.r.timed([hutch.bin, "exec", "-d", sid, "--", "python3", "-c", HOLDER,
                       "/workspace/log"], HutchError)
        hutch.exec(sid, ["sh", "-c", "for i in $(seq 600); do grep -q ready /workspace/log "
                         "2>/dev/null && exit 0; sleep 0.05; done; exit 1"])
        log_host = os.path.join(host, "log")
        proc = subprocess.Popen(["python3", "-c", HOLDER, log_host], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        wait_ready(log_host)
        n = [0]

        def hutch_dump():
            n[0] += 1
            dt = hutch.r.timed([hutch.bin, "snapshot", "--full", sid, "full-%d" % n[0]],
                               HutchError)[0]
            hutch.r.timed([hutch.bin, "snapshot", "rm", "full-%d" % n[0]], HutchError)
            return dt

        def criu_dump():
            d = os.path.join(host, "img")
            shutil.rmtree(d, ignore_errors=True)
            os.mkdir(d)
            dt = hutch.r.timed([criu, "dump", "-t", str(proc.pid), "-D", d, "-o", "dump.log",
                                "--leave-running", "--network-lock", "skip"], PeerError)[0]
            shutil.rmtree(d)
            return dt
        g = res.group("full snapshot (dump) of a Python process holding 200 MB")
        interleave(g, [("hutch snapshot --full (plain sandbox)", hutch_dump),
                       ("criu dump --leave-running (host process)", criu_dump)], args.iterations)
        g["pairs"] = [("hutch snapshot --full (plain sandbox)",
                       "criu dump --leave-running (host process)", None)]
        hutch.r.timed([hutch.bin, "snapshot", "--full", sid, "full-r"], HutchError)
        measure_full_fork(args, res, hutch, sid)
        hutch.rm(sid)
        restores = []
        for _ in range(args.iterations):
            dt, nid = hutch.create("--snapshot", "full-r")
            hutch.rm(nid)
            restores.append(dt)
        hutch.r.timed([hutch.bin, "snapshot", "rm", "full-r"], HutchError)
        g = res.group("restore of that full snapshot into a new sandbox")
        g["order"].append("hutch create --snapshot (full, 200 MB)")
        g["variants"]["hutch create --snapshot (full, 200 MB)"] = restores
        measure_criu_cycle(args, res, criu, proc, host)
        proc = None
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(host, ignore_errors=True)
        hutch.r.env = saved
