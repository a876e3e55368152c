# SPDX-License-Identifier: Apache-2.0
"""Disk that behaves as disk (issue 27, runtime/disk.h): /workspace,
/home/appuser, /tmp and an image's writable layer are one ext4 of the
instance's disk size, of the sandbox's own, behind a loop device; in nano
(256 MiB of memory, 2.5 GiB of disk) 1 GB is written, 3 GB fails with
ENOSPC, and nothing is OOM-killed. After rm, or a kill -9 of the
supervisor, no loop device, mount or file is left."""
import json
import os
import re
import signal
import subprocess

import pytest

from conftest import HUTCH, wait_until, loops_of

NANO_DISK = 2684354560
GB = 1 << 30
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a disk needs root (loop devices)")


def loop_identity(dev):
    """What a loop device is on: its backing file's name ('#INODE (deleted)'
    for a nameless file) and device:inode (a pool's files, runtime/disk-pool.c,
    are all '/#INODE (deleted)' in a detached mount: inodes of two pools
    can be equal, their devices not)."""
    with open(f"/sys/block/{dev}/loop/backing_file") as fh:
        name = fh.read()
    out = subprocess.run(["losetup", "-n", "-O", "BACK-MAJ:MIN,BACK-INO", f"/dev/{dev}"],
                         capture_output=True, text=True).stdout.split()
    return name, tuple(out)


def loop_file(sb):
    """The sandbox's disk: its loop device's name and what it is on."""
    dev = int(sb.sh("stat -c %d /workspace"))
    with open("/sys/dev/block/%d:%d/uevent" % (os.major(dev), os.minor(dev))) as fh:
        name = [l.split("=", 1)[1].strip() for l in fh if l.startswith("DEVNAME=")][0]
    return name, loop_identity(name)


def loop_gone(dev, ident):
    """That loop device is detached, or on another file (taken again)."""
    try:
        return loop_identity(dev) != ident
    except OSError:
        return True


def of_its_dir(ident, rtdir):
    """A disk's file is a nameless file of its runtime dir, or of its pool
    (in a detached mount: '/#INODE (deleted)')."""
    return ident[0].startswith((rtdir.rstrip("/") + "/", "/#"))


def fs_of(sb, path):
    out = sb.sh(f"stat -f -c '%T %b %S' {path}").split()
    return out[0], int(out[1]) * int(out[2])


@needs_root
def test_nano_writes_1g_and_gets_enospc_at_its_disk(hutch, root):
    sb = root.create(hutch, "--instance-type", "nano")
    for p in ("/workspace", "/home/appuser", "/tmp"):
        kind, size = fs_of(sb, p)
        assert kind == "ext2/ext3" and NANO_DISK * 0.9 < size <= NANO_DISK, (p, kind, size)
    # 1 GB: four times the memory limit
    res = sb.run("dd if=/dev/zero of=/workspace/one bs=1M count=1024 2>&1", timeout=600)
    assert res["exit_code"] == 0, res
    assert sb.sh("stat -c %s /workspace/one").strip() == str(GB)
    # 3 GB: more than the disk holds (its writes after the first GB too)
    res = sb.run("dd if=/dev/zero of=/tmp/three bs=1M count=3072 2>&1", timeout=600)
    assert res["exit_code"] != 0 and "No space left on device" in res["stdout"], res
    # the sandbox and its processes are still there; nothing was OOM-killed
    assert sb.sh("rm /workspace/one /tmp/three && echo alive").strip() == "alive"
    status, stats = sb.api("GET", "/stats")
    assert status == 200 and stats["oom_kills"] == 0, stats
    # df tells the truth: the space is back
    assert int(sb.sh("df -B1 --output=used /workspace | tail -1")) < 64 << 20
    f, name = loop_file(sb)
    assert of_its_dir(name, hutch.rtdir), name
    assert sb.rm().returncode == 0
    assert wait_until(lambda: loop_gone(f, name), 30), name
    # the dir's stock of disks made ahead of time ends at gc, its loops too
    assert hutch("gc").returncode == 0
    assert wait_until(lambda: not loops_of(hutch.rtdir), 30), loops_of(hutch.rtdir)


@needs_root
def test_kill_9_of_the_supervisor_leaves_no_loop_mount_or_file(hutch, root):
    sb = root.create(hutch, "--instance-type", "nano")
    sb.sh("dd if=/dev/zero of=/workspace/f bs=1M count=64 2>/dev/null")
    f, name = loop_file(sb)
    assert of_its_dir(name, hutch.rtdir), "its disk is a file of its dir or its pool"
    before = set(os.listdir(hutch.rtdir))
    os.kill(json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"], signal.SIGKILL)
    # init dies with its supervisor, its mount namespace with it; the loop
    # device detaches itself (autoclear) and its nameless file is freed
    assert wait_until(lambda: loop_gone(f, name), 30), name
    with open("/proc/self/mountinfo") as fh:
        assert "/dev/loop" not in "".join(l for l in fh if hutch.rtdir in l)
    assert hutch("gc").returncode == 0
    # gc ended the stock (disks made ahead of time): no loop device is left
    assert wait_until(lambda: not loops_of(hutch.rtdir), 30), loops_of(hutch.rtdir)
    assert not os.path.exists(os.path.join(hutch.rtdir, ".disk"))  # the template, none left
    assert not (set(os.listdir(hutch.rtdir)) - before - {".gc", ".gc-pruned", ".gone"})


@needs_root
def test_without_gc_the_stock_and_the_pool_end_by_themselves(hutch):
    """No `hutch gc` ever (a user who never runs one): the disks made ahead
    of time (the stock, idle after 30 s) and the disks' pool (60 s) end
    once the dir has had no sandbox for that long; nothing outlives its use."""
    sb = hutch.create()
    assert loops_of(hutch.rtdir), "a disk (and, on ext4 hosts, the pool) while it runs"
    assert sb.rm().returncode == 0
    assert wait_until(lambda: not loops_of(hutch.rtdir), 150), loops_of(hutch.rtdir)
    disk = os.path.join(hutch.rtdir, ".disk")
    left = os.listdir(disk) if os.path.isdir(disk) else []
    assert not [f for f in left if f.endswith(".sock")], left


@needs_root
def test_gc_that_fails_a_part_still_ends_the_disks(hutch):
    """`hutch gc` runs each part whatever the one before met: the /proc
    views' part failing (its users lock made a directory here) says so
    and exits 70, and the disks' stock and pool end all the same."""
    sb = hutch.create()
    assert sb.rm().returncode == 0
    users = os.path.join(hutch.rtdir, ".lxcfs", "users")
    if not os.path.exists(users):
        pytest.skip("no lxcfs on this host: the /proc views' part cannot fail")
    os.unlink(users)
    os.mkdir(users)
    disk = os.path.join(hutch.rtdir, ".disk")
    last = []

    def gc_ended_the_disks():
        # rm answers before its supervisor has gone (and its dir with it):
        # till then gc keeps the disks, so it is asked again (bounded)
        last[:] = [hutch("gc")]
        return not loops_of(hutch.rtdir) and not os.path.exists(disk)

    try:
        assert wait_until(gc_ended_the_disks, 30), (loops_of(hutch.rtdir), last)
        r = last[0]
        assert r.returncode == 70, r
        assert b"gc of the /proc views" in r.stderr and b"Is a directory" in r.stderr, r.stderr
    finally:
        os.rmdir(users)
        assert wait_until(lambda: hutch("gc").returncode == 0 and
                          not os.path.exists(os.path.join(hutch.rtdir, ".lxcfs")), 30)


@needs_root
def test_pool_switched_off_and_doctor_says_which(hutch):
    """HUTCH_DISK_POOL=none: the disks' files are the runtime dir's own
    (no XFS pool, no holder); `hutch doctor` names the switch, and without
    it says whether the dir's disks get a pool and why not."""
    checks = {c["check"]: c for c in json.loads(hutch("doctor", "--json").stdout)}
    assert checks["disks"]["ok"], checks["disks"]
    assert "a disk per sandbox" in checks["disks"]["detail"], checks["disks"]
    env = {"HUTCH_DISK_POOL": "none"}
    r = hutch("doctor", "--json", env=env)
    d = {c["check"]: c for c in json.loads(r.stdout)}["disks"]
    assert "HUTCH_DISK_POOL=none" in d["detail"], d
    ids = []

    def create():
        r = hutch("create", "--json", env=env)
        assert r.returncode == 0, r.stderr
        ids.append(json.loads(r.stdout)["id"])
        return ids[-1]

    disk = os.path.join(hutch.rtdir, ".disk")
    try:
        create()
        # the stock decides on the pool before it serves: once its socket is
        # there, a pool would be too
        assert wait_until(lambda: os.path.isdir(disk) and
                          any(f.startswith("stock-") and f.endswith(".sock")
                              for f in os.listdir(disk)), 30), os.listdir(disk)
        assert "pool.sock" not in os.listdir(disk), os.listdir(disk)
        sb = create()  # a disk of the stock's
        dev = int(hutch("exec", sb, "--", "stat", "-c", "%d", "/workspace").stdout)
        with open("/sys/dev/block/%d:%d/loop/backing_file" % (os.major(dev), os.minor(dev))) as fh:
            backing = fh.read()
        assert backing.startswith(hutch.rtdir.rstrip("/") + "/"), backing
    finally:
        for i in ids:
            assert hutch("rm", i).returncode == 0


@needs_root
def test_workspace_tmpfs_is_memory_as_before(hutch):
    sb = hutch.create("--instance-type", "nano", "--workspace", "tmpfs")
    assert fs_of(sb, "/workspace") == ("tmpfs", NANO_DISK)
    assert not loops_of(hutch.rtdir)
    r = hutch("create", "--workspace", "ram")
    assert r.returncode != 0 and b"invalid --workspace 'ram'" in r.stderr, r.stderr


@needs_root
def test_a_workspace_left_on_tmpfs_is_said_in_the_events_log(hutch, tmp_path):
    """A host where a disk cannot be made (here mke2fs not executable, in a
    private mount namespace the supervisor forked from this create lives on
    in): the sandbox is made on tmpfs, inspect says so, and its events log
    says why and the fix (the supervisor's own log goes nowhere: it said
    nothing before); a sandbox on its disk has no such line."""
    blank = tmp_path / "mke2fs"
    blank.write_text("")
    blank.chmod(0o644)
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        f'mount --bind "{blank}" /usr/sbin/mke2fs && exec "$0" create --json',
                        HUTCH], env=hutch.env, capture_output=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    sb = json.loads(r.stdout)["id"]
    try:
        assert json.loads(hutch("inspect", sb).stdout)["config"]["workspace"] == "tmpfs"
        warn = [ln for ln in hutch("events", sb).stdout.decode().splitlines() if "warning:" in ln]
        assert len(warn) == 1 and "warning: workspace on tmpfs (charged to memory), not a disk: " \
            "no mke2fs (e2fsprogs) (hutch doctor says what a disk needs)" in warn[0], warn
    finally:
        assert hutch("rm", sb).returncode == 0
    sb = hutch.create()
    assert "warning:" not in hutch("events", sb.id).stdout.decode()
    sb.rm()


def stock_pid(rtdir):
    """The process of rtdir's stock of disks (the one holding its lock), or None."""
    lock = os.path.join(rtdir, ".disk", "stock-")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith(lock) for fd in fds):
                return int(pid)
        except OSError:
            pass
    return None


def children_of(parent, zombies):
    """parent's children that ended and were not reaped (zombies), or the
    others."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent and (fields[0] == "Z") == zombies:
            out.append(int(pid))
    return out


def makers_of(stock):
    """The stock's makers alive (its children not yet reaped are zombies)."""
    return children_of(stock, zombies=False)


@needs_root
def test_the_stock_refills_once_the_run_is_over(hutch):
    """The stock refills once its taker is done (issue 31): a maker's ~10
    ms of CPU does not compete with the run that took the disk. While
    `hutch run` runs its command, the stock keeps the one disk left and
    makes none (before, it forked a maker in the turn that answered the
    take, long before the command started); once run has returned, it
    makes the one taken."""
    assert hutch("run", "--", "true").returncode == 0
    assert wait_until(lambda: stock_pid(hutch.rtdir), 30)
    stock = stock_pid(hutch.rtdir)
    assert wait_until(lambda: len(makers_of(stock)) == 2, 60), makers_of(stock)
    p = hutch.popen("run", "-i", "--", "sh", "-c", "echo started; read x; exit 0",
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"started\n"
        assert len(makers_of(stock)) == 1, makers_of(stock)
    finally:
        p.stdin.close()
        assert p.wait(60) == 0
    assert wait_until(lambda: len(makers_of(stock)) == 2, 60), makers_of(stock)


@needs_root
def test_the_stock_reaps_a_maker_at_once(hutch):
    """A maker that ends (killed in stock here; a taken one once its taker
    has its disk) is reaped at once: SIGCHLD ends the stock's wait. It
    stayed a zombie until the stock's next wake, up to its 5 s tick
    (5.0 s for a maker killed in stock: its socket's EOF woke the stock
    before the maker's exit had made it a zombie). 2 s: well below the
    tick, far above a reap's ~1 ms under load."""
    assert hutch("run", "--", "true").returncode == 0
    assert wait_until(lambda: stock_pid(hutch.rtdir), 30)
    stock = stock_pid(hutch.rtdir)
    for _ in range(2):
        assert wait_until(lambda: len(makers_of(stock)) == 2, 60), makers_of(stock)
        os.kill(makers_of(stock)[0], signal.SIGKILL)
        assert wait_until(lambda: children_of(stock, zombies=True) == [], 2.0), \
            children_of(stock, zombies=True)
    sb = hutch.create()
    assert wait_until(lambda: children_of(stock, zombies=True) == [], 2.0), \
        children_of(stock, zombies=True)
    assert sb.rm().returncode == 0


@needs_root
def test_a_disk_maker_of_its_own_is_reaped_as_it_ends(hutch):
    """A sandbox whose disk no stock made (the first in a runtime dir: the
    stock starts with it) has a maker of its own, the supervisor's child,
    which ends once it handed the disk over: its supervisor reaps it then,
    not at the sandbox's end (it stayed a zombie for the sandbox's life,
    a pooled one's too). None of the supervisor's children is left a
    zombie."""
    sb = hutch.create()
    if sb.status()["config"].get("workspace") != "disk":
        pytest.skip("no disk here (no maker)")
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    assert wait_until(lambda: children_of(sup, zombies=True) == [], 10), \
        children_of(sup, zombies=True)
    assert sb.sh("echo up") == "up\n"


@needs_root
def test_a_disk_is_its_template_laid_out(hutch):
    """A disk's directories come with its template (mke2fs -d, issue 31):
    no disk's maker makes them (each top-level mkdir went to a block group
    of its own, Orlov's spread: their bitmaps read, ~20 blocks written back
    at the end of each disk, `hutch run -- true` 21 writes to the pool ->
    4), so they are the template's first inodes (lost+found is 11)."""
    sb = hutch.create()
    if sb.status()["config"].get("workspace") != "disk":
        pytest.skip("no disk here")
    inodes = sb.sh("stat -c '%n %i %a' /workspace /home/appuser /tmp").split("\n")
    got = {l.split()[0]: (int(l.split()[1]), l.split()[2]) for l in inodes if l}
    assert all(12 <= i < 32 for i, _ in got.values()), got
    assert got["/tmp"][1] == "1777" and got["/workspace"][1] == "755", got
    assert sb.sh("touch /workspace/a /tmp/b && echo ok") == "ok\n"
    assert sb.rm().returncode == 0


@needs_root
def test_a_template_of_an_older_hutch_is_laid_out_by_the_maker(hutch):
    """A template made before the directories were in it (mke2fs without
    -d: a runtime dir an older hutch left) still gives disks with them,
    owned and moded as before: the maker makes what its template lacks."""
    env = {"HUTCH_DISK_POOL": "none"}  # the template a file of .disk
    disk = os.path.join(hutch.rtdir, ".disk")
    r = hutch("create", "--json", env=env)
    assert r.returncode == 0, r.stderr
    if json.loads(r.stdout)["config"].get("workspace") != "disk":
        pytest.skip("no disk here")
    name = [f for f in os.listdir(disk) if re.fullmatch(r"ext4-\d+", f)][0]
    assert hutch("rm", json.loads(r.stdout)["id"]).returncode == 0
    assert hutch("gc").returncode == 0
    os.makedirs(disk, 0o700, exist_ok=True)
    path = os.path.join(disk, name)
    with open(path, "wb") as fh:
        fh.truncate(int(name.split("-")[1]))
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0", "-O",
                    "^has_journal,^resize_inode", "-E",
                    "nodiscard,lazy_itable_init=1,root_owner=0:0", "-L", "hutch", path],
                   check=True)
    r = hutch("create", "--json", env=env)
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["id"]
    out = hutch("exec", sid, "--", "stat", "-c", "%n %i %a %u", "/workspace", "/home/appuser",
                "/tmp").stdout.decode().split("\n")
    got = {l.split()[0]: l.split()[1:] for l in out if l}
    assert max(int(v[0]) for v in got.values()) >= 32, got  # made by the maker, not mke2fs
    assert [v[1:] for v in got.values()] == [["755", "1000"], ["755", "1000"], ["1777", "0"]], got
    assert hutch("exec", sid, "--", "touch", "/workspace/a", "/tmp/b").returncode == 0
    assert hutch("rm", sid).returncode == 0


def shutdowns(trace):
    """The EXT4_IOC_SHUTDOWNs (strace names it F2FS_IOC_SHUTDOWN, same number)."""
    with open(trace) as fh:
        return [l for l in fh if "_IOC_SHUTDOWN" in l or "0x8004587d" in l]


@needs_root
def test_a_disk_is_shut_down_only_with_data_to_drop(hutch, tmp_path):
    """A disk's end shuts its ext4 down (EXT4_IOC_SHUTDOWN: what a sandbox
    wrote and is still in memory is dropped, not written back) only where
    there is such data (its delayed allocation blocks): each shutdown
    prints a line at KERN_ALERT on the kernel's console (a serial port's
    in a VM: ~0.9 ms of CPU per `hutch run -- true`, issue 31)."""
    if tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2]) < (6, 8):
        pytest.skip("no FS_IOC_GETFSSYSFSPATH before Linux 6.8: every disk is shut down")
    assert hutch("run", "--", "true").returncode == 0  # the stock, started
    for cmd, want in (("true", 0), ("dd if=/dev/zero of=/workspace/x bs=1M count=8 2>&1", 1)):
        trace = str(tmp_path / "run.trace")
        r = subprocess.run(["strace", "-f", "-q", "-e", "trace=ioctl", "-o", trace, HUTCH, "run",
                            "--", "sh", "-c", cmd], env=hutch.env, capture_output=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert len(shutdowns(trace)) == want, (cmd, shutdowns(trace))
