"""Snapshot rows: a filesystem snapshot next to tar, a create from it, a fork, the store's disk."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .common import HutchError, interleave, log, REPO


def fs_type(path):
    out = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def measure_fork(args, res, hutch, src, env, where):
    """hutch fork of src (one sandbox), its wall time, and how long the
    source was frozen (its answer's frozen_ms) beside it."""
    frozen, methods = [], set()

    def fork():
        dt, out = hutch.r.timed([hutch.bin, "fork", src, "--json"], HutchError, capture=True)
        o = json.loads(out)
        frozen.append(o["frozen_ms"] / 1e3)
        methods.add(o.get("method") or "snapshot")
        for sid in o["forks"]:
            hutch.rm(sid)
        # the snapshot route: its supervisor lets go of the snapshot as it
        # finishes, just after rm
        for _ in range(3000 if o.get("snapshot") else 0):
            if subprocess.run([hutch.bin, "snapshot", "rm", o["snapshot"]], env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.01)
        if o.get("snapshot"):
            hutch.r.timed([hutch.bin, "image", "prune"], HutchError)
        return dt
    g = res.group("fork of a live sandbox with 100 MB in /workspace%s (target: <= 50 ms)" % where)
    interleave(g, [("hutch fork (1 sandbox, 100 MB)", fork)], args.iterations)
    name = "  of which the source frozen (%s)" % "/".join(sorted(methods))
    g["order"].append(name)
    g["variants"][name] = frozen[1:]  # the warm-up's left out, as above
    g["pairs"] = []


def wait_for_pool(hutch):
    """A disk made before its runtime dir's pool (runtime/disk-pool.c: its
    stock's process starts it) cannot be cloned: a sandbox made and removed,
    and the pool waited for (bounded; none on an XFS or btrfs host)."""
    _, sid = hutch.create()
    hutch.rm(sid)
    sock = os.path.join(hutch.r.env["HUTCH_RUNTIME_DIR"], ".disk", "pool.sock")
    for _ in range(300):
        if os.path.exists(sock):
            return
        time.sleep(0.1)


def du_bytes(path):
    out = subprocess.run(["du", "-s", "-B1", path], capture_output=True, text=True)
    return int(out.stdout.split()[0])


def measure_snapshot_disk(res, hutch, store, count=100, size=100 * 1024):
    """Issue 28's '100 snapshots of one image: disk = their changes only':
    one sandbox of the image writes a file of its own (random, size bytes,
    the previous one removed) before each of count snapshots; the store's
    disk use before and after (du of its blocks), next to the image's and
    the changes' sizes."""
    log("snapshots: %d of one image, the store's disk" % count)
    before = du_bytes(store)
    _, sid = hutch.create("--image", "bench")
    for i in range(count):
        hutch.exec(sid, ["sh", "-c", "rm -f /workspace/c*; head -c %d /dev/urandom "
                         "> /workspace/c%d" % (size, i)])
        hutch.r.timed([hutch.bin, "snapshot", sid, "disk-%d" % i], HutchError)
    hutch.rm(sid)
    grown = du_bytes(store) - before
    changes = count * size
    res.notes.append(
        "%d snapshots of one image (target: the store's disk = their changes only): the image "
        "(the store before, du) %.1f MiB; their changes (a file of %d KiB each) %.1f MiB; the "
        "store grew by (du) %.1f MiB = %.2fx their changes, %.4fx %d copies of the image"
        % (count, before / 2**20, size // 1024, changes / 2**20, grown / 2**20, grown / changes,
           grown / (count * before), count))
    for i in range(count):
        hutch.r.timed([hutch.bin, "snapshot", "rm", "disk-%d" % i], HutchError)
    hutch.r.timed([hutch.bin, "image", "prune"], HutchError)


def measure_snapshots(args, res, hutch, tmpdir):
    """Issue 28's targets, side by side in one run: a filesystem snapshot of
    a sandbox that wrote 100 MB in 1,000 files next to tar of the same files
    (on a tmpfs of the host) through a pipe to /dev/null; a create from that
    snapshot next to a cold create of its base image; a fork of that sandbox
    (one sandbox). Each snapshot, fork and spawned sandbox is removed and the
    store pruned between samples, untimed."""
    log("snapshots: 100 MB in 1,000 files")
    sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
    import ociimage
    import rootimage
    store = os.path.join(tmpdir, "snap-store")
    layer = os.path.join(tmpdir, "root.tar")
    rootimage.build(layer)
    with open(layer, "rb") as fh:
        raw_layer = fh.read()
    lay = ociimage.layout(os.path.join(tmpdir, "layout"), [raw_layer], env=["PATH=/usr/bin:/bin"])
    env = dict(hutch.r.env, HUTCH_IMAGE_STORE=store)
    saved, hutch.r.env = hutch.r.env, env
    shm = tempfile.mkdtemp(prefix="hutch-bench-", dir="/dev/shm")
    try:
        hutch.r.timed([hutch.bin, "image", "import", lay, "bench"], HutchError)
        measure_snapshot_disk(res, hutch, store)
        wait_for_pool(hutch)
        _, src = hutch.create("--image", "bench")
        # The same 1,000 files of 100 KiB (random: nothing compresses), in
        # the sandbox's /workspace and in a tmpfs of the host.
        files = os.path.join(shm, "files")
        os.mkdir(files)
        for i in range(1000):
            with open(os.path.join(files, "f%04d" % i), "wb") as f:
                f.write(os.urandom(100 * 1024))
        tar = os.path.join(tmpdir, "files.tar")
        subprocess.run(["tar", "-cf", tar, "-C", files, "."], check=True)
        hutch.r.timed([hutch.bin, "cp", tar, "%s:/tmp/files.tar" % src], HutchError)
        hutch.exec(src, ["sh", "-c", "mkdir -p /workspace/files && tar -xf /tmp/files.tar "
                         "-C /workspace/files && rm /tmp/files.tar"])
        os.unlink(tar)
        n = [0]

        def forget(name):
            hutch.r.timed([hutch.bin, "snapshot", "rm", name], HutchError)
            hutch.r.timed([hutch.bin, "image", "prune"], HutchError)

        def snapshot():
            n[0] += 1
            name = "bench-%d" % n[0]
            dt = hutch.r.timed([hutch.bin, "snapshot", src, name], HutchError)[0]
            forget(name)
            return dt

        # GNU tar reads nothing when its archive is /dev/null itself: a pipe.
        def tar_files():
            return hutch.r.timed(["sh", "-c", "tar -cf - -C %s . | cat >/dev/null" % files],
                                 HutchError)[0]
        g = res.group("filesystem snapshot of 100 MB in 1,000 files (target: <= 2x tar of them)")
        interleave(g, [("hutch snapshot (100 MB, 1,000 files)", snapshot),
                       ("tar -cf - of the same files | cat >/dev/null (host tmpfs)", tar_files)],
                   args.iterations)
        g["pairs"] = [("hutch snapshot (100 MB, 1,000 files)",
                       "tar -cf - of the same files | cat >/dev/null (host tmpfs)", "<= 2")]

        hutch.r.timed([hutch.bin, "snapshot", src, "bench-spawn"], HutchError)

        def cycle(*opts):
            dt, sid = hutch.create(*opts)
            hutch.rm(sid)
            return dt
        g = res.group("create from that snapshot (target: <= 1.2x a cold create of its base)")
        interleave(g, [("hutch create --snapshot (100 MB snapshot)",
                        lambda: cycle("--snapshot", "bench-spawn")),
                       ("hutch create --image (its base, cold)", lambda: cycle("--image", "bench"))],
                   args.iterations)
        g["pairs"] = [("hutch create --snapshot (100 MB snapshot)",
                       "hutch create --image (its base, cold)", "<= 1.2")]

        measure_fork(args, res, hutch, src, env, "")
        if args.fork_dir:
            # The same with the runtime dir (where the disks' files are) on
            # a file system that shares extents: the fork clones the disk.
            rt = tempfile.mkdtemp(prefix="hutch-bench-rt-", dir=args.fork_dir)
            env2 = dict(env, HUTCH_RUNTIME_DIR=rt)
            hutch.r.env = env2
            try:
                _, src2 = hutch.create("--image", "bench")
                subprocess.run(["tar", "-cf", tar, "-C", files, "."], check=True)
                hutch.r.timed([hutch.bin, "cp", tar, "%s:/tmp/files.tar" % src2], HutchError)
                os.unlink(tar)
                hutch.exec(src2, ["sh", "-c", "mkdir -p /workspace/files && tar -xf "
                                  "/tmp/files.tar -C /workspace/files && rm /tmp/files.tar"])
                measure_fork(args, res, hutch, src2, env2, " (runtime dir on %s)" %
                             fs_type(args.fork_dir))
                hutch.rm(src2)
            finally:
                subprocess.run([hutch.bin, "gc"], env=env2, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                hutch.r.env = env
                shutil.rmtree(rt, ignore_errors=True)
        hutch.rm(src)
    finally:
        hutch.r.env = saved
        shutil.rmtree(shm, ignore_errors=True)
