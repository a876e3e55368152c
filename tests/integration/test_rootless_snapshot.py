# SPDX-License-Identifier: Apache-2.0
"""Filesystem snapshots as an ordinary user (issue 28, docs/snapshots.md
"As an ordinary user").

The throw-away users of test_rootless.py import the small test image of
test_rootless_image.py into their own store and snapshot a sandbox of it:
the writer reads appuser's files (owned on the host by a subordinate id
the user's supervisor may not read) from a user namespace of its own
mapped as the sandbox's, so appuser's 0600 file, a 0700 directory, a
symlink and the modes reach the snapshot, and `create --snapshot` as that
user spawns a sandbox with the same files and modes (a tree hash taken on
the host through the sandboxes' roots); the files are the user's in the
store, root's inside, as every rootless image's. `fork` goes the snapshot
route, and `rollback` makes the live tree the snapshot's again (a write,
a change and deletes undone), its owners the live ones. That needs a
cgroup the user may freeze: with HUTCH_TEST_USER_SESSION=1 (the pure-v2
VM, tests/v2/hutch-v2-suite.sh) each user has a delegated one. On a host
that delegates none (this one: cgroup v1 controllers, a v2 tree without
delegation) a user's sandbox is made --no-limits and has no cgroup:
snapshot, fork and rollback are refused there naming the fix, and
nothing is made. Everything made is removed after.
"""
import hashlib
import json
import os
import stat

import pytest

from conftest import Sandbox, wait_until
from test_rootless import SESSION, users  # noqa: F401
from test_rootless_image import _import, _user, layout  # noqa: F401

SECRET = "only appuser may read this\n"

# What appuser writes: a private file, a private directory, odd modes, a
# symlink, a hard link, a FIFO, its home, /tmp, and through the root's
# overlay a new file and a changed one of the image's.
WRITE = r'''
set -e
cd /workspace
printf 'hello\n' > a.txt
printf 'only appuser may read this\n' > secret && chmod 600 secret
printf '#!/bin/sh\necho run\n' > tool.sh && chmod 750 tool.sh
mkdir -p deep/er/est && printf x > deep/er/est/leaf && chmod 700 deep/er
ln -s a.txt link && ln a.txt hard
python3 -c 'import os; os.mkfifo("fifo", 0o640)'
head -c 262144 /dev/urandom > big
printf h > /home/appuser/.profile_x
printf t > /tmp/t && chmod 604 /tmp/t
echo new > /usr/share/scratch/new && echo changed >> /usr/share/open.txt
'''
DIRS = ("/workspace", "/home/appuser", "/tmp", "/usr/share")


@pytest.fixture
def alice(users):  # noqa: F811
    yield from _user(users[0])


def _root_pid(h, sb):
    """A process of the sandbox other than init: its root is the sandbox's."""
    r = h("exec", "-d", sb.id, "--", "sleep", "120")
    assert r.returncode == 0, r.stderr
    init = json.loads(h("inspect", sb.id).stdout)["init_pid"]
    assert wait_until(lambda: any(p != init for p in sb.host_pids()))
    return next(p for p in sb.host_pids() if p != init)


def _tree(pid):
    """Path, type, mode, size and content (a symlink's target) of every
    name under the writable places, read on the host as root through the
    sandbox's root: the sandbox's view, appuser's private files included.
    Owners are left out (compared on their own: a rootless image's files
    are the user's)."""
    h = hashlib.sha256()
    root = f"/proc/{pid}/root"
    for top in DIRS:
        for d, dirs, files in os.walk(root + top):
            dirs.sort()
            for n in sorted(dirs + files) + ["."]:
                p = os.path.join(d, n)
                st = os.lstat(p)
                line = "%s %o %d" % (os.path.normpath(p)[len(root):], st.st_mode,
                                     0 if stat.S_ISDIR(st.st_mode) else st.st_size)
                if stat.S_ISLNK(st.st_mode):
                    line += " -> " + os.readlink(p)
                elif stat.S_ISREG(st.st_mode):
                    with open(p, "rb") as f:
                        line += " " + hashlib.sha256(f.read()).hexdigest()
                h.update(line.encode() + b"\n")
    return h.hexdigest()


def _image_names(h):
    r = h("image", "ls", "--json")
    assert r.returncode == 0, r.stderr
    return sorted(i["name"] for i in json.loads(r.stdout))


@pytest.mark.skipif(not SESSION, reason="needs a cgroup the user may freeze: run with "
                    "HUTCH_TEST_USER_SESSION=1 on pure cgroup v2 (tests/v2/hutch-v2-suite.sh)")
def test_snapshot_spawn_and_fork_as_user(alice, layout):  # noqa: F811
    _import(alice, layout)
    src = alice.create("--image", "test")
    src.sh(WRITE)
    before = _tree(_root_pid(alice, src))
    r = alice("snapshot", src.id, "mine")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "mine\n" and "frozen" in r.stderr.decode(), r
    assert "mine" in _image_names(alice)
    # the source runs on, its files as they were
    assert src.sh("cat /workspace/a.txt") == "hello\n"
    sp = alice.create("--snapshot", "mine")
    pid = _root_pid(alice, sp)
    assert _tree(pid) == before
    # appuser's private file is in the snapshot whole, its mode kept
    st = os.lstat(f"/proc/{pid}/root/workspace/secret")
    assert stat.S_IMODE(st.st_mode) == 0o600
    with open(f"/proc/{pid}/root/workspace/secret") as f:
        assert f.read() == SECRET
    assert os.readlink(f"/proc/{pid}/root/workspace/link") == "a.txt"
    assert stat.S_ISFIFO(os.lstat(f"/proc/{pid}/root/workspace/fifo").st_mode)
    # the root's overlay's changes are kept
    assert sp.sh("cat /usr/share/open.txt /usr/share/scratch/new") == "image data\nchanged\nnew\n"
    # the store keeps appuser's owners (user.containers.override_stat): the
    # spawned sandbox's copy is appuser's, a subordinate id on the host
    # (copied up into its own layer), not the user's
    lo, n = alice.user.subuid
    assert lo <= st.st_uid < lo + n, st.st_uid
    assert sp.sh("stat -c '%u %a' /workspace /workspace/secret /workspace/deep/er") \
        == "1000 755\n1000 600\n1000 700\n"
    assert sp.sh("cat /workspace/secret; echo w > /workspace/w && cat /workspace/w") \
        == SECRET + "w\n"
    # fork: the snapshot route (a user's workspace is no disk to clone)
    r = alice("fork", src.id, "--json")
    assert r.returncode == 0, r.stderr
    fork = json.loads(r.stdout)
    fid = fork["forks"][0]
    fsb = Sandbox(alice, {"id": fid, "socket": os.path.join(alice.user.rtdir, fid, "api.sock")})
    assert _tree(_root_pid(alice, fsb)) == before
    # rollback in place undoes a write, a change and deletes: the worker
    # writes appuser's files from a user namespace mapped as the sandbox's
    src.sh("echo later > /workspace/later; echo changed > /workspace/a.txt; "
           "rm -rf /workspace/secret /workspace/deep /home/appuser/.profile_x")
    assert _tree(_root_pid(alice, src)) != before
    r = alice("rollback", src.id, "mine")
    assert r.returncode == 0, r.stderr
    assert "rolled back to mine" in r.stdout.decode() + r.stderr.decode(), r
    assert _tree(_root_pid(alice, src)) == before
    # the snapshot holds no owners (the user's store): each path keeps its
    # live owner, one put back takes its directory's, so appuser reads its
    # private file again and writes its workspace as before
    assert src.sh("stat -c '%u %a' /workspace /workspace/secret /workspace/deep/er; "
                  "cat /workspace/secret; echo w > /workspace/after && cat /workspace/after") \
        == "1000 755\n1000 600\n1000 700\n" + SECRET + "w\n"
    for i in (sp.id, fid, src.id):
        assert alice("rm", i).returncode == 0
    assert wait_until(lambda: alice("snapshot", "rm", "mine").returncode == 0, 10)
    if fork.get("snapshot"):
        assert alice("snapshot", "rm", fork["snapshot"]).returncode == 0


@pytest.mark.skipif(SESSION, reason="the user's sandboxes have a cgroup here")
def test_snapshot_without_a_cgroup_is_refused_naming_the_fix(alice, layout):  # noqa: F811
    _import(alice, layout)
    src = alice.create("--image", "test")  # --no-limits: no cgroup
    src.sh("echo x > /workspace/x")
    for argv in (("snapshot", src.id, "mine"), ("fork", src.id), ("rollback", src.id, "mine")):
        r = alice(*argv)
        err = r.stderr.decode()
        assert r.returncode == 69, (argv, r)
        assert "without a cgroup" in err and "Delegate=yes" in err, (argv, err)
    # POST /fork (by disk) says why a user's sandbox has none to fork
    status, body = src.api("POST", "/fork", {"count": 1, "disk_bytes": 2684354560})
    assert status == 501, body
    assert "no disk to fork" in body["error"]["message"] \
        and "goes through a snapshot" in body["error"]["message"], body
    # nothing made: no image, no other sandbox; the source runs on, thawed
    assert _image_names(alice) == ["test"]
    assert alice.ids() == [src.id]
    assert src.sh("cat /workspace/x") == "x\n"


# A build as the user: appuser's files (its workdir, a file, a private
# one its command made) and a root's file of the image it changed (copied
# up root's) in the one layer the build ends in.
BUILD = {"name": "built", "image": "test", "workdir": "/workspace/app",
         "files": {"/workspace/app/settings": "debug = false\n"},
         "run": ["echo built > made && chmod 600 made", "echo more >> /usr/share/open.txt"]}


def _build_file(alice, spec):
    d = os.path.join(alice.env["HOME"], "build")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "b.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    for p in (d, path):
        os.chown(p, alice.user.uid, alice.user.gid)
    return path


@pytest.mark.skipif(not SESSION, reason="needs a cgroup the user may freeze: run with "
                    "HUTCH_TEST_USER_SESSION=1 on pure cgroup v2 (tests/v2/hutch-v2-suite.sh)")
def test_build_as_user_keeps_owners(alice, layout):  # noqa: F811
    _import(alice, layout)
    r = alice("build", _build_file(alice, BUILD))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "built\n"
    sp = alice.create("--snapshot", "built")
    assert sp.sh("stat -c '%n %u %g %a' /workspace/app /workspace/app/settings "
                 "/workspace/app/made /usr/share/open.txt").splitlines() == [
        "/workspace/app 1000 1000 755", "/workspace/app/settings 1000 1000 644",
        "/workspace/app/made 1000 1000 600", "/usr/share/open.txt 0 0 666"]
    # appuser reads its private file and writes the workspace it built
    assert sp.sh("cat made; echo w > w && cat w; cat /usr/share/open.txt",
                 cwd="/workspace/app") == "built\nw\nimage data\nmore\n"
    assert alice("rm", sp.id).returncode == 0
    assert wait_until(lambda: alice("snapshot", "rm", "built").returncode == 0, 10)


@pytest.mark.skipif(SESSION, reason="the user's sandboxes have a cgroup here")
def test_build_without_a_cgroup_is_refused_naming_the_fix(alice, layout):  # noqa: F811
    """No longer refused for being an ordinary user: the build's sandbox
    (made with limits, a build has no --no-limits) is what this host cannot
    give a user, and create's refusal names the fix; nothing is made."""
    _import(alice, layout)
    r = alice("build", _build_file(alice, BUILD))
    err = r.stderr.decode()
    assert r.returncode == 69, r
    assert "cannot create sandbox" in err and "cgroup v2 with delegation" in err, err
    assert "needs root" not in err, err
    assert alice.ids() == [] and _image_names(alice) == ["test"]
