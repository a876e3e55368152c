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
import json

import pytest

from test_snapshot import snap, tree  # noqa: F401 (snap: a fixture)


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
    f = Forked(h, out["forks"][0])
    st = f.status()
    assert st["config"]["instance_type"] == "nano"
    assert st["config"]["image"] == out["snapshot"]
    assert st["config"]["ttl_seconds"] == 600
    assert f.sh("cat /workspace/one") == "1"
    assert src.status()["config"]["instance_type"] == "small"


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
