# SPDX-License-Identifier: Apache-2.0
"""hutch fork ID [-n N] (issue 28, docs/snapshots.md): N sandboxes from a
live one's filesystem, each its own (a write in one is seen by no other,
nor by the source), the source running on; each fork with the options
given (limits, TTL); every refusal with its exit code, nothing left made.
The routes: a source on a disk that can be cloned (XFS, btrfs: no
snapshot), else a snapshot (tmpfs, or a disk on ext4 as here); the
host-derived root's disk copied where it cannot be cloned.

On the image roots (test_snapshot's `snap` fixture: a store of the test's
own holding the root's image)."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import HUTCH, SLOWDOWN, cgroup_dirs_named, wait_until
from test_snapshot import WRITE, snap, tree  # noqa: F401 (snap: a fixture)


def fork(h, *args):
    r = h("fork", *args)
    assert r.returncode == 0, r.stderr.decode()
    return r


@pytest.mark.parametrize("workspace", ["disk", "tmpfs"])
def test_fork_diverges_independently(snap, workspace):
    h, image = snap
    src = h.create("--image", image, "--workspace", workspace)
    src.sh("printf base > /workspace/f && mkdir /workspace/d && printf x > /workspace/d/x "
           "&& printf h > /home/appuser/h && printf t > /tmp/t")
    want = tree(src)
    r = fork(h, src.id, "-n", "3")
    ids = r.stdout.decode().split()
    assert len(ids) == 3 and len(set(ids)) == 3 and src.id not in ids
    err = r.stderr.decode()
    if workspace == "tmpfs" or "from snapshot" in err:
        assert f"3 forks of {src.id} from snapshot snap-{src.id}-" in err and "frozen" in err
    else:  # a disk that can be cloned (XFS, btrfs): no snapshot
        assert f"3 forks of {src.id}, its disk cloned (frozen" in err, err
        assert json.loads(h("snapshot", "ls", "--json").stdout) == []
    live = json.loads(h("ls", "--json").stdout)
    assert {s["id"] for s in live} == {src.id, *ids}
    forks = [Forked(h, i) for i in ids]
    for f in forks:
        assert tree(f) == want
    # Each writes and deletes on its own; no other sandbox sees it.
    for n, f in enumerate(forks):
        f.sh(f"printf {n} > /workspace/f && rm -r /workspace/d && printf {n} > /tmp/mine{n}")
    src.sh("printf after > /workspace/src-only")
    for n, f in enumerate(forks):
        assert f.sh("cat /workspace/f; ls /tmp") == f"{n}mine{n}\nt\n"
        assert f.run("test -e /workspace/src-only")["exit_code"] == 1
    # The source ran on, unchanged by its forks.
    assert src.sh("cat /workspace/f /workspace/d/x; ls /tmp") == "basex" + "t\n"
    assert src.status()["state"] in ("running", "ready", "idle")


# The fork's first command: a file modified (and its hard link with it),
# one deleted, a tree removed, one created, one renamed over another, a
# mode changed; each listed only if the fork had it before.
FIRST = ("cd /workspace && printf changed > a.txt && rm keep && rm -r gone deep && "
         "printf n > new && mv empty many/f1 && chmod 600 many/f2 && "
         "printf same > many/f4.tmp && mv many/f4.tmp many/f5")


def test_fork_first_command_change_list_is_exact(snap):
    """A fork's change lists (issue 29) start from the files it was made
    with: its init indexes the directories before seccomp and every other
    entry after READY, before its first request (init/changes.c), so the
    first command's list is the ground truth's difference (a walk of the
    source before the fork against the fork's after)."""
    from test_changes import listed, snap as walk, truth
    h, image = snap
    if pool_expected(h.rtdir):  # a disk made before the pool is not cloned
        h.create("--image", image).rm()
        assert wait_until(lambda: os.path.exists(os.path.join(h.rtdir, ".disk", "pool.sock")),
                          30 * SLOWDOWN), "no pool started"
    src = h.create("--image", image)
    if "changes" not in src.run("touch /workspace/.probe"):
        pytest.skip("no change lists here: fanotify filesystem marks in a user namespace "
                    "need Linux 6.8")
    src.sh(WRITE + "rm /workspace/.probe && mkdir -p /workspace/many && i=1 && "
           "while [ $i -le 300 ]; do printf $i > /workspace/many/f$i; i=$((i + 1)); done")
    before = walk(src)
    out = json.loads(fork(h, src.id, "--json").stdout)
    f = Forked(h, out["forks"][0])
    res = f.run(FIRST)
    assert res["exit_code"] == 0, (res["stderr"], res)
    after = walk(f)
    assert listed(res) == truth(before, after), (out, res.get("changes"))
    assert "/workspace/hard" in {e["path"] for e in res["changes"]["modified"]}


def host_ids(h, sid, path):
    """(uid, gid) of path in sandbox sid as the host sees it through its
    init's root, and the host uid its root has (its id range's start)."""
    pid = json.loads(h("inspect", sid).stdout)["init_pid"]
    st = os.lstat(f"/proc/{pid}/root{path}")
    with open(f"/proc/{pid}/status") as f:
        base = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    return st.st_uid, st.st_gid, base


def pool_expected(rtdir):
    """Whether rtdir's disks are to be in a pool (runtime/disk-pool.c):
    its file system shares no extents and XFS can be made here."""
    fstype = subprocess.run(["stat", "-f", "-c", "%T", rtdir], capture_output=True,
                            text=True).stdout.strip()
    with open("/proc/filesystems") as f:
        xfs = "\txfs\n" in f.read()
    return fstype not in ("xfs", "btrfs", "tmpfs") and xfs and bool(shutil.which("mkfs.xfs"))


def test_a_fork_of_a_fork_keeps_owners_and_modes(snap):
    """A fork's disk keeps the ids its first writer gave its files; each
    fork sees them as its own range's (idmapped mounts, runtime/
    disk-fork.c), so a fork of a fork has the same files, owners and modes
    (a set-uid bit too, where the disk was cloned: a snapshot drops it),
    and each sandbox's files are, seen from the host, its own range's."""
    h, image = snap
    if pool_expected(h.rtdir):  # the first disk may be made before the pool
        h.create("--image", image)
        wait_until(lambda: os.path.exists(os.path.join(h.rtdir, ".disk", "pool.sock")), 30)
    src = h.create("--image", image)
    src.sh(WRITE + "printf s > /workspace/suid && chmod 4750 /workspace/suid\n")
    want = tree(src)
    out = json.loads(fork(h, src.id, "--json").stdout)
    a = Forked(h, out["forks"][0])
    a.sh("printf a > /workspace/by-a")
    out2 = json.loads(fork(h, a.id, "--json").stdout)
    b = Forked(h, out2["forks"][0])
    assert b.sh("cat /workspace/by-a") == "a"
    b.sh("rm /workspace/by-a && printf b > /workspace/by-b")
    assert a.sh("cat /workspace/by-a; test ! -e /workspace/by-b") == "a"
    b.sh("rm /workspace/by-b")
    if out.get("method") == out2.get("method") == "clone":
        assert b.sh("stat -c '%a %u' /workspace/suid") == "4750 1000\n"
    else:
        b.sh("chmod 4750 /workspace/suid")
    assert tree(b) == want
    bases = set()
    for sb in (src, a, b):
        uid, gid, base = host_ids(h, sb.id, "/workspace/a.txt")
        assert (uid, gid) == (base + 1000, base + 1000), (sb.id, uid, gid, base)
        bases.add(base)
    assert len(bases) == 3


class Forked:
    """A fork by id, with conftest.Sandbox's sh/run/status over its socket."""

    def __new__(cls, h, sid):
        from conftest import Sandbox
        return Sandbox(h, json.loads(h("inspect", sid).stdout) | {"id": sid})


def test_fork_takes_its_own_options(snap):
    h, image = snap
    src = h.create("--image", image, "--instance-type", "small")
    src.sh("printf 1 > /workspace/one")
    r = fork(h, src.id, "--instance-type", "nano", "--ttl", "600", "--json")
    out = json.loads(r.stdout)
    # A disk of another size cannot be cloned: the snapshot route.
    assert out["source"] == src.id and out["snapshot"].startswith(f"snap-{src.id}-")
    assert out["frozen_ms"] >= 0 and len(out["forks"]) == 1
    if src.status()["config"]["workspace"] == "disk":  # said, with the source's reason
        err = r.stderr.decode()
        assert f"fork: sandbox {src.id}: its disk cannot be cloned here" in err, err
        assert "forking by a snapshot instead (slower)" in err, err
    f = Forked(h, out["forks"][0])
    st = f.status()
    assert st["config"]["instance_type"] == "nano"
    assert st["config"]["image"] == out["snapshot"]
    assert st["config"]["ttl_seconds"] == 600
    assert f.sh("cat /workspace/one") == "1"
    assert src.status()["config"]["instance_type"] == "small"


@pytest.mark.parametrize("size", ["same", "nano"])
def test_fork_json_says_the_route_and_no_limits_forks_have_no_cgroup(snap, size):
    """--json says what POST /fork said: "method" (clone, copy; "snapshot"
    for the snapshot route, with its name) and "made_ahead" (0 for a first
    fork and for a snapshot); --no-limits (create's) makes forks without a
    cgroup, from a source that has one (it is frozen for the fork)."""
    h, image = snap
    src = h.create("--image", image)
    src.sh("printf 1 > /workspace/one")
    more = () if size == "same" else ("--instance-type", "nano")
    out = json.loads(fork(h, src.id, "--json", "--no-limits", *more).stdout)
    assert out["method"] in ("clone", "copy", "snapshot"), out
    assert (out["snapshot"] is not None) == (out["method"] == "snapshot"), out
    assert out["made_ahead"] == 0, out
    if size == "nano":  # a disk of another size cannot be cloned
        assert out["method"] == "snapshot", out
    f = Forked(h, out["forks"][0])
    assert f.status()["config"]["no_limits"] is True
    assert cgroup_dirs_named(f.id) == [] and cgroup_dirs_named(src.id) != []
    assert f.sh("cat /workspace/one") == "1"
    assert src.status()["config"]["no_limits"] is False


def test_fork_uses_the_sources_store(snap, tmp_path):
    """A shell whose HUTCH_IMAGE_STORE names another store (here one not
    made) forks an image's sandbox all the same: the source's store, which
    GET /status's config names, is the forks' (the snapshot route's snapshot
    is there too), and the other store stays not made."""
    h, image = snap
    store = h.env["HUTCH_IMAGE_STORE"]
    src = h.create("--image", image, "--instance-type", "small")
    assert src.status()["config"]["image_store"] == store
    src.sh("printf 1 > /workspace/one")
    other = tmp_path / "other-store"
    h.env["HUTCH_IMAGE_STORE"] = str(other)
    try:  # nano: the snapshot route, whose snapshot the create reads
        out = json.loads(fork(h, src.id, "--instance-type", "nano", "--json").stdout)
    finally:
        h.env["HUTCH_IMAGE_STORE"] = store
    assert not other.exists()
    f = Forked(h, out["forks"][0])
    assert f.sh("cat /workspace/one") == "1"
    assert f.status()["config"]["image_store"] == store
    assert out["snapshot"] in h("snapshot", "ls").stdout.decode()


def test_fork_refusals(snap):
    h, image = snap
    src = h.create("--image", image)
    gone = h.create("--image", image)
    assert gone.rm().returncode == 0
    before = h.ids()
    cases = [
        (("fork",), 64, "missing sandbox id"),
        (("fork", "0123456789ab"), 65, "no sandbox"),
        (("fork", gone.id), 66, gone.id),
        (("fork", src.id, "-n", "0"), 64, "invalid -n '0': give a number of forks from 1 to 100"),
        (("fork", src.id, "-n", "101"), 64, "from 1 to 100"),
        (("fork", src.id, "-n", "two"), 64, "from 1 to 100"),
        (("fork", src.id, "-n"), 64, "-n needs a number of forks"),
        (("fork", src.id, "--image", image), 64, "--image and --snapshot do not apply"),
        (("fork", src.id, "--instance-type", "huge"), 64, "instance"),
        (("fork", src.id, "--region", "fra"), 64, "only the default region"),
        (("fork", src.id, "--progress", "sometimes"), 64, "invalid --progress"),
    ]
    for args, code, text in cases:
        r = h(*args)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert text in r.stderr.decode(), (args, r.stderr)
    # Refused before anything was made: no sandbox, no snapshot.
    assert h.ids() == before
    assert json.loads(h("snapshot", "ls", "--json").stdout) == []
    assert src.sh("echo alive") == "alive\n"
    # The forks' ids cannot be written (stdout /dev/full): 70, the forks
    # deleted (never handed over), the source running on.
    with open("/dev/full", "wb") as full:
        r = subprocess.run([HUTCH, "fork", src.id, "-n", "2"], stdout=full,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=h.env,
                           timeout=300)
    assert r.returncode == 70, r.stderr
    assert b"write the forks' ids: No space left on device; deleting them" in r.stderr, r.stderr
    assert wait_until(lambda: h.ids() == before, 60), (h.ids(), before)
    assert src.sh("echo alive") == "alive\n"


def test_fork_of_the_host_root(hutch):
    """Its disk forks (no image to stack a layer on is needed: cloned, or
    its files copied where it cannot be); on tmpfs it would be a snapshot,
    which the host-derived root cannot have."""
    sb = hutch.create("--image", "host")
    sb.sh("printf w > /workspace/w && printf h > /home/appuser/h")
    r = hutch("fork", sb.id, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["snapshot"] is None and out["method"] in ("clone", "copy")
    f = Forked(hutch, out["forks"][0])
    assert f.sh("cat /workspace/w /home/appuser/h") == "wh"
    assert f.status()["config"]["image"] == "host"
    tm = hutch.create("--image", "host", "--workspace", "tmpfs")
    r = hutch("fork", tm.id)
    assert r.returncode == 64, r.stderr
    err = r.stderr.decode()
    assert f"cannot fork sandbox {tm.id}" in err and "host-derived root cannot be" in err
    assert sorted(hutch.ids()) == sorted([sb.id, f.id, tm.id])


def pool_holders(rtdir):
    """runtime/disk-pool.c's holders of rtdir's pool: hutch-disk-pool
    processes whose fd 1000 is rtdir/.disk."""
    out = []
    for comm in glob.glob("/proc/[0-9]*/comm"):
        pid = comm.split("/")[2]
        try:
            with open(comm) as f:
                if f.read().strip() != "hutch-disk-pool":
                    continue
            if os.readlink(f"/proc/{pid}/fd/1000") == os.path.join(rtdir, ".disk"):
                out.append(pid)
        except OSError:
            pass  # ended meanwhile, or another's
    return out


def test_fork_clones_on_a_host_without_extents(hutch):
    """The runtime dir's pool (runtime/disk-pool.c): where the disks'
    files' file system shares no extents (ext4, as here), they are made in
    an XFS of hutch's own, so a fork clones its source's disk; `hutch gc`
    ends its holder (the fixture then checks no loop device is left on a
    file of the runtime dir: the pool's is one)."""
    if not pool_expected(hutch.rtdir):
        pytest.skip("no pool here (the runtime dir's file system shares extents, or no XFS)")
    first = hutch.create("--image", "host")
    # The first create's disk may be made before the pool (its stock's
    # process starts it): the next one's is in it.
    sock = os.path.join(hutch.rtdir, ".disk", "pool.sock")
    assert wait_until(lambda: os.path.exists(sock), 30 * SLOWDOWN), "no pool started"
    sb = hutch.create("--image", "host")
    sb.sh("head -c 1048576 /dev/urandom > /workspace/r && sha256sum /workspace/r > /tmp/sum")
    r = hutch("fork", sb.id, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["method"] == "clone" and out["snapshot"] is None, out
    f = Forked(hutch, out["forks"][0])
    assert f.sh("sha256sum -c /tmp/sum") == "/workspace/r: OK\n"
    f.sh("echo mine > /workspace/r")
    assert sb.sh("sha256sum -c /tmp/sum") == "/workspace/r: OK\n"
    assert pool_holders(hutch.rtdir)
    for s in (f, sb, first):
        assert s.rm().returncode == 0
    assert wait_until(lambda: hutch("gc") and not pool_holders(hutch.rtdir), 30 * SLOWDOWN)
    assert not os.path.exists(sock)


# Each fork's setup script says it started (in a volume the forks share),
# then waits until the other's has too: two creates made one after the
# other never both get there (the first waits for the second, which is
# not started before the first is ready), two made at once do.
BOTH_STARTED = """\
touch "/mnt/s/$(cat /etc/hostname)"
i=0
while [ "$(ls /mnt/s | wc -l)" -lt 2 ]; do
  i=$((i + 1)); [ $i -le 1200 ] || exit 3; sleep 0.05
done
"""


@pytest.mark.parametrize("workspace", ["disk", "tmpfs"])
def test_fork_creates_run_at_once(snap, workspace, tmp_path):
    """hutch fork -n N makes its N sandboxes at once (cli/verb-fork.c's
    creators): by disk each create starts before POST /fork and takes its
    disk as its name appears; by snapshot, after it."""
    h, image = snap
    src = h.create("--image", image, "--workspace", workspace)
    src.sh("printf s > /workspace/s")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    script = tmp_path / "setup.sh"
    script.write_text(BOTH_STARTED)
    r = fork(h, src.id, "-n", "2", "-v", f"{shared}:/mnt/s:rw", "--setup-script", str(script),
             "--setup-timeout", "120")
    ids = r.stdout.decode().split()
    assert len(ids) == 2, r.stderr
    assert sorted(os.listdir(shared)) == sorted(f"hutch-{i}" for i in ids), r.stderr
    for i in ids:
        assert Forked(h, i).sh("cat /workspace/s") == "s"
    assert {s["id"] for s in json.loads(h("ls", "--json").stdout)} == {src.id, *ids}


def seqpacket_drop(path):
    """A forker's disk given up: a connection closed unasked ends it."""
    import socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as so:
        so.connect(path)


def test_fork_api_names_its_disks(snap):
    """POST /fork's "names" (the creator's, so that its creates can start
    first): checked, each a socket in $RT/.disk once it listens, a name
    taken refused (409) and left alone, nothing made on a refusal."""
    h, image = snap
    src = h.create("--image", image)
    if src.status()["config"].get("workspace") != "disk":
        pytest.skip("the source's writable places are not a disk here (POST /fork: 501)")
    disk = os.path.join(h.rtdir, ".disk")
    body = {"count": 2, "disk_bytes": 20 << 30, "copy": True}

    def forks():
        return sorted(n for n in os.listdir(disk) if "fork-" in n)
    for names, text in (("x", "'names' must be"), (["fork-a.sock"], "array of 'count'"),
                        (["fork-a.sock", "../fork-b.sock"], "'names' entry 2"),
                        (["fork-a.sock", "fork-A.sock"], "'names' entry 2"),
                        (["fork-a.sock", "fork-a.sock"], "repeats entry 1")):
        st, res = src.api("POST", "/fork", body | {"names": names})
        assert st == 400 and text in json.dumps(res), (names, st, res)
    assert forks() == []
    taken = os.path.join(disk, "fork-taken.sock")
    open(taken, "w").close()
    st, res = src.api("POST", "/fork", body | {"names": ["fork-mine.sock", "fork-taken.sock"]})
    assert st == 409, res
    assert forks() == ["fork-taken.sock"]  # left alone; ours removed
    os.unlink(taken)
    names = ["fork-t-1.sock", "fork-t-2.sock"]
    st, res = src.api("POST", "/fork", body | {"names": names})
    assert st == 201 and res["disks"] == names, res
    assert forks() == names
    for n in names:
        seqpacket_drop(os.path.join(disk, n))
    assert src.sh("cat /proc/self/status >/dev/null && echo up") == "up\n"
    # each forker, ended by that connection, removed its name (not hutch gc)
    assert wait_until(lambda: forks() == [], 10 * SLOWDOWN), forks()


def post_fork_and_end(sock, body):
    """POST /fork from a process of its own, which ends after the answer:
    the forkers' client (its end ends a forker whose disk no fork took)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from conftest import api; "
            "print(json.dumps(api(sys.argv[2], 'POST', '/fork', json.loads(sys.argv[3]))))")
    r = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__), sock,
                        json.dumps(body)], capture_output=True, timeout=120 * SLOWDOWN)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def test_fork_disk_names_go_with_their_forkers(snap):
    """A forker removes its socket's name from $RT/.disk as it ends (its
    taker removed it already; not taken: its client's end, a connection
    closed unasked, its time up), not hutch gc, which removes .disk only
    once no sandbox is left: none left after a fork and its rm, nor after
    POST /fork's client ended with no fork taken (the first forker the one
    made ahead where disks are cloned), another sandbox living on."""
    h, image = snap
    # lives on (hutch gc keeps .disk); the first disk may be made before the pool
    h.create("--image", image)
    src = h.create("--image", image)
    if src.status()["config"].get("workspace") != "disk":
        pytest.skip("the source's writable places are not a disk here (POST /fork: 501)")
    disk = os.path.join(h.rtdir, ".disk")

    def names():
        return sorted(n for n in os.listdir(disk) if "fork-" in n)

    def events():
        return h("events", src.id).stdout.decode()
    out = json.loads(fork(h, src.id, "-n", "2", "--json").stdout)
    for i in out["forks"]:
        assert h("rm", i).returncode == 0
    assert names() == []
    if out["method"] == "clone":
        assert wait_until(lambda: "forker made ahead" in events(), 30 * SLOWDOWN), events()
    st, res = post_fork_and_end(src.sock, {"count": 2, "disk_bytes": 20 << 30, "copy": True})
    assert st == 201 and len(res["disks"]) == 2, res
    assert res["made_ahead"] == (out["method"] == "clone"), res
    assert wait_until(lambda: names() == [], 10 * SLOWDOWN), names()
    assert h("rm", src.id).returncode == 0
    assert names() == [] and h.ids(), h.ids()


def copies_of_supervisor(sid):
    """Live processes whose command line is sandbox sid's supervisor's: it,
    and its forkers (clones of it, orphaned at start)."""
    out = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmdline, "rb") as f:
                if f.read().startswith(b"hutch-supervisor " + sid.encode()):
                    out.append(int(cmdline.split("/")[2]))
        except OSError:
            pass  # ended meanwhile
    return out


def test_fork_next_forker_made_ahead(snap):
    """A fork by clone makes the source's next fork's forker ahead
    (supervisor/fork.c: its file in the disks' pool and its loop device
    ready, given the source's disk at the next POST /fork): the next fork
    takes it and sees what the source wrote after it was made; the
    source's end, kill -9 too, lets it go (no copy of the supervisor left;
    the fixture: no loop device left)."""
    h, image = snap
    if pool_expected(h.rtdir):  # the first disk may be made before the pool
        h.create("--image", image)
    src = h.create("--image", image)
    if src.status()["config"].get("workspace") != "disk":
        pytest.skip("the source's writable places are not a disk here")
    first = json.loads(fork(h, src.id, "--json").stdout)
    if first.get("method") != "clone":  # the snapshot route (or copied)
        pytest.skip("its disk is not cloned here: no forker is made ahead")
    assert first["made_ahead"] == 0, first

    def events():
        return h("events", src.id).stdout.decode()
    assert wait_until(lambda: "forker made ahead" in events(), 30 * SLOWDOWN), events()
    src.sh("printf late > /workspace/late")
    out = json.loads(fork(h, src.id, "--json").stdout)
    assert out["method"] == "clone" and out["made_ahead"] == 1, out  # POST /fork's
    f = Forked(h, out["forks"][0])
    assert f.sh("cat /workspace/late") == "late"
    forks = [line for line in events().splitlines() if " fork: 1 disk" in line]
    assert len(forks) == 2 and "forker made ahead" not in forks[0], forks
    assert forks[1].endswith("the first's forker made ahead"), forks
    # the third fork's, made ahead again; the source killed: it ends too
    assert wait_until(lambda: events().count("the next fork's forker made ahead") == 2,
                      30 * SLOWDOWN), events()
    assert len(copies_of_supervisor(src.id)) >= 2  # it, the forker (and its namespace's)
    os.kill(src.status()["supervisor_pid"], 9)
    assert wait_until(lambda: not copies_of_supervisor(src.id), 10 * SLOWDOWN)
    assert f.sh("cat /workspace/late") == "late"
    h("gc")


def supervisor_pid(h, sid):
    return json.loads(h("inspect", sid).stdout)["supervisor_pid"]


def sockets_of(pid):
    """The sockets process pid holds (/proc/PID/fd)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed meanwhile
    return n


@pytest.mark.parametrize("workspace", ["disk", "tmpfs"])
def test_fork_supervisors_keep_no_creator_socket(snap, workspace):
    """A fork's supervisor is forked from its creator (cli/fork-creators.c;
    by disk, the first fork's from hutch fork itself, its creators' ends
    open meanwhile): it closes the creators' sockets as it starts, and
    holds as many sockets as a plain create's supervisor of that image
    (counted until they agree: an API connection of inspect's may still be
    open)."""
    h, image = snap
    if pool_expected(h.rtdir):  # the first disk may be made before the pool
        h.create("--image", image)
    src = h.create("--image", image, "--workspace", workspace)
    plain = h.create("--image", image, "--workspace", workspace)
    r = fork(h, src.id, "-n", "3", "--json")
    ids = json.loads(r.stdout)["forks"]
    pids = {i: supervisor_pid(h, i) for i in [plain.id, *ids]}
    counts = {}

    def agree():
        counts.update({i: sockets_of(p) for i, p in pids.items()})
        return set(counts.values()) == {counts[plain.id]}
    assert wait_until(agree, 10 * SLOWDOWN), (json.loads(r.stdout)["method"], counts)


def trace_calls(trace):
    """(pid, line) of an strace -f trace, a call cut by another process's
    ("<unfinished ...>", "<... resumed>") put together again."""
    pending = {}
    for line in open(trace):
        m = re.match(r"(\d+) +(.*)", line.rstrip("\n"))
        if not m:
            continue
        pid, text = int(m.group(1)), m.group(2)
        if text.endswith("<unfinished ...>"):
            pending[pid] = text[:-len("<unfinished ...>")]
            continue
        r = re.match(r"<\.\.\. \w+ resumed>(.*)", text)
        yield pid, (pending.pop(pid, "") + r.group(1)) if r else text


def unreaped_children(trace, of):
    """From an strace -f trace: the children of the processes in of that
    ended and were not reaped by the process that made them (a zombie of
    its, until it ended too). A child made with CLONE_PARENT is its
    maker's parent's, not counted."""
    made, reaped, ended = {}, set(), set()
    for pid, text in trace_calls(trace):
        if text.startswith("+++ "):
            ended.add(pid)
        call = re.match(r"(clone3?|fork|vfork)\((.*)\) += (\d+)$", text)
        if call and pid in of and "CLONE_PARENT" not in call.group(2) \
                and "CLONE_THREAD" not in call.group(2):
            made[int(call.group(3))] = pid
        w = re.match(r"wait4\(.*\) += (\d+)$", text) or \
            re.match(r"waitid\(.*si_pid=(\d+).*\) += 0$", text)
        if w:
            reaped.add((pid, int(w.group(1))))
    return sorted((child, parent) for child, parent in made.items()
                  if child in ended and (parent, child) not in reaped)


def test_a_forker_reaps_what_it_made(hutch, tmp_path):
    """Each forker (runtime/disk-fork.c) reaps the process it made for its
    ids' user namespace: killed once the namespace is open, it was left a
    zombie of the forker's, then an orphan (whoever reaps them took it).
    strace -f from the source's supervisor until every process it made
    has ended (after the rm of the fork and the source): every child a
    forker made is reaped by it."""
    sb = hutch.create("--image", "host")
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    trace = str(tmp_path / "fork.trace")
    st = subprocess.Popen(["strace", "-f", "-o", trace, "-p", str(sup)], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert "attached" in st.stderr.readline()
        r = hutch("fork", sb.id, "--json")
        assert r.returncode == 0, r.stderr
        fid = json.loads(r.stdout)["forks"][0]
        assert hutch("rm", fid, sb.id).returncode == 0
        st.wait(timeout=60 * SLOWDOWN)  # every tracee ended: the forkers too
    finally:
        if st.poll() is None:
            st.kill()
            st.wait()
        st.stderr.close()
    forkers = set()
    for pid, text in trace_calls(trace):
        m = re.match(r"clone3\(\{flags=[^}]*CLONE_PARENT.*\) += (\d+)$", text)
        if m and pid == sup:
            forkers.add(int(m.group(1)))
    assert forkers, "no forker in the trace"
    assert unreaped_children(trace, forkers) == []
