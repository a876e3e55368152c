# SPDX-License-Identifier: Apache-2.0
"""The matrix of roots (roots.py) as an ordinary user: what exists for
ordinary users (test_rootless*.py in depth) on each root a user gets, the
test's id naming it ([host], [image], [default]):

  host     the host-derived root
  image    the small OCI image of roots.py, imported by the user into a
           store of the user's own (rootless images: test_rootless_image.py)
  default  hutch-default in the user's own store: the session's copy
           (root's store, closed to the user by design) written out as an
           OCI layout the user imports, once per module (its layer
           re-tarred with the store's ids shifted back: ~900 MB, a minute
           or two); skipped saying why where the session has no default

And the other side: root's stores (the image and default roots of this
session) as seen by a throw-away user the test creates and removes: no
path under them can be listed, written or walked into a layer, nor a
running sandbox's root reached through /proc.
"""
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

import roots
from conftest import HUTCH, wait_until
from test_rootless import User, _pids_of, _user_hutch, users  # noqa: F401
from test_rootless_image import layout  # noqa: F401 (the image's layout, readable by users)

IMAGE = "test"


@pytest.fixture(scope="module")
def alice_store(users, layout):  # noqa: F811
    """The first user's own store, holding the small image (imported by
    the user); removed after the module."""
    user = users[0]
    d = tempfile.mkdtemp(prefix="hutch-rlr-")
    os.chown(d, user.uid, user.gid)
    store = os.path.join(d, "store")
    r = user.run([HUTCH, "image", "import", layout, IMAGE], env={"HUTCH_IMAGE_STORE": store})
    try:
        assert r.returncode == 0, r.stderr
        yield store
    finally:
        shutil.rmtree(d, ignore_errors=True)


class UserRoot:
    def __init__(self, name, image=None, store=None, why_not=None):
        self.name, self.image, self.store, self.why_not = name, image, store, why_not

    def use(self, h):
        if self.why_not:
            pytest.skip(f"root {self.name} as an ordinary user: {self.why_not}")
        if self.store:
            h.env["HUTCH_IMAGE_STORE"] = self.store
        return ["--image", self.image or "host"]


STORE_IDS = 0x0FFF0000  # image/image.h HUTCH_IMAGE_STORE_IDS


def _blob(lay, data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(lay, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def export_layout(store, name, lay):
    """An image of root's store as an OCI layout at lay: its one layer
    re-tarred (GNU tar) with the store's ids (STORE_IDS + n) back to n, its
    config with that tar's diff_id. For the matrix only (hutch has no
    export)."""
    with open(os.path.join(store, "images", name)) as f:
        ref = json.load(f)
    assert len(ref["layers"]) == 1, ref
    layer = os.path.join(store, "layers", ref["layers"][0].split(":", 1)[1])
    os.makedirs(os.path.join(lay, "blobs", "sha256"))
    ids = subprocess.run(["find", layer, "-printf", "%U\n%G\n"], capture_output=True, text=True,
                         check=True, timeout=600).stdout.split()
    idmap = os.path.join(lay, "idmap")
    with open(idmap, "w") as f:
        f.writelines(f"+{i} u:{int(i) - STORE_IDS}\n" for i in sorted(set(ids))
                     if int(i) >= STORE_IDS)
    tmp = os.path.join(lay, "layer.tar")
    subprocess.run(["tar", "--numeric-owner", f"--owner-map={idmap}", f"--group-map={idmap}",
                    "-C", layer, "-cf", tmp, "."], check=True, capture_output=True, timeout=1200)
    os.unlink(idmap)
    h = hashlib.sha256()
    with open(tmp, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    diff = f"sha256:{h.hexdigest()}"
    os.rename(tmp, os.path.join(lay, "blobs", "sha256", h.hexdigest()))
    with open(os.path.join(store, "blobs", "sha256", ref["config"].split(":", 1)[1]), "rb") as f:
        cfg = json.load(f)
    cfg["rootfs"] = {"type": "layers", "diff_ids": [diff]}
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                      **_blob(lay, json.dumps(cfg).encode())},
           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": diff,
                       "size": os.path.getsize(os.path.join(lay, "blobs", "sha256", diff[7:]))}]}
    m = _blob(lay, json.dumps(man).encode())
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", **m,
         "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}
    with open(os.path.join(lay, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(lay, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion": "1.0.0"}')
    return lay


@pytest.fixture(scope="module")
def alice_default_store(users, default_root):  # noqa: F811
    """hutch-default in the first user's own store (imported by the user
    from a layout written out of the session's root store)."""
    if default_root.why_not:
        pytest.skip(f"root default as an ordinary user: {default_root.why_not}")
    user = users[0]
    d = tempfile.mkdtemp(prefix="hutch-rlr-default-")
    try:
        os.chmod(d, 0o755)
        lay = export_layout(str(default_root.store), roots.DEFAULT, os.path.join(d, "lay"))
        subprocess.run(["chmod", "-R", "a+rX", lay], check=True)
        home = os.path.join(d, "user")
        os.mkdir(home, 0o700)
        os.chown(home, user.uid, user.gid)
        store = os.path.join(home, "store")
        r = user.run([HUTCH, "image", "import", lay, roots.DEFAULT],
                     env={"HUTCH_IMAGE_STORE": store}, timeout=1800)
        assert r.returncode == 0, r.stderr
        shutil.rmtree(lay)
        yield store
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=roots.ROOTS)
def uroot(request):
    if request.param == "host":
        return UserRoot("host")
    if request.param == "image":
        return UserRoot("image", IMAGE, request.getfixturevalue("alice_store"))
    return UserRoot("default", roots.DEFAULT, request.getfixturevalue("alice_default_store"))


@pytest.fixture
def alice(users):  # noqa: F811
    yield from _user_hutch(users[0])


def test_lifecycle_exec_and_files(alice, uroot):
    sb = alice.create(*uroot.use(alice))
    assert alice("ls", "-q").stdout.decode().split() == [sb.id]
    r = alice("exec", sb.id, "--", "sh", "-c", "id -u; id -g; pwd; echo $HOME")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["1000", "1000", "/workspace", "/home/appuser"]
    assert alice("exec", sb.id, "--", "python3", "-c", "import sys; sys.exit(7)").returncode == 7
    data = bytes(range(256)) * 400
    sb.put_file("/workspace/in.bin", data, mode="644")
    r = alice("exec", sb.id, "--", "sh", "-c", "stat -c '%U %s' /workspace/in.bin")
    assert r.stdout.decode().split() == ["appuser", str(len(data))]
    st, res = sb.api("POST", "/v1/write_file", {"path": "/workspace/a.txt", "content": "hé\n"})
    assert st == 200, res
    st, res = sb.api("POST", "/v1/read_file", {"path": "/workspace/a.txt"})
    assert st == 200 and res["content"] == "hé\n", res
    root_id = "image" if uroot.image else "host"
    if uroot.name == "default":  # the cloud's tools, on the user's copy
        tools = sb.sh("for t in git curl jq rg node; do command -v $t; done")
        assert tools.count("\n") == 5, tools
        # the user's store keeps the owners it cannot give (_apt's, the
        # shadow group's) in user.containers.override_stat and its owners
        # index; none is an id the sandbox maps: root's inside, modes kept
        (index,) = os.listdir(os.path.join(uroot.store, "owners"))
        partial = os.path.join(uroot.store, "layers", index, "var/cache/apt/archives/partial")
        assert os.getxattr(partial, "user.containers.override_stat") == b"42:0:0700"
        assert sb.sh("stat -c '%u %g %a' /var/cache/apt/archives/partial /etc/shadow") \
            == "0 0 700\n0 0 640\n"
    assert json.loads(alice("inspect", sb.id).stdout)["root"] == root_id
    assert alice("rm", sb.id).returncode == 0
    assert alice.ids() == []


def test_network_none(alice, uroot):
    sb = alice.create(*uroot.use(alice))
    r = alice("exec", sb.id, "--", "python3", "-c",
              "import socket\n"
              "try:\n socket.create_connection(('192.0.2.1', 80), timeout=3)\n"
              "except OSError as e: print(e.errno)\n"
              "try:\n socket.gethostbyname('example.com'); print('resolved')\n"
              "except OSError: print('no-dns')\n")
    assert r.stdout.decode().split() == ["101", "no-dns"], r  # ENETUNREACH
    assert alice("rm", sb.id).returncode == 0


def test_network_allow_refuses_unlisted(alice, uroot):
    """allow: the supervisor's DNS stub and proxy, as the user, on the root
    (no query leaves: the names asked are not listed)."""
    sb = alice.create(*uroot.use(alice), "--network", "allow:example.com")
    r = alice("exec", sb.id, "--", "python3", "-c",
              "import socket\n"
              "try:\n socket.gethostbyname('not-listed.example.org'); print('resolved')\n"
              "except OSError: print('nxdomain')\n"
              "try:\n socket.create_connection(('192.0.2.1', 80), timeout=3)\n"
              "except OSError as e: print(e.errno)\n")
    assert r.stdout.decode().split() == ["nxdomain", "111"], r  # refused at once
    assert alice("rm", sb.id).returncode == 0


def test_attacks_from_inside(alice, uroot):
    """appuser of a rootless sandbox, on each root: init (the caller on the
    host) is out of reach; the root's system files are not appuser's."""
    sb = alice.create(*uroot.use(alice))
    r = alice("exec", sb.id, "--", "python3", "-c",
              "import os\n"
              "res = []\n"
              "for f in (lambda: os.kill(1, 9), lambda: open('/proc/1/environ').read(),\n"
              "          lambda: os.listdir('/proc/1/root/'), lambda: os.setuid(0),\n"
              "          lambda: open('/etc/passwd', 'a'), lambda: open('/usr/bin/x', 'w')):\n"
              "    try:\n        f(); res.append('ok')\n"
              "    except OSError as e: res.append(str(e.errno))\n"
              "print(' '.join(res))\n")
    assert r.returncode == 0, r.stderr
    # EPERM, EACCES, EACCES, EPERM, EACCES, then EACCES (an image's /usr:
    # root's) or EROFS (the host root's /usr: the host's, read-only)
    got = r.stdout.decode().split()
    assert got[:5] == ["1", "13", "13", "1", "13"] and got[5] in ("13", "30"), got
    assert alice("rm", sb.id).returncode == 0


def test_pty(alice, uroot):
    from test_tty import Term
    sb = alice.create(*uroot.use(alice))
    code = "import os; print(os.ttyname(0), os.fstat(0).st_uid); print(*os.get_terminal_size())"
    t = Term(alice, "exec", "-t", sb.id, "--", "python3", "-c", code, rows=31, cols=97,
             user=alice.user)
    try:
        t.expect(rb"/dev/pts/\d+ 1000")
        t.expect(rb"97 31")
        assert t.wait() == 0
    finally:
        t.close()
    assert alice("rm", sb.id).returncode == 0


# ---- root's stores, seen by another user ----

PROBE = r"""
import json, os, sys
out = {}
for p in json.load(sys.stdin):
    r = {}
    def attempt(what, fn):
        try:
            fn()
            r[what] = "ok"
        except OSError as e:
            r[what] = e.strerror
    attempt("stat", lambda: os.lstat(p))
    attempt("list", lambda: os.listdir(p))
    attempt("create", lambda: os.close(os.open(os.path.join(p, ".planted"),
                                              os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)))
    attempt("fifo", lambda: os.mkfifo(os.path.join(p, ".fifo")))
    attempt("symlink", lambda: os.symlink("/etc/shadow", os.path.join(p, ".link")))
    attempt("write", lambda: os.close(os.open(p, os.O_WRONLY | os.O_APPEND)))
    out[p] = r
print(json.dumps(out))
"""


def _store_paths(store):
    """The store, what is in it and two levels down, and in each layer the
    directories everyone may write in the image (tmp, var/tmp, run/lock)
    and a few files."""
    paths = [store]
    for top in sorted(os.listdir(store)):
        p = os.path.join(store, top)
        paths.append(p)
        if os.path.isdir(p) and not os.path.islink(p):
            paths += [os.path.join(p, n) for n in sorted(os.listdir(p))]
    for lid in os.listdir(os.path.join(store, "layers")):
        for rel in ("tmp", "var/tmp", "run/lock", "etc", "etc/passwd", "usr/bin"):
            p = os.path.join(store, "layers", lid, rel)
            if os.path.lexists(p):
                paths.append(p)
    return paths


def test_root_store_is_closed_to_other_users(root, hutch):
    """As a throw-away user (made and removed here): no path under root's
    store of this root can be listed, written or walked into a layer (the
    layers' own 1777 directories let anyone plant files seen in every
    sandbox of the image), with a sandbox of it running (its use record
    there, its overlay mounted), nor its root reached through /proc; no
    ancestor of the store lets the user replace it."""
    if root.name == "host":
        pytest.skip("root host: the host-derived root has no store (its files are the host's own)")
    sb = root.create(hutch)
    store = str(root.store)
    paths = _store_paths(store)
    assert len(paths) > 10 and os.listdir(os.path.join(store, "users")), paths
    init = json.loads(hutch("inspect", sb.id).stdout)["init_pid"]
    paths += [f"/proc/{init}/root/var/tmp", f"/proc/{init}/root/tmp"]
    user = User(f"hrs{os.getpid() % 100000}", system=True)
    try:
        r = user.run(["/usr/bin/python3", "-c", PROBE], input=json.dumps(paths).encode())
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        anc = [os.path.dirname(store)]
        while anc[-1] != "/":
            anc.append(os.path.dirname(anc[-1]))
        r = user.run(["/usr/bin/python3", "-c",
                      "import json, os, sys; print(json.dumps([os.access(p, os.W_OK) "
                      "for p in json.load(sys.stdin)]))"], input=json.dumps(anc).encode())
        writable = [p for p, w in zip(anc, json.loads(r.stdout)) if w]
        assert wait_until(lambda: not _pids_of(user.uid), 10)
    finally:
        user.remove()
    # the store itself: its name may be looked up where its parent is
    # open (/var/cache/...), nothing in it
    bad = {p: {k: v for k, v in r.items() if v == "ok" and not (p == store and k == "stat")}
           for p, r in got.items()}
    bad = {p: r for p, r in bad.items() if r}
    assert not bad, bad
    for p, r in got.items():
        if p != store:
            assert r["stat"] == "Permission denied", (p, r)
    # an ancestor the user may write is sticky (/tmp): it cannot rename root's entry
    for p in writable:
        assert os.stat(p).st_mode & stat.S_ISVTX, f"{p}: writable by any user, not sticky"
    assert sb.rm().returncode == 0
