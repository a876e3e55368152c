# SPDX-License-Identifier: Apache-2.0
"""Rootless images (issue 15): `hutch run --image` as an ordinary user.

The throw-away users of test_rootless.py (subordinate ids of their own)
import a small image built by the test helpers into their own store
($XDG_DATA_HOME/hutch, else ~/.local/share/hutch) and run sandboxes on it:
the image's root, not the host's; writes to /workspace and, by copy-up, to
the image's /usr land in the sandbox's own layer, owned on the host by the
sandbox's subordinate ids, never by the user and never in the store; one
user can neither use nor remove another's images; the errors of an account
that cannot (no subordinate ids, no home, a store others can write, a
missing image, an image without python3) name their fix; whiteouts and
opaque directories the user unpacked work across three layers. Everything
made is removed afterwards.
"""
import contextlib
import hashlib
import json
import os
import re
import pathlib
import shutil
import subprocess
import tempfile

import pytest

import ociimage as o
import rootimage
from conftest import HUTCH, wait_until
from test_rootless import (User, UserHutch, _pids_of, _pooled, _pools,  # noqa: F401
                           _subid_range, users)

OS_RELEASE = "ID=hutch-rootless-image\n"


def top_layer():
    """What the test asserts on: its own os-release, a directory of /usr
    anyone may write and a file of /usr anyone may change (copy-up)."""
    return o.tar([o.d("etc"), o.f("etc/os-release", OS_RELEASE),
                  o.d("usr"), o.d("usr/share"), o.d("usr/share/scratch", mode=0o777),
                  o.f("usr/share/open.txt", "image data\n", mode=0o666),
                  o.d("opt"), o.f("opt/owned", "appuser's in the image\n", uid=1000,
                                  gid=1000)])


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    with _readable_dir("rlimage") as d:
        lay = o.layout(str(d / "lay"), [rootimage.layer(tmp_path_factory), top_layer()])
        _readable(d)
        yield lay


@contextlib.contextmanager
def _readable_dir(name):
    """A directory of root's the users may read, removed after: not under
    pytest's tmp, whose /tmp/pytest-of-root any pytest session that starts
    meanwhile (another suite on the machine) makes 0700 again, and the users
    could no longer open what is in it."""
    d = tempfile.mkdtemp(prefix=f"hutch-{name}-")
    try:
        os.chmod(d, 0o755)
        yield pathlib.Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _readable(d):
    """What is under d readable by the users."""
    subprocess.run(["chmod", "-R", "a+rX", str(d)], check=True)


def _home(user):
    d = tempfile.mkdtemp(prefix="hutch-rli-")
    os.chown(d, user.uid, user.gid)
    os.chmod(d, 0o755)
    return d


def _hutch(user, home, **env):
    e = {"HOME": home}
    e.update(env)
    h = UserHutch(user, env=e)
    return h


def _user(user):
    """The user's CLI with a home of its own; everything removed after."""
    home = _home(user)
    h = _hutch(user, home)
    yield h
    h("rm", "--all")
    h("gc")
    assert wait_until(lambda: len(_pids_of(h.user.uid)) == 0, 10), _pids_of(h.user.uid)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def alice(users):  # noqa: F811
    yield from _user(users[0])


@pytest.fixture
def bob(users):  # noqa: F811
    yield from _user(users[1])


def _store(h):
    return os.path.join(h.env["HOME"], ".local/share/hutch")


def _import(h, layout, name="test", **env):
    r = h("image", "import", layout, name, env=env)
    assert r.returncode == 0, r.stderr
    return r


def _tree_hash(root):
    """Every path, owner, mode and content under root."""
    out = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for n in sorted(dirs + files):
            p = os.path.join(d, n)
            st = os.lstat(p)
            out.update(f"{p} {st.st_uid} {st.st_gid} {st.st_mode}\n".encode())
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    out.update(f.read())
    return out.hexdigest()


def _host_stat(pid, path):
    return os.stat(f"/proc/{pid}/root{path}")


def test_run_image_as_user(alice, layout):
    """The image's root, writes by copy-up, host ownership, store unchanged."""
    _import(alice, layout)
    store = _store(alice)
    st = os.stat(store)
    assert st.st_uid == alice.user.uid and st.st_mode & 0o077 == 0, oct(st.st_mode)
    r = alice("image", "ls")
    assert r.returncode == 0 and r.stdout.decode().split("\n")[1].split()[0] == "test", r
    before = _tree_hash(os.path.join(store, "layers"))
    # run: the image's /etc/os-release, not the host's
    r = alice("run", "--no-limits", "--image", "test", "--", "cat", "/etc/os-release")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == OS_RELEASE
    with open("/etc/os-release") as f:
        assert f.read() != OS_RELEASE
    sb, other = alice.create("--image", "test"), alice.create("--image", "test")
    data = bytes(range(256)) * 64
    sb.put_file("/workspace/in.bin", data, mode="644")
    sb.sh("echo new > /usr/share/scratch/new; echo changed >> /usr/share/open.txt")
    assert sb.sh("cat /usr/share/open.txt /usr/share/scratch/new") == (
        "image data\nchanged\nnew\n")
    assert sb.sh("sha256sum < /workspace/in.bin").split()[0] == hashlib.sha256(data).hexdigest()
    # the other sandbox of the same image sees the image as it was
    assert other.sh("cat /usr/share/open.txt") == "image data\n"
    assert other.run("ls /usr/share/scratch/new")["exit_code"] != 0
    # image root is sandbox root; appuser cannot change root's files
    assert sb.sh("stat -c '%u %U' /usr/bin/dash") == "0 root\n"
    for cmd in ("echo x > /usr/bin/dash", "echo x > /opt/new", "touch /etc/x"):
        assert sb.run(cmd)["exit_code"] != 0, cmd
    # on the host: what appuser wrote is a subordinate id's, not the user's
    r = alice("exec", "-d", sb.id, "--", "sleep", "60")
    assert r.returncode == 0, r.stderr
    init = json.loads(alice("inspect", sb.id).stdout)["init_pid"]
    assert wait_until(lambda: any(p != init for p in sb.host_pids()))
    pid = next(p for p in sb.host_pids() if p != init)
    lo, n = alice.user.subuid
    for path in ("/workspace/in.bin", "/usr/share/scratch/new"):
        uid = _host_stat(pid, path).st_uid
        assert uid != alice.user.uid and lo <= uid < lo + n, (path, uid)
    # the image's own files are the user's (the sandbox's root) on the host
    assert _host_stat(pid, "/usr/bin/dash").st_uid == alice.user.uid
    # still only the few ids of rootless mode: no range of the image mapped
    with open(f"/proc/{init}/uid_map") as f:
        assert sorted(int(line.split()[0]) for line in f) == [0, 1000, 65534]
    # the layers by fd (Linux 6.13+) or, before, by their mount points'
    # names relative to a directory of the sandbox's own tmpfs
    opts = sb.sh("grep ' / / ' /proc/self/mountinfo")
    assert opts.count("lowerdir+=/layers/") == 2 or re.search(
        r"lowerdir=1:0,upperdir=\.\./(disk/)?upper,", opts), opts  # the 6.1 VM: ../disk/upper
    assert alice("rm", sb.id).returncode == 0
    assert alice("rm", other.id).returncode == 0
    assert _tree_hash(os.path.join(store, "layers")) == before
    assert wait_until(lambda: os.listdir(os.path.join(store, "users")) == [], timeout=10)
    # rm and prune in the user's own store
    assert alice("image", "rm", "test").returncode == 0
    r = alice("image", "prune")
    assert r.returncode == 0 and r.stdout.decode() == "removed 2 unused layers\n", r
    assert os.listdir(os.path.join(store, "layers")) == []


def test_store_is_per_user(alice, bob, layout):
    """XDG_DATA_HOME places it; another user can neither read, use nor
    remove it, nor point hutch at it."""
    data = os.path.join(alice.env["HOME"], "data")
    os.mkdir(data)
    os.chown(data, alice.user.uid, alice.user.gid)
    _import(alice, layout, XDG_DATA_HOME=data)
    store = os.path.join(data, "hutch")
    assert os.path.isdir(os.path.join(store, "images"))
    assert not os.path.exists(_store(alice))
    alice.env["XDG_DATA_HOME"] = data
    # bob's own store does not have it
    r = bob("run", "--no-limits", "--image", "test", "--", "true")
    assert r.returncode == 65, r
    assert "no such image in the store" in r.stderr.decode()
    assert _store(bob) in r.stderr.decode()
    # alice's store named outright: unreadable (0700)
    for argv in (["image", "ls"], ["image", "rm", "test"],
                 ["run", "--no-limits", "--image", "test", "--", "true"]):
        r = bob(*argv, env={"HUTCH_IMAGE_STORE": store})
        assert r.returncode == 69, (argv, r)
        assert "permission denied: another user's store?" in r.stderr.decode(), r.stderr
    # even opened to others, it is not bob's: refused, not read
    os.chmod(store, 0o755)
    for argv in (["image", "ls"], ["image", "rm", "test"],
                 ["run", "--no-limits", "--image", "test", "--", "true"]):
        r = bob(*argv, env={"HUTCH_IMAGE_STORE": store})
        assert r.returncode == 69, (argv, r)
        err = r.stderr.decode()
        assert "is not yours alone" in err and "HUTCH_IMAGE_STORE" in err, err
    os.chmod(store, 0o700)
    assert bob.ids() == []
    r = alice("image", "ls")
    assert r.stdout.decode().split("\n")[1].split()[0] == "test", r
    r = alice("run", "--no-limits", "--image", "test", "--", "cat", "/etc/os-release")
    assert r.returncode == 0 and r.stdout.decode() == OS_RELEASE, r


def test_store_others_can_write_is_refused(alice, layout):
    """A store group or others can write could have layers planted: refused."""
    _import(alice, layout)
    os.chmod(_store(alice), 0o770)
    r = alice("run", "--no-limits", "--image", "test", "--", "true")
    assert r.returncode == 69, r
    err = r.stderr.decode()
    assert f"image store '{_store(alice)}' is not yours alone" in err, err
    assert "chmod go-w" in err
    assert alice.ids() == []


def test_errors_name_their_fix(alice):
    # an image the store does not have: not found, naming pull and import
    r = alice("run", "--no-limits", "--image", "nope", "--", "true")
    assert r.returncode == 65, r
    err = r.stderr.decode()
    assert "--image nope: no such image in the store" in err and "hutch image pull" in err
    assert alice.ids() == []
    # no home and no XDG_DATA_HOME: where a store could go is said
    r = alice("image", "ls", env={"HOME": "relative"})
    assert r.returncode == 69, r
    assert "no image store" in r.stderr.decode() and "HUTCH_IMAGE_STORE" in r.stderr.decode()
    r = alice("run", "--no-limits", "--image", "x", "--", "true", env={"HOME": ""})
    assert r.returncode == 69 and b"no image store" in r.stderr, r


def test_user_without_subordinate_ids_and_image():
    """Said before any store is made or anything imported."""
    u = User(f"hri{os.getpid() % 100000}", system=True)
    home = tempfile.mkdtemp(prefix="hutch-rli-")
    try:
        os.chown(home, u.uid, u.gid)
        r = u.run([HUTCH, "run", "--no-limits", "--image", "/nonexistent/layout", "--",
                   "true"], env={"HOME": home})
        assert r.returncode == 69, r
        err = r.stderr.decode()
        assert "no subordinate ids" in err and "usermod --add-subuids" in err, err
        assert os.listdir(home) == []
    finally:
        u.remove()
        shutil.rmtree(home, ignore_errors=True)


def test_whiteouts_opaque_dirs_and_checks(alice, tmp_path_factory):
    """Whiteouts and opaque directories unpacked by the user (a char 0/0
    node, the user.overlay.opaque xattr) across three layers; an image
    without python3 refused at create as in root mode."""
    base = rootimage.layer(tmp_path_factory)
    l2, l3 = o.whiteout_layers()
    py = os.path.basename(os.path.realpath("/usr/bin/python3"))
    nopy = o.tar([o.d("usr"), o.d("usr/bin"), o.f("usr/bin/.wh.python3", ""),
                  o.f(f"usr/bin/.wh.{py}", "")])
    with _readable_dir("rlthree") as d:
        three = o.layout(str(d / "three"), [base, l2, l3])
        nopy = o.layout(str(d / "nopy"), [base, nopy])
        _readable(d)
        _import(alice, three, "three")
        _import(alice, nopy, "nopy")
    sb = alice.create("--image", "three")
    out = sb.sh("ls /data /data/sub; cat /data/a /data/c /keep; echo; test -e /gone; echo $?")
    assert out.split() == ["/data:", "a", "c", "sub", "/data/sub:", "y", "a2c3k", "1"], out
    r = alice("create", "--no-limits", "--image", "nopy")
    assert r.returncode == 64, r
    assert "image 'nopy' has no python3" in r.stderr.decode(), r.stderr
    assert alice.ids() == [sb.id]


def test_pool_of_an_image(alice, layout):
    """A user's warm pool of an image: its sandboxes are on the image and a
    create --image takes one; a create of the host root does not."""
    _import(alice, layout)
    # the pool's options are create's (UserHutch.create: limits with a user
    # session, --no-limits without): another key is another pool
    lim = [] if alice.user.session else ["--no-limits"]
    r = alice("pool", "start", "--size", "1", *lim, "--image", "test")
    assert r.returncode == 0, r.stderr
    [ready] = _pooled(alice, {})
    sb = alice.create("--image", "test")
    assert sb.id == ready
    assert sb.sh("cat /etc/os-release") == OS_RELEASE
    host = alice.create()
    assert host.id != ready and host.sh("cat /etc/os-release") != OS_RELEASE
    r = alice("pool", "stop", *lim, "--image", "test")
    assert r.returncode == 0, r.stderr
    assert _pools(alice, {}) == []
