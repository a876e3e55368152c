# SPDX-License-Identifier: Apache-2.0
"""runc's contract where engines depend on it (issue 30): the wording and
exit status of kill (with and without --all) and delete on stopped,
missing and half-made containers.

containerd's runc shim parses them: its checkKillError takes "container
not running", "no such process" and "does not exist" as "already gone" and
anything else as an error it retries forever (a CRI pod then never stops);
its delete ignores "does not exist". runc's own tests (kill.bats,
delete.bats) pin the rest: kill of a stopped container fails with
"container not running", kill -a of one succeeds, delete --force of a
missing one succeeds, delete of a created one kills and removes it.
Measured with runc 1.1.5 (Debian 12) on the same cases: docs/kubernetes.md,
"runc's contract".
"""
import json
import os
import shutil

from conftest import proc_comm, wait_until
from test_oci import ROOT_BASE, _root_base, oci, pytestmark  # noqa: F401 (fixtures, skip mark)


def failed_with(r, text):
    return r.returncode == 1 and text in r.output


def proc_state(pid):
    """The one-letter state of /proc/PID/stat, None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def test_kill_stopped_container(oci):
    """kill.bats' "kill detached busybox": after the container stopped,
    kill fails saying "container not running", kill -a succeeds (the
    shim's kill --all 9 after the exit), delete succeeds, state then says
    it does not exist."""
    b = oci.bundle(["sleep", "1000"])
    assert oci("run", "-d", "--bundle", b, "ks").returncode == 0
    assert oci("kill", "ks", "KILL").returncode == 0
    assert wait_until(lambda: oci.state("ks")["status"] == "stopped")
    r = oci("kill", "ks", "0")
    assert failed_with(r, "container not running"), r.output
    r = oci("kill", "ks", "KILL")
    assert failed_with(r, "container not running"), r.output
    for args in (["kill", "-a", "ks", "0"], ["kill", "--all", "ks", "9"]):
        r = oci(*args)
        assert r.returncode == 0 and r.output == "", (args, r.output)
    assert oci("delete", "ks").returncode == 0
    assert failed_with(oci("state", "ks"), "does not exist")


def test_missing_container(oci):
    """A container that is not there: every verb says "does not exist"
    (the shim's kill and delete take it as gone); delete --force
    succeeds."""
    for args in (["kill", "nosuch", "KILL"], ["kill", "--all", "nosuch", "9"],
                 ["delete", "nosuch"], ["state", "nosuch"], ["ps", "nosuch"]):
        r = oci(*args)
        assert failed_with(r, "container nosuch does not exist"), (args, r.output)
    assert oci("delete", "--force", "nosuch").returncode == 0


def test_half_made_container(oci):
    """A directory without state.json (a create that died before writing
    it): kill says it does not exist; delete removes the directory and
    says so too, as runc's delete does; --force makes that a success."""
    for force in ([], ["--force"]):
        half = os.path.join(oci.root, "half")
        os.makedirs(half)
        open(os.path.join(half, "lock"), "w").close()
        for all_ in ([], ["--all"]):
            r = oci("kill", *all_, "half", "KILL")
            assert failed_with(r, "does not exist"), r.output
        r = oci("delete", *force, "half")
        if force:
            assert r.returncode == 0 and r.output == "", r.output
        else:
            assert failed_with(r, "container half does not exist"), r.output
        assert not os.path.exists(half)


def test_delete_of_created_container_kills_it(oci):
    """delete without --force of a created container (nothing ran) kills
    and removes it, as runc's; kill with signal 0 only asks whether it is
    there and leaves it created; a running one is refused without
    --force."""
    b = oci.bundle(["sleep", "1000"])
    assert oci("create", "--bundle", b, "dc").returncode == 0
    sup = oci.status_file("dc")["pid"]
    assert oci("kill", "dc", "0").returncode == 0
    assert oci.state("dc")["status"] == "created"
    r = oci("delete", "dc")
    assert r.returncode == 0, r.output
    assert not os.path.exists(os.path.join(oci.root, "dc"))
    assert wait_until(lambda: proc_comm(sup) is None)
    assert oci("run", "-d", "--bundle", b, "dr").returncode == 0
    r = oci("delete", "dr")
    assert failed_with(r, "cannot delete container dr that is not stopped: running"), r.output
    assert oci("delete", "--force", "dr").returncode == 0


STOPPED = ("T", "t", None)  # stopped, traced, or gone


def test_kill_all_signals_every_process(oci):
    """kill --all signals every process of the container (runc: its
    cgroup's; hutch: its pid namespace's, hutch's init aside), kill
    without it only the container's process: SIGSTOP shows which were
    signalled."""
    b = oci.bundle(["sh", "-c", "sleep 1000 & exec sleep 2000"])
    assert oci("run", "-d", "--bundle", b, "ka").returncode == 0
    main = oci.state("ka")["pid"]

    def pids():
        r = oci("ps", "--format", "json", "ka")
        assert r.returncode == 0, r.output
        return json.loads(r.output)

    assert wait_until(lambda: len(pids()) == 3)
    init, *procs = pids()
    assert main in procs
    other = next(p for p in procs if p != main)
    assert oci("kill", "ka", "STOP").returncode == 0
    assert wait_until(lambda: proc_state(main) == "T")
    # Not stopped (sleeping, or running: init may still be answering the
    # kill it relayed; "== 'S'" failed once on an 'R' in a whole suite)
    assert proc_state(other) not in STOPPED and proc_state(init) not in STOPPED
    assert oci("kill", "--all", "ka", "CONT").returncode == 0
    assert oci("kill", "--all", "ka", "STOP").returncode == 0
    assert wait_until(lambda: proc_state(main) == "T" and proc_state(other) == "T")
    assert proc_state(init) not in STOPPED  # hutch's init is not the container's
    assert oci("kill", "--all", "ka", "KILL").returncode == 0
    assert wait_until(lambda: oci.state("ka")["status"] == "stopped")
    assert wait_until(lambda: proc_state(main) is None and proc_state(other) is None)
    assert oci("delete", "ka").returncode == 0


def test_exec_pause_with_any_root(oci):
    """exec, pause and resume reach the container's supervisor over a unix
    socket in ROOT/ID, whose path may be longer than sun_path's 107 bytes
    (containerd's shim passes --root ROOT/k8s.io and a 64-hex id: a Root
    of over 25 bytes was too long): the socket is bound and reached
    through its directory's fd (/proc/self/fd/N/exec.sock)."""
    top = os.path.join(ROOT_BASE, "r" * 60)
    oci.root = os.path.join(top, "k8s.io")
    cid = "c" * 64
    try:
        assert len(os.path.join(oci.root, cid, "exec.sock")) > 107
        b = oci.bundle(["sleep", "1000"])
        assert oci("run", "-d", "--bundle", b, cid).returncode == 0
        r = oci("exec", cid, "sh", "-c", "echo hi; exit 3")
        assert r.returncode == 3 and r.output == "hi\n", r.output
        assert oci("pause", cid).returncode == 0
        assert oci.state(cid)["status"] == "paused"
        assert oci("resume", cid).returncode == 0
        assert oci.state(cid)["status"] == "running"
        assert oci("delete", "--force", cid).returncode == 0
    finally:
        oci("delete", "--force", cid)
        shutil.rmtree(top, ignore_errors=True)
