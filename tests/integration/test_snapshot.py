# SPDX-License-Identifier: Apache-2.0
"""Filesystem snapshots (issue 28, docs/snapshots.md): hutch snapshot ID
[NAME] -> hutch create --snapshot NAME gives the same files, modes and
owners (a tree hash taken inside), deletes survive, the source keeps
running; snapshot ls/inspect/rm, rm refused while used; every refusal.

On the image roots of the matrix (roots.py: the small test image and
hutch-default); the host-derived root is refused, tested as such. Each
test has a store of its own: a hard-linked copy of the root's store (the
layers are only read; a snapshot adds a layer of its own), so snapshots
never reach the session's store.
"""
import fcntl
import json
import os
import shutil
import struct
import subprocess

import pytest

from conftest import wait_until

# A tree hash inside the sandbox: path, type, mode, owner, size and content
# (a symlink's target) of everything under the given directories; mtimes
# are left out (a directory's changes as entries are made).
TREE_HASH = r'''
import hashlib, os, stat, sys
h = hashlib.sha256()
for top in sys.argv[1:]:
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for n in sorted(dirs + files) + ["."]:
            p = os.path.join(d, n)
            st = os.lstat(p)
            line = "%s %o %d %d %d" % (os.path.normpath(p), st.st_mode, st.st_uid, st.st_gid,
                                       0 if stat.S_ISDIR(st.st_mode) else st.st_size)
            if stat.S_ISLNK(st.st_mode):
                line += " -> " + os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    line += " " + hashlib.sha256(f.read()).hexdigest()
            h.update(line.encode() + b"\n")
print(h.hexdigest())
'''
DIRS = "/workspace /home/appuser /tmp"

# What the tests write: every kind of file a sandbox makes, odd modes.
WRITE = r'''
set -e
cd /workspace
printf 'hello\n' > a.txt
printf '#!/bin/sh\necho run\n' > tool.sh && chmod 750 tool.sh
mkdir -p deep/er/est && printf x > deep/er/est/leaf && chmod 700 deep/er
ln -s a.txt link && ln a.txt hard
: > empty
printf 'sp' > 'with space' && printf u > 'ünï'
python3 -c 'import os; os.mkfifo("fifo", 0o640)'
head -c 1048576 /dev/urandom > big
mkdir gone && printf g > gone/f && printf k > keep
printf h > /home/appuser/.profile_x
printf t > /tmp/t && chmod 604 /tmp/t
'''


@pytest.fixture(params=["image", "default"])
def snap(request, tmp_path, hutch):
    """(hutch bound to a store of this test's own holding the root's
    image, the image's name)."""
    root = request.getfixturevalue(f"{request.param}_root")
    if root.why_not:
        pytest.skip(f"root {root.name}: {root.why_not}")
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    for sub in ("layers", "blobs", "images"):
        r = os.system(f"cp -al '{root.store}/{sub}' '{store}/{sub}'")
        assert r == 0
    hutch.env["HUTCH_IMAGE_STORE"] = str(store)
    yield hutch, root.image
    # The test's sandboxes are gone with the hutch fixture's teardown
    # (after this one's): the store goes with tmp_path.


def tree(sb):
    return sb.sh(f"python3 -c '{TREE_HASH}' {DIRS}").strip()


def take(h, sid, *args):
    r = h("snapshot", sid, *args, "--json")
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def test_snapshot_spawn_has_the_same_files(snap):
    h, image = snap
    src = h.create("--image", image)
    src.sh(WRITE)
    want = tree(src)
    info = take(h, src.id, "s1")
    assert info["name"] == "s1" and info["type"] == "filesystem"
    assert info["source"] == src.id and info["base"] == image
    assert info["frozen_ms"] >= 0 and info["bytes"] >= 1048576
    base_layers = len(json.loads(h("image", "inspect", image).stdout)["layers"])
    assert info["layers"] == base_layers + 1
    # The source was thawed: it runs on, its files unchanged.
    assert src.sh("cat /workspace/a.txt") == "hello\n"
    assert tree(src) == want
    child = h.create("--snapshot", "s1")
    assert tree(child) == want
    assert child.sh("/workspace/tool.sh") == "run\n"
    assert child.sh("python3 -c 'import os; print(os.path.samefile(\"/workspace/a.txt\", "
                    "\"/workspace/hard\"))'") == "True\n"
    # Its own writes are its own.
    child.sh("printf changed > /workspace/a.txt")
    assert src.sh("cat /workspace/a.txt") == "hello\n"
    # image= names it too.
    other = h.create("--image", "s1")
    assert tree(other) == want


FS_IOC_GETFLAGS = 0x80086601
FS_TOPDIR_FL = 0x00020000


def test_store_tmp_spreads_layers_on_ext4(snap):
    """The store's tmp/, where a layer is unpacked before its rename, is
    the top of a hierarchy on ext4 (chattr +T), so that each layer's files
    are placed in a block group of their own, away from the inodes a prune
    just freed (image/import.c's spread_tmp(); docs/snapshots.md "Where the
    time went on this machine's ext4")."""
    h, image = snap
    store = h.env["HUTCH_IMAGE_STORE"]
    kind = subprocess.run(["stat", "-f", "-c", "%T", store], capture_output=True,
                          text=True).stdout.strip()
    if kind != "ext2/ext3":
        pytest.skip(f"the store is on {kind}, not ext4: no such flag")
    src = h.create("--image", image)
    src.sh("printf 1 > /workspace/one")
    take(h, src.id, "s1")
    fd = os.open(os.path.join(store, "tmp"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 4))[0]
    finally:
        os.close(fd)
    assert flags & FS_TOPDIR_FL, "tmp/ of the store is not a top directory: %#x" % flags


def test_snapshot_deletes_and_opaque_dirs_survive(snap):
    h, image = snap
    src = h.create("--image", image)
    src.sh(WRITE)
    take(h, src.id, "s1")
    mid = h.create("--snapshot", "s1")
    # Deletes of files the snapshot's layer holds: whiteouts in mid's layer;
    # a directory removed and made again: opaque.
    mid.sh("rm /workspace/keep /workspace/big && rm -r /workspace/gone && mkdir /workspace/gone "
           "&& printf new > /workspace/gone/n && rm /tmp/t")
    want = tree(mid)
    take(h, mid.id, "s2")
    last = h.create("--snapshot", "s2")
    assert tree(last) == want
    assert last.sh("ls -A /workspace/gone") == "n\n"
    assert last.run("test -e /workspace/keep || test -e /workspace/big || test -e /tmp/t")[
        "exit_code"] == 1
    # A snapshot of a snapshot's sandbox stacks one more layer.
    assert len(json.loads(h("snapshot", "inspect", "s2").stdout)["layers"]) == \
        len(json.loads(h("snapshot", "inspect", "s1").stdout)["layers"]) + 1


def test_default_names_are_unique(snap):
    """Unnamed snapshots of one sandbox, taken at once: snap-<id>-<n>, n
    counting them; a name of that form already taken (here given by hand)
    is skipped, not a conflict (full snapshots share the count:
    tests/unit/test_image.c's test_name_pick)."""
    h, image = snap
    src = h.create("--image", image)
    names = [take(h, src.id)["name"] for _ in range(2)]
    assert names == [f"snap-{src.id}-1", f"snap-{src.id}-2"]
    assert take(h, src.id, f"snap-{src.id}-3")["name"] == f"snap-{src.id}-3"
    assert take(h, src.id)["name"] == f"snap-{src.id}-4"
    listed = [s["name"] for s in json.loads(h("snapshot", "ls", "--json").stdout)]
    assert sorted(listed) == [f"snap-{src.id}-{n}" for n in (1, 2, 3, 4)]


def test_snapshot_ls_inspect_rm_and_prune(snap):
    h, image = snap
    src = h.create("--image", image)
    src.sh("printf 1 > /workspace/one")
    name = take(h, src.id)["name"]  # the default name
    assert name.startswith(f"snap-{src.id}-")
    r = h("snapshot", "ls", "--json")
    assert r.returncode == 0, r.stderr
    assert [s["name"] for s in json.loads(r.stdout)] == [name]
    ins = json.loads(h("snapshot", "inspect", name).stdout)
    assert ins["snapshot"]["base"] == image and ins["snapshot"]["source"] == src.id
    top = ins["layers"][-1]
    layer = os.path.join(h.env["HUTCH_IMAGE_STORE"], "layers", top[7:])
    child = h.create("--snapshot", name)
    r = h("snapshot", "rm", name)
    assert r.returncode == 70 and f"in use by sandbox {child.id}" in r.stderr.decode()
    # image rm refuses it too (it forgot the use before 12-05's fourth session).
    r = h("image", "rm", name)
    assert r.returncode == 70 and f"in use by sandbox {child.id}" in r.stderr.decode()
    # prune keeps what a snapshot names, and what a live sandbox uses.
    assert h("image", "prune").returncode == 0 and os.path.isdir(layer)
    assert child.rm().returncode == 0
    # rm answers once the use is let go (the teardown's first phase, init
    # and every process dead): snapshot rm at once works, no waiting.
    r = h("snapshot", "rm", name)
    assert r.returncode == 0, r.stderr
    assert h("image", "prune").returncode == 0 and not os.path.exists(layer)
    assert json.loads(h("snapshot", "ls", "--json").stdout) == []


def test_image_rm_of_a_snapshot_in_use(snap):
    """image rm of a snapshot is refused while a sandbox or a pool's ready
    sandbox uses it, and works at once after that sandbox's rm."""
    h, image = snap
    src = h.create("--image", image)
    take(h, src.id, "s1")
    child = h.create("--snapshot", "s1")
    r = h("image", "rm", "s1")
    assert r.returncode == 70 and f"in use by sandbox {child.id}" in r.stderr.decode(), r.stderr
    assert child.rm().returncode == 0
    r = h("pool", "start", "--snapshot", "s1", "--size", "1")
    assert r.returncode == 0, r.stderr
    try:
        r = h("image", "rm", "s1")
        assert r.returncode == 70 and "in use by sandbox" in r.stderr.decode(), r.stderr
    finally:
        assert h("pool", "stop", "--snapshot", "s1").returncode == 0
    r = h("image", "rm", "s1")  # at once: the pool's sandbox let go before stop returned
    assert r.returncode == 0, r.stderr
    assert "s1" not in [i["name"] for i in json.loads(h("image", "ls", "--json").stdout)]
    # A plain image is forgotten as before, in use or not (its layers stay
    # until prune, which keeps what a live sandbox uses).
    assert h("image", "rm", image).returncode == 0
    assert src.sh("echo up") == "up\n"


def test_snapshot_refusals(snap, tmp_path):
    h, image = snap
    src = h.create("--image", image)
    take(h, src.id, "taken")
    cases = [
        (("snapshot", "0123456789ab", "x"), 65, "no sandbox"),
        (("snapshot", src.id, "taken"), 70, "exists"),
        (("snapshot", src.id, image), 70, "exists"),
        (("snapshot", src.id, "../x"), 64, "invalid snapshot name"),
        (("snapshot", src.id, "-x"), 64, ""),
        (("snapshot",), 64, ""),
        (("snapshot", "rm", "nosuch"), 65, "no snapshot 'nosuch'"),
        (("snapshot", "rm", image), 64, "not a snapshot"),
        (("snapshot", "inspect", image), 64, "not a snapshot"),
        (("create", "--snapshot", "nosuch"), 65, "no such snapshot"),
        (("create", "--snapshot", "host"), 64, "invalid --snapshot"),
    ]
    for args, code, text in cases:
        r = h(*args)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert text in r.stderr.decode(), (args, r.stderr)
    # --full: the CLI's CRIU first (none that passes 'criu check': 69), then
    # the sandbox's refusal of an image root (what a restore cannot remake).
    r = h("snapshot", src.id, "--full")
    assert (r.returncode, "CRIU" in r.stderr.decode()) == (69, True) or \
        (r.returncode, "made from an image" in r.stderr.decode()) == (64, True), r.stderr
    st, res = src.api("POST", "/v1/snapshot", {"type": "full"})
    assert st == 400 and "made from an image" in res["error"]["message"], res
    st, res = src.api("POST", "/v1/snapshot", {"name": 3})
    assert st == 400
    st, res = src.api("POST", "/v1/snapshot", {"nme": "x"})
    assert st == 400 and "unknown field" in res["error"]["message"]
    # Nothing half-made is left in the store by the refusals.
    assert os.listdir(os.path.join(h.env["HUTCH_IMAGE_STORE"], "tmp")) == []


def test_snapshot_of_the_host_root_is_refused(hutch):
    sb = hutch.create("--image", "host")
    r = hutch("snapshot", sb.id, "x")
    assert r.returncode == 64
    assert "host-derived root cannot be snapshotted" in r.stderr.decode()
    assert "--image" in r.stderr.decode()


@pytest.mark.parametrize("args,words", [
    (("snapshot", "--json"), "missing sandbox id: hutch snapshot ID [NAME]"),
    (("snapshot", "inspect"), "snapshot inspect needs one NAME; see 'hutch snapshot ls'"),
    (("snapshot", "rm"), "snapshot rm needs a NAME; see 'hutch snapshot ls'"),
])
def test_snapshot_usage_errors(hutch, args, words):
    """Said before a store or a sandbox is looked at: 64, nothing made."""
    r = hutch(*args)
    assert r.returncode == 64 and r.stdout == b"", r
    assert words in r.stderr.decode(), r.stderr
    assert not os.path.exists(hutch.env["HUTCH_IMAGE_STORE"]) and hutch.ids() == []
