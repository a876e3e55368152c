# SPDX-License-Identifier: Apache-2.0
"""Rollback in place (issue 28, docs/snapshots.md): hutch rollback ID
SNAPSHOT returns a live sandbox's files to the snapshot's (a tree hash taken
inside): a write, a delete, a mode change and a new directory undone, in
/workspace, /home/appuser, /tmp and the root's overlay (/var/tmp); the
sandbox's processes run on; the lineage rule; every refusal, from the CLI
and the API; kill -9 of the CLI, the supervisor and the worker mid-way.

On the image roots of the matrix (test_snapshot's `snap` fixture: the
small test image and hutch-default, each test in a store of its own); the
host-derived root has no snapshots and is refused, tested as such.
"""
import json
import os
import signal

import pytest

from conftest import Sandbox, proc_stat, wait_until
from test_snapshot import DIRS, TREE_HASH, WRITE, snap, take  # noqa: F401 (snap: a fixture)
from test_snapshot_faults import stopped_under

# /var/tmp is the root overlay's (not a mount of its own; both images have
# it, mode 1777): the root's upper directory is exercised too.
ROOT_DIR = "/var/tmp"

CHANGE = r'''
set -e
cd /workspace
printf 'changed\n' > a.txt
rm keep
rm -r deep
chmod 600 tool.sh
mkdir -p newdir/sub && printf n > newdir/sub/f
printf n > /home/appuser/new
rm /tmp/t
printf w > /var/tmp/w && rm /var/tmp/v && chmod 700 /var/tmp/d && mkdir /var/tmp/newd
'''


def tree(sb):
    return sb.sh(f"python3 -c '{TREE_HASH}' {DIRS} {ROOT_DIR}").strip()


def prepared(h, image, env=None):
    """A sandbox with WRITE's files and some in the root's overlay."""
    r = h("create", "--image", image, "--json", env=env)
    assert r.returncode == 0, r.stderr
    sb = Sandbox(h, json.loads(r.stdout))
    sb.sh(WRITE)
    sb.sh("printf v > /var/tmp/v && mkdir /var/tmp/d && printf f > /var/tmp/d/f")
    return sb


def rollback(h, sid, name, *args):
    r = h("rollback", sid, name, "--json", *args)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def beating(sb):
    """A background process writing a heartbeat outside the rolled-back tree."""
    st, res = sb.api("POST", "/v1/start_process",
                     {"cmd": "i=0; while :; do i=$((i+1)); echo $i > /dev/shm/beat; sleep 0.05; done"})
    assert st in (200, 201), res
    assert wait_until(lambda: sb.run("cat /dev/shm/beat")["exit_code"] == 0, timeout=60)
    return res


def beat(sb):
    return int(sb.sh("cat /dev/shm/beat") or 0)


def test_rollback_undoes_write_delete_mode_and_new_dir(snap):
    h, image = snap
    sb = prepared(h, image)
    want = tree(sb)
    take(h, sb.id, "s1")
    beating(sb)
    sb.sh(CHANGE)
    assert tree(sb) != want
    info = rollback(h, sb.id, "s1")
    assert info["snapshot"] == "s1" and info["changes"] >= 9 and info["frozen_ms"] >= 0
    assert tree(sb) == want
    assert sb.sh("cat /workspace/a.txt; stat -c %a /workspace/tool.sh /var/tmp/d") == \
        "hello\n750\n755\n"
    assert sb.run("test -e /workspace/newdir || test -e /var/tmp/newd || test -e /var/tmp/w "
                  "|| test -e /home/appuser/new")["exit_code"] == 1
    # The background process runs on: its heartbeat moves after the thaw.
    n = beat(sb)
    assert wait_until(lambda: beat(sb) > n, timeout=60)
    # Again: nothing differs, nothing is changed.
    assert rollback(h, sb.id, "s1")["changes"] == 0
    # Forward again to a later snapshot of the same sandbox.
    sb.sh(CHANGE)
    later = tree(sb)
    take(h, sb.id, "s2")
    rollback(h, sb.id, "s1")
    assert tree(sb) == want
    rollback(h, sb.id, "s2")
    assert tree(sb) == later


def test_rollback_lineage(snap):
    h, image = snap
    a = prepared(h, image)
    take(h, a.id, "a1")
    b = h.create("--image", image)
    b.sh("printf b > /workspace/b")
    take(h, b.id, "b1")
    # A snapshot of another sandbox of the same image: accepted.
    rollback(h, b.id, "a1")
    assert tree(b) == tree(a)
    # Spawned from a1: back to a1 after changes, and on to a snapshot taken
    # of a sandbox spawned from it (one more layer).
    c = h.create("--snapshot", "a1")
    want = tree(c)
    c.sh("printf c > /workspace/c && rm /workspace/a.txt")
    take(h, c.id, "c1")
    rollback(h, c.id, "a1")
    assert tree(c) == want
    d = h.create("--snapshot", "c1")
    rollback(h, d.id, "a1")  # its image's parent: accepted
    assert tree(d) == want
    # b1 is of the base image, c is spawned from a1: neither descends from
    # the other; refused, nothing changed, the fix named.
    before = tree(c)
    r = h("rollback", c.id, "b1")
    assert r.returncode == 64, r.stderr
    assert "not of this sandbox's image" in r.stderr.decode()
    assert "hutch create --snapshot b1" in r.stderr.decode()
    assert tree(c) == before


def test_rollback_refusals(snap):
    h, image = snap
    sb = h.create("--image", image)
    take(h, sb.id, "s1")
    gone = h.create("--image", image)
    assert gone.rm().returncode == 0
    cases = [
        (("rollback",), 64, "missing sandbox id"),
        (("rollback", sb.id), 64, "missing snapshot"),
        (("rollback", sb.id, "../x"), 64, "invalid snapshot name"),
        (("rollback", sb.id, image), 64, "is an image, not a snapshot"),
        (("rollback", sb.id, "s1", "extra"), 64, ""),
        (("rollback", "0123456789ab", "s1"), 65, "no sandbox"),
        (("rollback", sb.id, "nosuch"), 65, "no snapshot 'nosuch'"),
        (("rollback", gone.id, "s1"), 66, gone.id),
    ]
    for args, code, text in cases:
        r = h(*args)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert text in r.stderr.decode(), (args, r.stderr)
    api = [
        ({}, 400, "snapshot"),
        ({"snapshot": 3}, 400, "snapshot"),
        ({"snapshot": ""}, 400, "snapshot"),
        ({"snapshot": "s1", "x": 1}, 400, "unknown field"),
        ({"snapshot": "../x"}, 400, "invalid snapshot name"),
        ({"snapshot": "nosuch"}, 404, "no snapshot"),
        ({"snapshot": image}, 400, "not a snapshot"),
    ]
    for body, code, text in api:
        st, res = sb.api("POST", "/v1/rollback", body)
        assert st == code and text in res["error"]["message"], (body, st, res)
    st, res = sb.api("POST", "/v1/rollback", raw=b"[1]")
    assert st == 400
    st, res = sb.api("POST", "/v1/rollback", {"snapshot": "s1"})
    assert st == 200 and res["snapshot"] == "s1", res


def test_rollback_of_the_host_root_is_refused(hutch):
    sb = hutch.create("--image", "host")
    r = hutch("rollback", sb.id, "x")
    assert r.returncode == 64
    assert "host-derived root cannot be rolled back" in r.stderr.decode()
    assert "--image" in r.stderr.decode()


# ---- kill -9 mid-way: the worker stops itself after N changes
# (HUTCH_TEST_ROLLBACK_STOP_AFTER, given to the sandbox's supervisor at
# create), the sandbox frozen, the tree part way.


def faulty(h, image):
    sb = prepared(h, image, env={"HUTCH_TEST_ROLLBACK_STOP_AFTER": "3"})
    want = tree(sb)
    take(h, sb.id, "s1")
    sb.sh(CHANGE)
    return sb, want, json.loads(h("inspect", sb.id).stdout)["supervisor_pid"]


def stop_in_rollback(h, sup, sid):
    cli = h.popen("rollback", sid, "s1")
    assert wait_until(lambda: stopped_under(sup), timeout=60), cli.communicate()
    return cli, stopped_under(sup)


def store_state(h):
    top = h.env["HUTCH_IMAGE_STORE"]
    return sorted(os.listdir(os.path.join(top, "layers"))), os.listdir(os.path.join(top, "tmp"))


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_rollback_cli_killed_the_supervisor_finishes(snap):
    h, image = snap
    sb, want, sup = faulty(h, image)
    cli, stopped = stop_in_rollback(h, sup, sb.id)
    cli.kill()
    cli.wait()
    for p in stopped:
        os.kill(p, signal.SIGCONT)
    # The rollback ends whole without its client: after, never half.
    assert wait_until(lambda: sb.run("echo up")["stdout"] == "up\n", timeout=60)
    assert tree(sb) == want


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_rollback_supervisor_killed_leaves_nothing_after_gc(snap):
    h, image = snap
    sb, want, sup = faulty(h, image)
    before = store_state(h)
    cli, stopped = stop_in_rollback(h, sup, sb.id)
    os.kill(sup, signal.SIGKILL)
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 66 and sb.id in err.decode(), err
    # The sandbox ended with its supervisor (never handed back half), the
    # worker with it; gc leaves nothing; the store as it was.
    assert wait_until(lambda: not any((proc_stat(p) or ["Z"])[0] != "Z" for p in stopped),
                      timeout=30)
    assert h("gc").returncode == 0
    assert h.ids() == []
    assert store_state(h) == before


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_rollback_worker_killed_ends_the_sandbox(snap):
    h, image = snap
    sb, want, sup = faulty(h, image)
    cli, stopped = stop_in_rollback(h, sup, sb.id)
    for p in stopped:
        os.kill(p, signal.SIGKILL)
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 70, err
    assert "has been ended" in err.decode() and "hutch create --snapshot s1" in err.decode()
    # Part way is never handed back: the sandbox is gone, its end said.
    assert wait_until(lambda: h("exec", sb.id, "--", "true").returncode == 66, timeout=60)
    assert h("gc").returncode == 0

