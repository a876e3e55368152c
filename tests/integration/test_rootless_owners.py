# SPDX-License-Identifier: Apache-2.0
"""Owners in an ordinary user's store (issue 28, docs/snapshots.md "As an
ordinary user", "Owners").

An ordinary user cannot chown the files of their store to other ids, so
the unpacker keeps what a file cannot have (its owner, a directory's mode
narrower than the 0700 it needs to fill it) in
user.containers.override_stat, containers/storage's convention, and lists
those files in the layer's owners index (owners/<hex> of the store); a
sandbox's root applies them through the overlay before anything runs.
The throw-away users of test_rootless.py import an image whose layers have
appuser's files and directory, a tight directory, an owner the sandbox
does not map, nobody's file, a set-uid file and a file of appuser's that a
higher layer replaced with root's; inside, `stat` shows the image's owners
and modes (the unmapped owner root's, the set-uid bit dropped) and appuser
reads and writes what it owns. On main's binary every file was root's and
the tight directory 0700. Everything made is removed after.
"""
import os

import pytest

import ociimage as o
import rootimage
from test_rootless import users  # noqa: F401
from test_rootless_image import _import, _readable, _readable_dir, _store, _user

XATTR = "user.containers.override_stat"
APP = dict(uid=1000, gid=1000)


def middle():
    return o.tar([o.d("opt"),
                  o.d("opt/app", mode=0o750, **APP),
                  o.f("opt/app/secret", "appuser's only\n", mode=0o600, **APP),
                  o.hard("opt/app/hard", "opt/app/secret"),
                  o.f("opt/app/tool", "#!/bin/sh\necho tool\n", mode=0o4755, **APP),
                  o.d("opt/tight", mode=0o500),
                  o.f("opt/tight/in", "in\n"),
                  o.f("opt/www", "www\n", mode=0o640, uid=33, gid=33),
                  o.f("opt/nobody", "n\n", uid=65534, gid=65534),
                  o.f("opt/replaced", "appuser's\n", **APP),
                  o.f("opt/root", "root's\n")])


def top():
    return o.tar([o.d("opt"), o.f("opt/replaced", "root's now\n")])


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    with _readable_dir("rlowners") as d:
        lay = o.layout(str(d / "lay"), [rootimage.layer(tmp_path_factory), middle(), top()])
        _readable(d)
        yield lay


@pytest.fixture
def alice(users):  # noqa: F811
    yield from _user(users[0])


STAT = ("/opt/app", "/opt/app/secret", "/opt/app/hard", "/opt/app/tool", "/opt/tight",
        "/opt/www", "/opt/nobody", "/opt/replaced", "/opt/root")
WANT = ["/opt/app 1000 1000 750", "/opt/app/secret 1000 1000 600",
        "/opt/app/hard 1000 1000 600", "/opt/app/tool 1000 1000 755",
        "/opt/tight 0 0 500",
        # uid 33 is no id of the sandbox's (0, appuser, nobody): root's, its mode kept
        "/opt/www 0 0 640", "/opt/nobody 65534 65534 644",
        "/opt/replaced 0 0 644", "/opt/root 0 0 644"]


def test_owners_kept_in_the_users_store(alice, layout):
    _import(alice, layout)
    store = _store(alice)
    # the store: the owners in the xattr, the paths in the middle layer's index
    owners = os.path.join(store, "owners")
    (index,) = os.listdir(owners)
    with open(os.path.join(owners, index), "rb") as f:
        paths = f.read().split(b"\0")
    assert sorted(p for p in paths if p) == sorted(
        [b"opt/app", b"opt/app/secret", b"opt/app/hard", b"opt/app/tool", b"opt/tight",
         b"opt/www", b"opt/nobody", b"opt/replaced"]), paths
    layer = os.path.join(store, "layers", index)
    assert os.getxattr(os.path.join(layer, "opt/app/secret"), XATTR) == b"1000:1000:0600"
    assert os.getxattr(os.path.join(layer, "opt/tight"), XATTR) == b"0:0:0500"
    st = os.stat(os.path.join(layer, "opt/tight"))
    assert st.st_uid == alice.user.uid and st.st_mode & 0o777 == 0o700, oct(st.st_mode)
    with pytest.raises(OSError):
        os.getxattr(os.path.join(layer, "opt/root"), XATTR)

    sb = alice.create("--image", "test")
    out = sb.sh("stat -c '%n %u %g %a' " + " ".join(STAT))
    assert out.splitlines() == WANT, out
    # appuser reads its private file and writes its directory
    assert sb.sh("cat /opt/app/secret; echo w > /opt/app/new; cat /opt/app/new; "
                 "/opt/app/tool") == "appuser's only\nw\ntool\n"
    # 0500, root's: appuser may not look in (main's store made it 0700)
    assert sb.run("ls /opt/tight")["exit_code"] != 0
    # the override is not left on the sandbox's copies
    assert sb.sh("python3 -c \"import os; print(os.listxattr('/opt/app/secret'))\"") == "[]\n"
    assert alice("rm", sb.id).returncode == 0
    # prune removes the index with its layer
    assert alice("image", "rm", "test").returncode == 0
    r = alice("image", "prune")
    assert r.returncode == 0, r.stderr
    assert os.listdir(owners) == [] and os.listdir(os.path.join(store, "layers")) == []
