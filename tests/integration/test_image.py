# SPDX-License-Identifier: Apache-2.0
"""The image store (issue 14): import of OCI layouts and docker-save
archives the test builds itself, digests, the layer cache, the overlayfs
view of whiteouts and opaque directories, and crafted layers that must
change nothing outside the store, nor create a device or a set-id file."""
import json
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile

import pytest

import ociimage as o
from conftest import HUTCH

STORE_IDS = 0x0FFF0000  # image/image.h HUTCH_IMAGE_STORE_IDS


@pytest.fixture
def store(tmp_path, hutch):
    path = tmp_path / "store"
    hutch.env["HUTCH_IMAGE_STORE"] = str(path)
    yield path


@pytest.fixture
def outside(tmp_path):
    """A world-writable directory beside the store: an unpacker that got out
    of its layer could write here, even as the store's ids."""
    path = tmp_path / "outside"
    path.mkdir()
    os.chmod(path, 0o777)
    (path / "secret").write_text("host data\n")
    yield path


def tree(path):
    """Every entry under path with its type, mode, size and content hash."""
    out = {}
    for dirpath, dirs, files in os.walk(path):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, path)] = (st.st_mode, st.st_size, st.st_uid, st.st_mtime_ns)
    return out


def layers_of(store):
    d = store / "layers"
    return sorted(os.listdir(d)) if d.exists() else []


def assert_store_safe(store):
    """No device but the overlayfs whiteout, no set-uid or set-gid file."""
    for dirpath, dirs, files in os.walk(store):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISCHR(st.st_mode):
                assert st.st_rdev == 0, f"device node {p}"
            assert not stat.S_ISBLK(st.st_mode), f"block device {p}"
            assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), f"set-id file {p}"


def import_(hutch, src, name="img", *args, env=None):
    return hutch("image", "import", str(src), name, *args, env=env)


def base_layer():
    return o.tar([o.d("etc"), o.f("etc/os-release", "ID=test\n"), o.d("usr"), o.d("usr/bin"),
                  o.sym("bin", "usr/bin"), o.f("usr/bin/sh", "#!fake\n", mode=0o755),
                  o.f("usr/bin/su", "x", mode=0o4755), o.f("usr/bin/wall", "x", mode=0o2755),
                  o.f("home-owned", "x", uid=1000, gid=1000),
                  o.hard("usr/bin/sh2", "usr/bin/sh")])


def test_import_layout_then_cache_hit(hutch, store, tmp_path):
    lay = o.layout(str(tmp_path / "lay"), [base_layer(), o.tar([o.f("etc/motd", "hi")])],
                   env=["PATH=/opt/bin:/usr/bin", "LANG=C.UTF-8"])
    r = import_(hutch, lay, "test/one:1")
    assert r.returncode == 0, r.stderr
    assert b"2 layers (0 cached)" in r.stdout
    assert len(layers_of(store)) == 2
    # The same image again, under another name: nothing is unpacked twice.
    r = import_(hutch, lay, "test/two")
    assert r.returncode == 0, r.stderr
    assert b"2 layers (2 cached)" in r.stdout
    info = json.loads(hutch("image", "inspect", "test/one:1").stdout)
    assert info["env"] == ["PATH=/opt/bin:/usr/bin", "LANG=C.UTF-8"]
    assert info["platform"] == "linux/amd64" and len(info["layers"]) == 2
    names = {i["name"] for i in json.loads(hutch("image", "ls", "--json").stdout)}
    assert names == {"test/one:1", "test/two"}
    assert_store_safe(store)


def test_xz_layer(hutch, store, tmp_path):
    """A layer compressed with xz (CRC64 checked): liblzma's constructor,
    which picks its CRC64 code, is not run at hutch's start but before the
    first layer reader (base/libinit.c); the files arrive."""
    lay = o.layout(str(tmp_path / "lay"), [o.tar([o.d("etc"), o.f("etc/motd", b"xz" * 5000)])],
                   compress="xz")
    r = import_(hutch, lay, "xz")
    assert r.returncode == 0, r.stderr
    (layer,) = layers_of(store)
    assert (store / "layers" / layer / "etc/motd").read_bytes() == b"xz" * 5000
    assert_store_safe(store)


def test_unpacked_as_the_store_ids(hutch, store, tmp_path):
    """The unpacker is a user namespace whose root is the store's first id:
    tar owners are shifted into the store's range, never host ids."""
    r = import_(hutch, o.layout(str(tmp_path / "lay"), [base_layer()]))
    assert r.returncode == 0, r.stderr
    (layer,) = layers_of(store)
    root = store / "layers" / layer
    assert os.lstat(root / "usr/bin/sh").st_uid == STORE_IDS
    assert os.lstat(root / "home-owned").st_uid == STORE_IDS + 1000
    assert os.lstat(root / "bin").st_uid == STORE_IDS
    # set-uid and set-gid bits are dropped, the rest of the mode kept.
    assert stat.S_IMODE(os.lstat(root / "usr/bin/su").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(root / "usr/bin/wall").st_mode) == 0o755
    assert os.lstat(root / "usr/bin/sh2").st_ino == os.lstat(root / "usr/bin/sh").st_ino
    assert os.lstat(root / "usr/bin/sh").st_mtime == 1700000000


def test_docker_archive(hutch, store, tmp_path):
    arch = o.docker_archive(str(tmp_path / "img.tar"), [base_layer(), o.tar([o.f("etc/x", "1")])])
    r = import_(hutch, arch, "docker-img")
    assert r.returncode == 0, r.stderr
    assert b"2 layers (0 cached)" in r.stdout
    info = json.loads(hutch("image", "inspect", "docker-img").stdout)
    assert info["manifest"] is None and len(info["layers"]) == 2
    assert os.listdir(store / "tmp") == []


def test_whiteouts_and_opaque_across_three_layers(hutch, store, tmp_path):
    l1 = o.tar([o.d("a"), o.f("a/keep", "1"), o.f("a/gone", "1"), o.d("b"), o.f("b/old", "1"),
                o.d("c"), o.f("c/x", "1"), o.f("top", "1")])
    l2 = o.tar([o.f("a/.wh.gone", b""), o.d("b"), o.f("b/.wh..wh..opq", b""), o.f("b/new", "2"),
                o.f(".wh.c", b""), o.f("c2", "2")])
    l3 = o.tar([o.d("c"), o.f("c/back", "3"), o.f(".wh.top", b""), o.f("b/newer", "3")])
    r = import_(hutch, o.layout(str(tmp_path / "lay"), [l1, l2, l3]), "three")
    assert r.returncode == 0, r.stderr
    info = json.loads(hutch("image", "inspect", "three").stdout)
    lower = ":".join(str(store / "layers" / d[7:]) for d in reversed(info["layers"]))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    # The view a sandbox gets: overlayfs with the store's user.overlay xattrs.
    out = subprocess.run(["unshare", "-m", "sh", "-c",
                          f"mount -t overlay -o ro,userxattr,lowerdir={lower} none {mnt} && "
                          f"cd {mnt} && find . | sort"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [".", "./a", "./a/keep", "./b", "./b/new", "./b/newer", "./c",
                                  "./c/back", "./c2"]


def test_multiarch_index_picks_this_platform(hutch, store, tmp_path):
    lay = o.multiarch_layout(str(tmp_path / "lay"), {
        "arm64": [o.tar([o.f("arch", "arm64")])],
        "amd64": [o.tar([o.f("arch", "amd64")])],
    })
    r = import_(hutch, lay, "multi")
    assert r.returncode == 0, r.stderr
    (layer,) = layers_of(store)
    assert (store / "layers" / layer / "arch").read_text() == "amd64"
    info = json.loads(hutch("image", "inspect", "multi").stdout)
    assert info["platform"] == "linux/amd64"
    only_arm = o.multiarch_layout(str(tmp_path / "arm"), {"arm64": [o.tar([o.f("a")])]})
    r = import_(hutch, only_arm, "arm")
    assert r.returncode != 0
    assert b"no manifest for linux/amd64" in r.stderr


def test_wrong_digest_refused(hutch, store, tmp_path):
    lay = o.layout(str(tmp_path / "lay"), [base_layer(), o.tar([o.f("x")])], corrupt=1)
    r = import_(hutch, lay, "bad")
    assert r.returncode != 0
    assert b"has digest sha256:" in r.stderr and b"not sha256:" in r.stderr
    # The good first layer may stay (it was verified); the bad one never lands.
    assert len(layers_of(store)) == 1
    assert os.listdir(store / "tmp") == []
    assert hutch("image", "inspect", "bad").returncode == 65


@pytest.mark.parametrize("kind", ["image", "volume", "snapshot"])
def test_store_not_made_is_read_not_made(hutch, store, kind):
    """Listing, inspecting, removing and pruning read a store: on one not
    made yet they answer as on an empty one (a name not found: 65, saying
    so) and make nothing (root's default is /var/lib/hutch)."""
    assert not store.exists()
    r = hutch(kind, "ls")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().startswith("NAME")
    assert len(r.stdout.decode().splitlines()) == 1
    r = hutch(kind, "ls", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == []
    for verb in ("inspect", "rm"):
        r = hutch(kind, verb, "nosuch")
        assert r.returncode == 65, (verb, r.stderr.decode())
        err = r.stderr.decode()
        assert f"no {kind} 'nosuch'" in err and str(store) in err and "not made yet" in err
    if kind == "image":
        r = hutch("image", "prune")
        assert r.returncode == 0 and b"removed 0" in r.stdout, r.stderr.decode()
    if kind != "volume":  # a create that names what is not there makes no store either
        r = hutch("create", f"--{kind}" if kind == "snapshot" else "--image", "nosuch")
        assert r.returncode == 65, r.stderr.decode()
        assert f"--{kind} nosuch: no such {kind} in the store '{store}'" in r.stderr.decode()
        assert hutch.ids() == []
    assert not store.exists()


@pytest.mark.parametrize("how", ["create", "import"])
def test_a_failed_first_import_makes_no_store(hutch, store, tmp_path, how):
    """A file that is no image (text), imported into a store not made yet
    (create --image FILE, image import): 64, and no store left behind (an
    empty skeleton was); into a store that is there, the store stays, its
    contents untouched."""
    text = tmp_path / "notes.txt"
    text.write_text("not an image\n")
    args = (("create", "--image", str(text)) if how == "create" else
            ("image", "import", str(text), "x"))
    r = hutch(*args)
    assert r.returncode == 64, r.stderr.decode()
    assert "layer is not a tar" in r.stderr.decode()
    assert not store.exists() and hutch.ids() == []
    assert hutch("volume", "create", "kept").returncode == 0  # the store made
    r = hutch(*args)
    assert r.returncode == 64 and "layer is not a tar" in r.stderr.decode()
    assert {"images", "layers", "lock", "volumes"} <= set(os.listdir(store))
    assert json.loads(hutch("volume", "ls", "--json").stdout)[0]["name"] == "kept"
    assert json.loads(hutch("image", "ls", "--json").stdout) == []


@pytest.mark.parametrize("args,code,words", [
    (["image", "build-default"], 69,
     ["build-default needs mmdebstrap (Debian: apt-get install mmdebstrap)"]),
    (["create", "--image", "hutch-default"], 69,
     ["--image hutch-default: build-default needs mmdebstrap (Debian: apt-get install "
      "mmdebstrap)"]),
    (["image", "build-default", "--recipe", "RECIPE"], 64,
     ["recipe 'RECIPE': line 2: unknown 'bogus' (a recipe line is base, packages, run or env)"]),
    (["image", "build-default", "bad name!"], 64, ["invalid image name 'bad name!'"]),
])
def test_build_default_without_mmdebstrap(hutch, store, tmp_path, args, code, words):
    """build-default (and create's build of the default image) on a host
    without mmdebstrap: not capable, 69, naming the package; a bad recipe or
    name is said first, 64; no store is left either way."""
    recipe = tmp_path / "recipe"
    recipe.write_text("base bookworm\nbogus line\n")
    r = hutch(*[a.replace("RECIPE", str(recipe)) for a in args], env={"PATH": "/nonexistent"})
    err = r.stderr.decode()
    assert r.returncode == code, err
    assert all(w.replace("RECIPE", str(recipe)) in err for w in words), err
    assert not store.exists() and hutch.ids() == []


def test_rm_and_prune(hutch, store, tmp_path):
    assert import_(hutch, o.layout(str(tmp_path / "a"), [base_layer()]), "a").returncode == 0
    assert import_(hutch, o.layout(str(tmp_path / "b"), [base_layer(), o.tar([o.f("y")])]),
                   "b").returncode == 0
    assert len(layers_of(store)) == 2
    assert hutch("image", "rm", "b").returncode == 0
    r = hutch("image", "prune")
    assert r.returncode == 0 and b"removed 1 unused layers" in r.stdout
    assert len(layers_of(store)) == 1
    assert hutch("image", "rm", "b").returncode == 65
    assert hutch("image", "rm", "a").returncode == 0
    assert hutch("image", "prune").returncode == 0
    assert layers_of(store) == [] and os.listdir(store / "blobs/sha256") == []


def crafted(outside):
    """Each hostile layer: its entries, and the message its refusal names
    (None: the layer imports, with the hostile part dropped)."""
    out = str(outside)
    return {
        "dotdot": ([o.f("../../outside/pwned")], b"leaves the layer"),
        "dotdot_inner": ([o.d("a"), o.f("a/../../pwned")], b"leaves the layer"),
        "absolute": ([o.f(out + "/pwned")], b"leaves the layer"),
        "symlink_then_file": ([o.sym("evil", out), o.f("evil/pwned")], b"through a symlink"),
        "relative_symlink_then_file": ([o.d("d"), o.sym("d/up", "../../../../../../.."),
                                        o.f("d/up/" + out.lstrip("/") + "/pwned")],
                                       b"through a symlink"),
        "dir_replaced_by_symlink": ([o.d("x"), o.sym("x", out), o.f("x/pwned")],
                                    b"through a symlink"),
        "symlink_then_dir": ([o.sym("evil", out), o.d("evil/sub")], b"through a symlink"),
        "hardlink_absolute": ([o.hard("h", out + "/secret")], b"not a file of this layer"),
        "hardlink_dotdot": ([o.hard("h", "../../outside/secret")], b"not a file of this layer"),
        "hardlink_through_symlink": ([o.sym("s", out), o.hard("h", "s/secret")],
                                     b"through a symlink"),
        "hardlink_missing": ([o.hard("h", "etc/shadow")], b"not a file of this layer"),
        "whiteout_dotdot": ([o.d("a"), o.f("a/.wh...", b"")], b"whiteout of no name"),
        "whiteout_dot": ([o.f(".wh..", b"")], b"whiteout of no name"),
        "devices": ([o.entry("null", type=tarfile.CHRTYPE, devmajor=1, devminor=3),
                     o.entry("sda", type=tarfile.BLKTYPE, devmajor=8, devminor=0),
                     o.f("ok", "1")], None),
        "setid": ([o.f("su", "x", mode=0o6755), o.d("sgid", mode=0o2775)], None),
    }


@pytest.mark.parametrize("case", sorted(crafted("/x")))
def test_crafted_layer(hutch, store, outside, tmp_path, case):
    entries, refusal = crafted(outside)[case]
    before = tree(outside)
    lay = o.layout(str(tmp_path / "lay"), [o.tar(entries)])
    r = import_(hutch, lay, "crafted")
    if refusal:
        assert r.returncode != 0, f"{case} imported"
        assert refusal in r.stderr, r.stderr
        # the first import refused: the store it made taken back, tmp/ too
        assert not store.exists()
    else:
        assert r.returncode == 0, r.stderr
        assert os.listdir(store / "tmp") == []
    assert tree(outside) == before
    assert (outside / "secret").read_text() == "host data\n"
    assert not (tmp_path / "pwned").exists() and not os.path.exists("/pwned")
    assert_store_safe(store)


def test_compression_bomb_bounded(hutch, store, tmp_path):
    # 64 MiB of zeros is 64 KiB of gzip; the bound is 8 MiB uncompressed,
    # reached by the sum of files each under it.
    bomb = o.tar([o.entry(f"zeros{i}", data=b"\0" * (4 << 20)) for i in range(16)])
    r = import_(hutch, o.layout(str(tmp_path / "lay"), [bomb]), "bomb",
                env={"HUTCH_IMAGE_MAX_LAYER_BYTES": str(8 << 20)})
    assert r.returncode != 0 and b"larger than" in r.stderr, r.stderr
    assert not store.exists()  # the store this first import made, taken back


def test_sparse_bomb_bounded(hutch, store, tmp_path):
    # GNU tar's sparse format: 64 GiB of holes in a few KiB of tar.
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "holes", "wb") as fh:
        fh.truncate(64 << 30)
    layer = tmp_path / "sparse.tar"
    subprocess.run(["tar", "--sparse", "--format=pax", "-C", str(src), "-cf", str(layer), "holes"],
                   check=True)
    raw = layer.read_bytes()
    assert len(raw) < 1 << 20
    r = import_(hutch, o.layout(str(tmp_path / "lay"), [raw]), "sparse",
                env={"HUTCH_IMAGE_MAX_LAYER_BYTES": str(1 << 30)})
    assert r.returncode != 0 and b"larger than" in r.stderr, r.stderr
    assert not store.exists()  # the store this first import made, taken back


PLANT = r"""
import json, os, sys
store, layer = sys.argv[1], sys.argv[2]
out = {}
def attempt(what, fn):
    try:
        fn()
        out[what] = "ok"
    except OSError as e:
        out[what] = e.strerror
attempt("list store", lambda: os.listdir(store))
attempt("list layers", lambda: os.listdir(store + "/layers"))
attempt("stat var/tmp", lambda: os.stat(f"{store}/layers/{layer}/var/tmp"))
attempt("plant in var/tmp", lambda: open(f"{store}/layers/{layer}/var/tmp/planted", "x").close())
attempt("plant in tmp", lambda: os.mkfifo(f"{store}/layers/{layer}/tmp/fifo"))
print(json.dumps(out))
"""


def test_store_private_to_its_owner(tmp_path):
    """No other user can reach a layer of root's store: a layer's own 1777
    directories (tmp, var/tmp) would otherwise let anyone plant files seen
    in every sandbox of the image (an unprivileged user did, before). A
    store made before (0755) is closed when hutch opens it."""
    from conftest import Hutch
    base = tempfile.mkdtemp(prefix="hutch-store-priv-", dir="/var/tmp")
    try:
        os.chmod(base, 0o755)  # reachable up to the store itself
        store = os.path.join(base, "store")
        h = Hutch(tmp_path / "rt", store=store)
        layer = o.tar([o.d("etc"), o.f("etc/os-release", "ID=test\n"), o.d("tmp", mode=0o1777),
                       o.d("var"), o.d("var/tmp", mode=0o1777)])
        r = import_(h, o.layout(str(tmp_path / "lay"), [layer]), "priv")
        assert r.returncode == 0, r.stderr
        (lid,) = os.listdir(os.path.join(store, "layers"))
        assert stat.S_IMODE(os.stat(os.path.join(store, "layers", lid, "var/tmp")).st_mode) == 0o1777

        def as_nobody():
            r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                "/usr/bin/python3", "-c", PLANT, store, lid],
                               capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)
        got = as_nobody()
        assert set(got.values()) == {"Permission denied"}, got
        for d in ("", "layers", "images", "blobs", "tmp"):
            assert stat.S_IMODE(os.stat(os.path.join(store, d)).st_mode) & 0o077 == 0, d
        # a store of an older hutch, open to all: closed at its next use
        os.chmod(store, 0o755)
        os.chmod(os.path.join(store, "layers"), 0o755)
        assert as_nobody()["stat var/tmp"] == "ok"  # (what the old modes allowed)
        assert h("image", "ls").returncode == 0
        assert stat.S_IMODE(os.stat(store).st_mode) == 0o700
        assert set(as_nobody().values()) == {"Permission denied"}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_whole_image_bound(hutch, store, tmp_path):
    """HUTCH_IMAGE_MAX_BYTES bounds an image's layers together (three layers
    of 3 MiB, each under the bound, passed an 8 MiB one before); a layer
    already in the store counts nothing (it takes no more room)."""
    layers = [o.tar([o.f(f"f{i}", os.urandom(3 << 20))]) for i in range(3)]
    lay = o.layout(str(tmp_path / "lay"), layers)
    bound = {"HUTCH_IMAGE_MAX_BYTES": str(8 << 20)}
    r = import_(hutch, lay, "big", env=bound)
    assert r.returncode == 70, r.stderr
    assert b"image is larger than 8388608 bytes (HUTCH_IMAGE_MAX_BYTES) at layer 3 of 3" \
        in r.stderr, r.stderr
    assert json.loads(hutch("image", "ls", "--json").stdout) == []
    assert os.listdir(store / "tmp") == []
    # one layer alone over it: the layer's own bound is the image's
    one = o.layout(str(tmp_path / "one"), [o.tar([o.f("f", os.urandom(9 << 20))])])
    r = import_(hutch, one, "one", env=bound)
    assert r.returncode == 70 and b"layer is larger than 8388608 bytes" in r.stderr, r.stderr
    # within the bound
    r = import_(hutch, o.layout(str(tmp_path / "two"), layers[:2]), "two", env=bound)
    assert r.returncode == 0, r.stderr
    assert hutch("image", "prune").returncode == 0
    assert len(layers_of(store)) == 2


def test_empty_image_refused_naming_the_fix(hutch):
    """--image '' (an unset shell variable) is not the default: refused,
    naming 'host' and leaving the option out."""
    for argv in (["create", "--image", ""], ["run", "--image", "", "--", "true"],
                 ["pool", "key", "--image", ""]):
        r = hutch(*argv)
        err = r.stderr.decode()
        assert r.returncode == 64, (argv, err)
        assert "empty --image is not the default: give 'host'" in err, err
        assert "leave the option out for the default" in err, err
    assert hutch.ids() == []


def test_bad_names_and_sources(hutch, store, tmp_path):
    lay = o.layout(str(tmp_path / "lay"), [base_layer()])
    for name in ("../x", ".hidden", "a b", "x" * 201, "a..b"):
        r = import_(hutch, lay, name)
        assert r.returncode == 64, (name, r.stderr)
    r = import_(hutch, tmp_path / "missing", "m")
    assert r.returncode != 0 and b"open image" in r.stderr
    notjson = tmp_path / "nj"
    os.makedirs(notjson / "blobs")
    (notjson / "oci-layout").write_text("{}")
    (notjson / "index.json").write_text("{not json")
    r = import_(hutch, notjson, "nj")
    assert r.returncode != 0 and b"not JSON" in r.stderr


def test_image_usage(hutch, store):
    r = hutch("image", "bogus")
    assert r.returncode == 64 and b"unknown image command 'bogus'" in r.stderr
    assert hutch("image", "--help").returncode == 0
    assert hutch("image", "inspect", "nothing").returncode == 65


@pytest.mark.parametrize("args,words", [
    (["image", "import"], ["image import needs SRC", "hutch image --help"]),
    (["image", "pull"], ["image pull needs REF", "hutch image --help"]),
    (["image", "pull", "Bad Ref!"], ["invalid image reference 'Bad Ref!'",
                                     "such as docker.io/library/debian:12"]),
    (["image", "inspect"], ["image inspect needs one NAME; see 'hutch image ls'"]),
    (["image", "rm"], ["image rm needs a NAME; see 'hutch image ls'"]),
    (["create", "--image", "DIR/a b"], ["its path cannot name an image of the store",
                                        "'hutch image import DIR/a b NAME', then --image NAME"]),
])
def test_image_usage_errors(hutch, store, tmp_path, args, words):
    """Each refusal before the store is touched: 64, the fix named, no
    store made, no sandbox."""
    (tmp_path / "a b").mkdir()
    r = hutch(*[a.replace("DIR", str(tmp_path)) for a in args])
    err = r.stderr.decode()
    assert r.returncode == 64 and r.stdout == b"", (r.returncode, err)
    assert all(w.replace("DIR", str(tmp_path)) in err for w in words), err
    assert not store.exists() and hutch.ids() == []


def test_no_image_store_without_a_home():
    """An ordinary user whose XDG_DATA_HOME and HOME are not absolute
    paths has no store: 69, naming the variables to set."""
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        HUTCH, "image", "ls"],
                       capture_output=True, timeout=30, stdin=subprocess.DEVNULL,
                       env={"PATH": "/usr/bin:/bin", "HOME": "relative",
                            "HUTCH_RUNTIME_DIR": "/nonexistent/rt"})
    err = r.stderr.decode()
    assert r.returncode == 69 and r.stdout == b"", (r.returncode, err)
    assert "no image store" in err and "set one, or HUTCH_IMAGE_STORE" in err, err
