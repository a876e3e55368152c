# SPDX-License-Identifier: Apache-2.0
"""kill -9 during a snapshot and a fork (issue 28): the source intact, no
half-made snapshot, nothing left after gc.

The known point to interrupt a snapshot at is the store's unpacker
stopping itself (SIGSTOP) after N entries (HUTCH_TEST_UNPACK_STOP_AFTER,
image/unpack.c's test hook, given to the source's supervisor at create):
the sandbox is frozen, the writer child is blocked on its pipe, the layer
is half unpacked in the store's tmp/. A fork is interrupted while its
second sandbox runs its setup script, which says so in a volume; and at
its forker (runtime/disk-fork.c) stopping itself before it fills the
fork's disk, the source frozen (HUTCH_TEST_FORK_STOP); no sleeping for a
moment anywhere."""
import json
import os
import signal

import pytest

from conftest import Sandbox, wait_until
from test_snapshot import snap, tree  # noqa: F401 (snap: a fixture)

FILES = "cd /workspace && for i in $(seq 40); do printf $i > f$i; done"


def children():
    """pid -> its parent, state, for every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rindex(")") + 2:].split()
        out[int(d)] = (int(rest[1]), rest[0])
    return out


def stopped_under(pid):
    """The stopped (SIGSTOP) descendants of pid."""
    procs = children()

    def under(p):
        while p > 1:
            p = procs.get(p, (0, ""))[0]
            if p == pid:
                return True
        return False
    return [p for p, (_, state) in procs.items() if state == "T" and under(p)]


def source(h, image, hook=("HUTCH_TEST_UNPACK_STOP_AFTER", "5")):
    r = h("create", "--image", image, "--json", env=dict([hook]))
    assert r.returncode == 0, r.stderr
    sb = Sandbox(h, json.loads(r.stdout))
    sb.sh(FILES)
    return sb, json.loads(h("inspect", sb.id).stdout)["supervisor_pid"]


def store_tmp(h):
    return os.listdir(os.path.join(h.env["HUTCH_IMAGE_STORE"], "tmp"))


def snapshots(h):
    return [s["name"] for s in json.loads(h("snapshot", "ls", "--json").stdout)]


def stop_in_capture(h, sb, sup, *args):
    """Start `hutch ARGS` and wait until the capture's unpacker stopped."""
    cli = h.popen(*args)
    assert wait_until(lambda: stopped_under(sup), timeout=60), cli.communicate()
    return cli, stopped_under(sup)


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_snapshot_cli_killed_the_supervisor_finishes(snap):
    h, image = snap
    sb, sup = source(h, image)
    want = tree(sb)
    cli, stopped = stop_in_capture(h, sb, sup, "snapshot", sb.id, "s1")
    cli.kill()
    cli.wait()
    for p in stopped:
        os.kill(p, signal.SIGCONT)
    # The supervisor's capture ends whole without its client, the sandbox
    # thawed: it answers, its files as they were.
    assert sb.sh("echo up") == "up\n"
    assert snapshots(h) == ["s1"] and store_tmp(h) == []
    assert tree(sb) == want
    assert tree(h.create("--snapshot", "s1")) == want


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_snapshot_unpacker_killed_leaves_nothing(snap):
    h, image = snap
    sb, sup = source(h, image)
    want = tree(sb)
    cli, stopped = stop_in_capture(h, sb, sup, "snapshot", sb.id, "s1")
    for p in stopped:
        os.kill(p, signal.SIGKILL)
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 70, err
    # Thawed, unchanged; no snapshot, nothing half-made in the store.
    assert sb.sh("echo up") == "up\n" and tree(sb) == want
    assert snapshots(h) == [] and store_tmp(h) == []


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_snapshot_supervisor_killed_leaves_nothing_after_gc(snap):
    h, image = snap
    sb, sup = source(h, image)
    cli, stopped = stop_in_capture(h, sb, sup, "snapshot", sb.id, "s1")
    os.kill(sup, signal.SIGKILL)
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 66 and sb.id in err.decode(), err
    # The stopped unpacker and the writer die with it (PR_SET_PDEATHSIG).
    assert wait_until(lambda: not any(children().get(p, (0, "Z"))[1] != "Z" for p in stopped),
                      timeout=30)
    assert h("gc").returncode == 0
    assert h.ids() == []
    # No snapshot; the half-made layer in tmp/ is the next writer's to
    # remove (image/store.c), never renamed into layers/.
    assert snapshots(h) == []
    layers = set(os.listdir(os.path.join(h.env["HUTCH_IMAGE_STORE"], "layers")))
    assert h("image", "prune").returncode == 0
    assert store_tmp(h) == []
    assert set(os.listdir(os.path.join(h.env["HUTCH_IMAGE_STORE"], "layers"))) <= layers
    # (the fixture's teardown: the runtime dir clean, no cgroup left)


SETUP = """\
if mkdir /mnt/s/first 2>/dev/null; then exit 0; fi
echo ready > /mnt/s/second-in-setup
exec sleep 600
"""


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_fork_cli_killed_part_way_leaves_no_fork(snap, tmp_path):
    """kill -9 of hutch fork -n 2 once the first fork is ready (not yet
    handed over) and the second runs its setup: both are deleted."""
    h, image = snap
    sb = h.create("--image", image)
    sb.sh("printf 1 > /workspace/one")
    want = tree(sb)
    shared = tmp_path / "shared"
    shared.mkdir()
    script = tmp_path / "setup.sh"
    script.write_text(SETUP)
    cli = h.popen("fork", sb.id, "-n", "2", "-v", f"{shared}:/mnt/s:rw", "--setup-script",
                  str(script), "--setup-timeout", "300")
    assert wait_until(lambda: (shared / "second-in-setup").exists(), timeout=120), \
        cli.communicate()
    assert len(h.ids()) == 3  # the source and its two forks, neither handed over
    cli.kill()
    cli.wait()
    assert wait_until(lambda: h.ids() == [sb.id], timeout=60), h.ids()
    # The source ran on; the fork's snapshot is whole (named, spawnable),
    # or there is none (its disk was cloned for the forks, where it can be).
    assert tree(sb) == want
    names = snapshots(h)
    assert len(names) <= 1 and all(n.startswith(f"snap-{sb.id}-") for n in names)
    assert store_tmp(h) == []


def stopped_forkers(sid):
    """The forkers of sandbox sid stopped at their test hook: copies of its
    supervisor (its command line), not its children (orphaned at start)."""
    out = []
    for p, (_, state) in children().items():
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if state == "T" and cmd.startswith(b"hutch-supervisor " + sid.encode()):
            out.append(p)
    return out


def forkers_stopped(h):
    """A host-derived root's source (its disk forked on any host: copied
    where it cannot be cloned), its files' tree, and hutch fork -n 2 of it
    once both forkers stopped at their test hook, the source frozen."""
    sb, _ = source(h, "host", ("HUTCH_TEST_FORK_STOP", "1"))
    want = tree(sb)
    cli = h.popen("fork", sb.id, "-n", "2")
    assert wait_until(lambda: len(stopped_forkers(sb.id)) == 2, timeout=120), \
        cli.communicate()
    return sb, want, cli


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_fork_forker_killed_leaves_nothing(snap):
    """kill -9 of the forker while the source is frozen for it: the fork
    fails, the source is thawed with its files, no sandbox or snapshot is
    left (nor a disk: the fixture's loop check)."""
    h, _ = snap
    sb, want, cli = forkers_stopped(h)
    os.kill(stopped_forkers(sb.id)[0], signal.SIGKILL)
    for p in stopped_forkers(sb.id):
        os.kill(p, signal.SIGCONT)
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 70, err
    assert f"cannot fork sandbox {sb.id}: nothing was made" in err.decode(), err
    assert sb.sh("echo up") == "up\n" and tree(sb) == want
    assert h.ids() == [sb.id] and snapshots(h) == []


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_fork_supervisor_killed_leaves_nothing_after_gc(snap):
    """kill -9 of the source's supervisor while its forkers wait to fill
    the forks' disks: the source ends, the CLI says it is gone, and after
    hutch gc no sandbox, snapshot, forker or disk is left."""
    h, _ = snap
    sb, sup = source(h, "host", ("HUTCH_TEST_FORK_STOP", "1"))
    cli = h.popen("fork", sb.id)
    assert wait_until(lambda: stopped_forkers(sb.id), timeout=120), cli.communicate()
    forkers = stopped_forkers(sb.id)
    os.kill(sup, signal.SIGKILL)
    out, err = cli.communicate(timeout=120)
    assert cli.returncode in (66, 70) and sb.id in err.decode(), err
    for p in forkers:  # let it see its supervisor gone
        os.kill(p, signal.SIGCONT)
    assert h("gc").returncode == 0
    assert wait_until(lambda: not [p for p in forkers if os.path.exists(f"/proc/{p}")],
                      timeout=60)
    assert h.ids() == [] and snapshots(h) == []


def alive(pid):
    """pid runs (neither gone nor a zombie not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_fork_cli_killed_after_its_request_ends_its_forkers(snap):
    """kill -9 of hutch fork once its POST /fork made the forkers (stopped
    at their test hook, the source frozen; the host-derived root's forks
    are created after the answer, so no fork will take their disks): each
    forker ends with its client, the source living on, not after its
    300 s (nor only at a gc with no sandbox left)."""
    h, _ = snap
    sb, want, cli = forkers_stopped(h)
    forkers = stopped_forkers(sb.id)
    cli.kill()
    cli.wait()
    for p in forkers:
        os.kill(p, signal.SIGCONT)
    assert wait_until(lambda: not [p for p in forkers if alive(p)], timeout=60), \
        [p for p in forkers if alive(p)]
    assert sb.sh("echo up") == "up\n" and tree(sb) == want
    assert h.ids() == [sb.id] and snapshots(h) == []


def awaiting_disk(h, sid):
    """The sandboxes of h other than sid whose supervisor runs before its
    disk was made (its event: setup.c)."""
    out = []
    for i in h.ids():
        try:
            with open(os.path.join(h.rtdir, i, "events.log")) as f:
                if i != sid and "not made yet: awaited after init's clone" in f.read():
                    out.append(i)
        except OSError:
            pass  # not written yet, or gone
    return out


def fork_names(h):
    d = os.path.join(h.rtdir, ".disk")
    return sorted(n for n in os.listdir(d) if "fork-" in n) if os.path.isdir(d) else []


@pytest.mark.parametrize("killed", ["creator", "source"])
@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_fork_created_before_its_disk_killed_leaves_nothing_after_gc(snap, killed):
    """By disk, a fork's create runs before its disk exists: its supervisor
    takes the disk itself once its name appears (runtime/disk.h). The
    source stopped (SIGSTOP) before hutch fork -n 2, so that no disk is
    made: both forks' supervisors wait. kill -9 of their creator (hutch
    fork, and with it its creator process) ends them, the source running
    on; kill -9 of the source ends them too (its answer: the connection
    closed). Once the source is gone, after hutch gc: no sandbox, forker
    or disk's name left (the fixture: no loop device, no cgroup). The
    source that lives on, continued after its client died, makes no
    forker (POST /fork's client gone: 410, nothing made)."""
    h, image = snap
    sb = h.create("--image", image)
    if sb.status()["config"].get("workspace") != "disk":
        pytest.skip("the source's writable places are not a disk here (no fork by disk)")
    sb.sh(FILES)
    want = tree(sb)
    sup = json.loads(h("inspect", sb.id).stdout)["supervisor_pid"]
    os.kill(sup, signal.SIGSTOP)
    try:
        cli = h.popen("fork", sb.id, "-n", "2")
        assert wait_until(lambda: len(awaiting_disk(h, sb.id)) == 2, timeout=120), \
            (h.ids(), cli.poll())
        if killed == "creator":
            cli.kill()
            cli.wait()
        else:
            os.kill(sup, signal.SIGKILL)
            out, err = cli.communicate(timeout=120)
            assert cli.returncode != 0 and sb.id in err.decode(), err
        assert wait_until(lambda: [i for i in h.ids() if i != sb.id] == [], timeout=60), \
            h.ids()
    finally:
        if killed == "creator":
            os.kill(sup, signal.SIGCONT)
    from test_fork import copies_of_supervisor
    if killed == "creator":  # it ran on, with no forker
        assert sb.sh("echo up") == "up\n" and tree(sb) == want
        assert wait_until(lambda: "fork refused: its client ended" in
                          open(os.path.join(h.rtdir, sb.id, "events.log")).read(),
                          timeout=60)
        assert copies_of_supervisor(sb.id) == [sup], copies_of_supervisor(sb.id)
        assert h("rm", sb.id).returncode == 0
    assert h("gc").returncode == 0
    assert wait_until(lambda: h.ids() == [] and fork_names(h) == [], timeout=60), \
        (h.ids(), fork_names(h))
    assert wait_until(lambda: copies_of_supervisor(sb.id) == [], timeout=60), \
        copies_of_supervisor(sb.id)
