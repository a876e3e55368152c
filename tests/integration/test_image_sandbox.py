# SPDX-License-Identifier: Apache-2.0
"""--image (issue 14): sandboxes whose root is an overlay of an image's
layers, from images this test builds from a small root of the host's own
files (rootimage.py) and imports, or pushes to a registry on loopback and
pulls. Whiteouts and opaque directories across three layers, the image's
Env and PATH, an image without python3 or /bin/sh refused, limits, TTL, a
network mode and files on an image, escapes from inside that must leave
the store unchanged, prune and the pool key."""
import hashlib
import json
import os
import re
import signal
import stat
import subprocess

import pytest

import ociimage as o
import rootimage
from conftest import HUTCH, cgroup_dirs_named, wait_until
from netfake import RESOLVER, WEB
from test_image_pull import REGISTRY, SKOPEO, free_port, push, registry  # noqa: F401


def top_layer():
    """What the tests' images add on the root: a tool on the image's own
    PATH, a file appuser owns, a message."""
    return o.tar([o.d("etc"), o.f("etc/motd", "hello from the image\n"), o.d("opt"),
                  o.d("opt/bin"), o.f("opt/bin/imgtool", "#!/bin/sh\necho imgtool $IMGVAR\n",
                                      mode=0o755),
                  o.f("opt/owned", "image data\n", uid=1000, gid=1000)])


ENV = ["PATH=/opt/bin:/usr/local/bin:/usr/bin:/bin", "IMGVAR=from-image", "LANG=C",
       "HOME=/nothome"]


def hutch_env(store):
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HUTCH_IMAGE_STORE": str(store)}


def import_image(store, layout, name):
    r = subprocess.run([HUTCH, "image", "import", str(layout), name], env=hutch_env(store),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def root_layer(tmp_path_factory):
    return rootimage.layer(tmp_path_factory)


@pytest.fixture(scope="module")
def images(tmp_path_factory, root_layer):
    """One store for the module: 'test' (root + top layer), 'nopy' (python3
    whited out), 'nosh' (/bin/sh whited out), 'three' (whiteouts and
    opaque directories over two more layers)."""
    d = tmp_path_factory.mktemp("images")
    store = d / "store"
    import_image(store, o.layout(str(d / "test"), [root_layer, top_layer()], env=ENV), "test")
    py = os.path.basename(os.path.realpath("/usr/bin/python3"))
    nopy = o.tar([o.d("usr"), o.d("usr/bin"), o.f("usr/bin/.wh.python3", ""),
                  o.f(f"usr/bin/.wh.{py}", "")])
    import_image(store, o.layout(str(d / "nopy"), [root_layer, nopy]), "nopy")
    nosh = o.tar([o.d("usr"), o.d("usr/bin"), o.f("usr/bin/.wh.sh", "")])
    import_image(store, o.layout(str(d / "nosh"), [root_layer, nosh]), "nosh")
    l2, l3 = o.whiteout_layers()
    import_image(store, o.layout(str(d / "three"), [root_layer, l2, l3]), "three")
    return store


@pytest.fixture
def h(hutch, images):
    hutch.env["HUTCH_IMAGE_STORE"] = str(images)
    return hutch


def layers_hash(store):
    """Every entry of every layer: path, type, mode, owner, size, content."""
    out = hashlib.sha256()
    root = os.path.join(store, "layers")
    for dirpath, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for n in sorted(dirs + files):
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out.update(f"{os.path.relpath(p, root)} {st.st_mode} {st.st_uid} {st.st_gid} "
                       f"{st.st_size} {st.st_mtime_ns}\n".encode())
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as fh:
                    out.update(hashlib.sha256(fh.read()).digest())
            elif stat.S_ISLNK(st.st_mode):
                out.update(os.readlink(p).encode())
    return out.hexdigest()


def users(store):
    d = os.path.join(store, "users")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_create_exec_rm_from_pulled_image(hutch, registry, tmp_path, root_layer):  # noqa: F811
    store = tmp_path / "store"
    hutch.env["HUTCH_IMAGE_STORE"] = str(store)
    lay = o.layout(str(tmp_path / "lay"), [root_layer, top_layer()], env=ENV)
    push(lay, "latest", f"{registry}/test/root:1")
    r = hutch("image", "pull", f"{registry}/test/root:1", "pulled", timeout=120)
    assert r.returncode == 0, r.stderr
    # a line per layer as it is stored, after skopeo's own
    assert b"layer 1/2 sha256:" in r.stderr and b"layer 2/2 sha256:" in r.stderr, r.stderr
    sb = hutch.create("--image", "pulled")
    assert sb.info["config"]["image"] == "pulled"
    assert users(store) == [sb.id]
    r = hutch("exec", sb.id, "--", "sh", "-c",
              "id -u; id -un; pwd; cat /etc/motd /etc/os-release; python3 -c 'print(6*7)'")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split("\n")[:6] == [
        "1000", "appuser", "/workspace", "hello from the image", "ID=hutch-test", "42"]
    # Image root is sandbox root; what uid 1000 owned in the image is appuser's.
    out = sb.sh("stat -c '%U %u' /usr/bin/dash /opt/owned")
    assert out.split("\n")[:2] == ["root 0", "appuser 1000"]
    # The image's passwd keeps its entries; uid 1000 is appuser.
    passwd = sb.sh("cat /etc/passwd")
    assert "daemon:x:1:1:" in passwd and "node:" not in passwd
    assert "appuser:x:1000:1000:appuser:/home/appuser:/bin/bash" in passwd
    # Nothing of the host: no host mount, "/.." is "/", no host /etc.
    mounts = sb.sh("cat /proc/self/mountinfo")
    assert [ln for ln in mounts.splitlines() if ln.split()[4] == "/"][0].count(" - overlay "), mounts
    # the only ext4 is the sandbox's own disk (a loop device, runtime/disk.h):
    # its workspace/, home/ and tmp/, never the host's
    ext4 = [ln.split() for ln in mounts.splitlines() if " - ext4 " in ln]
    assert sorted(f[3] for f in ext4) == ["/home", "/tmp", "/workspace"], mounts
    assert all(f[f.index("-") + 2].startswith("/dev/loop") for f in ext4), mounts
    assert sb.sh("stat -c %i /..") == sb.sh("stat -c %i /")
    assert "ld.so.cache" not in sb.sh("ls /etc")
    assert hutch("rm", sb.id).returncode == 0
    # Dropped in the teardown after the answer.
    assert wait_until(lambda: users(store) == [], timeout=10)


def test_image_given_as_a_file_or_a_whole_reference(hutch, registry, tmp_path,  # noqa: F811
                                                    root_layer):
    """--image PATH imports an OCI layout or a docker-save archive once (as
    local + its real path), --image REGISTRY/NAME:TAG pulls once; later
    creates use the store's copy; a missing file is refused, nothing made."""
    store = tmp_path / "store"
    hutch.env["HUTCH_IMAGE_STORE"] = str(store)
    lay = o.layout(str(tmp_path / "lay"), [root_layer, top_layer()], env=ENV)
    arch = o.docker_archive(str(tmp_path / "img.tar"), [root_layer, top_layer()], env=ENV)
    push(lay, "latest", f"{registry}/test/byref:1")
    for image, name in [(lay, f"local{lay}"), (f"oci:{lay}", f"local{lay}"),
                        (f"docker-archive:{arch}", f"local{arch}"),
                        (f"{registry}/test/byref:1", f"{registry}/test/byref:1")]:
        fetched = not os.path.exists(os.path.join(store, "images", name.replace("/", "%")))
        r = hutch("create", "--json", "--image", image, timeout=120)
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert info["config"]["image"] == name
        assert (b"importing" in r.stderr or b"pulling" in r.stderr) == fetched, r.stderr
        out = hutch("exec", info["id"], "--", "sh", "-c", "cat /etc/motd; echo $IMGVAR")
        assert out.stdout == b"hello from the image\nfrom-image\n", out.stderr
        assert hutch("rm", info["id"]).returncode == 0
    ls = json.loads(hutch("image", "ls", "--json").stdout)
    assert sorted(i["name"] for i in ls) == sorted(
        {f"local{lay}", f"local{arch}", f"{registry}/test/byref:1"})
    # Relative to the caller's directory, as any path.
    r = subprocess.run([HUTCH, "run", "--image", "./lay", "--", "cat", "/etc/motd"],
                       cwd=tmp_path, env={**hutch.env}, capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout == b"hello from the image\n", r.stderr
    r = hutch("create", "--image", str(tmp_path / "nothere"))
    assert r.returncode == 65 and b"No such file or directory" in r.stderr, r.stderr
    r = hutch("create", "--image", f"oci:{tmp_path}/bad dir")
    assert r.returncode == 65, r.stderr
    os.mkdir(tmp_path / "bad dir")
    r = hutch("create", "--image", f"oci:{tmp_path}/bad dir")
    assert r.returncode == 64 and b"hutch image import" in r.stderr, r.stderr
    # A directory that is not an OCI layout: the import's own error, nothing kept.
    os.mkdir(tmp_path / "notlayout")
    r = hutch("create", "--image", str(tmp_path / "notlayout"))
    assert r.returncode == 64, r.stderr  # not "not capable" (69): it was once
    assert f"--image {tmp_path}/notlayout: open 'index.json'".encode() in r.stderr, r.stderr
    assert f"local{tmp_path}/notlayout" not in hutch("image", "ls").stdout.decode()
    assert hutch.ids() == []


def test_whiteouts_and_opaque_dirs_of_three_layers(h):
    sb = h.create("--image", "three")
    assert sb.sh("ls /data").split() == ["a", "c", "sub"]
    assert sb.sh("cat /data/a /data/c") == "a2c3"
    assert sb.sh("ls /data/sub").split() == ["y"]
    assert sb.run("test -e /gone")["exit_code"] == 1
    assert sb.sh("cat /keep") == "k"
    sb.rm()


def kernel_at_least(major, minor):
    ma, mi = (int(x) for x in os.uname().release.split(".")[:2])
    return (ma, mi) >= (major, minor)


def test_image_of_many_layers(h, images, tmp_path, root_layer):
    """89 layers: one more than overlayfs takes before Linux 6.13, where
    the layers go by path in one string of at most 255 bytes: refused there
    with the limit named, before anything runs; stacked by fd on 6.13+
    (every layer's file seen, the top one's over the others')."""
    layers = [root_layer] + [o.tar([o.d("many"), o.f("many/top", f"{i}\n"),
                                    o.f(f"many/l{i}", "")]) for i in range(88)]
    import_image(images, o.layout(str(tmp_path / "many"), layers, env=ENV), "many")
    try:
        if kernel_at_least(6, 13):
            sb = h.create("--image", "many")
            assert sb.sh("cat /many/top") == "87\n"
            assert len(sb.sh("ls /many").split()) == 89
            sb.rm()
        else:
            r = h("create", "--image", "many")
            err = r.stderr.decode()
            assert r.returncode != 0 and "an image of 89 layers: overlayfs before Linux " \
                "6.13 takes layers only as one string of paths, at most 88 layers" in err, err
        assert h.ids() == [] and wait_until(lambda: users(images) == [], timeout=10)
    finally:
        assert h("image", "rm", "many").returncode == 0


def test_image_env_and_path(h):
    sb = h.create("--image", "test")
    env = dict(line.split("=", 1) for line in sb.sh("env").strip().split("\n"))
    assert env["PATH"] == "/opt/bin:/usr/local/bin:/usr/bin:/bin"
    assert env["IMGVAR"] == "from-image" and env["LANG"] == "C"
    # Commands are appuser's: HOME and USER are not the image's.
    assert env["HOME"] == "/home/appuser" and env["USER"] == "appuser"
    # Found along the image's PATH; a request's env goes over the image's.
    assert sb.sh("imgtool") == "imgtool from-image\n"
    assert sb.run("imgtool", env={"IMGVAR": "mine"})["stdout"] == "imgtool mine\n"
    r = h("exec", sb.id, "--", "imgtool")
    assert r.returncode == 0 and r.stdout == b"imgtool from-image\n", r.stderr
    # Background processes and file built-ins get the same environment.
    status, res = sb.api("POST", "/v1/start_process", {"cmd": "echo $IMGVAR > /workspace/bg"})
    assert status == 200, res
    wait_until(lambda: sb.run("cat /workspace/bg")["stdout"] == "from-image\n")
    sb.rm()


@pytest.mark.parametrize("name,missing", [("nopy", "python3"), ("nosh", "/bin/sh")])
def test_image_without_python3_or_shell_refused(h, images, name, missing):
    r = h("create", "--image", name)
    assert r.returncode == 64, r.stderr
    err = r.stderr.decode()
    assert f"image '{name}' has no {missing}" in err, err
    assert h.ids() == [] and users(images) == []


@pytest.mark.parametrize("name,missing", [("nopy", "python3"), ("nosh", "/bin/sh")])
def test_run_on_an_image_without_python3_or_shell_refused(h, images, name, missing):
    # A run's command is queued for init before it checks the root (issue
    # 31): init fails instead of READY, the command never runs, the run
    # gets the create's refusal, and nothing is left.
    r = h("run", "--image", name, "--", "sh", "-c", "echo ran")
    assert r.returncode == 64, r.stderr
    assert b"ran" not in r.stdout
    err = r.stderr.decode()
    assert f"image '{name}' has no {missing}" in err, err
    assert h.ids() == [] and users(images) == []


@pytest.mark.parametrize("name,fstype", [("proc", "proc"), ("dev", "tmpfs")])
def test_image_whose_mount_point_is_a_symlink_refused(hutch, tmp_path, root_layer, name,
                                                      fstype):
    # init attaches /proc and /dev by their names (rootfs/mount.c, issue 31):
    # move_mount() follows no symlink there and moves a directory onto
    # nothing but one, so an image's link to a directory fails the create
    # instead of mounting on the link's target. (A store of its own: the
    # module's counts its images.)
    store = tmp_path / "store"
    top = o.tar([o.d("tmp", mode=0o1777), o.d("mnt"), o.sym(name, "mnt")])
    import_image(store, o.layout(str(tmp_path / "lay"), [root_layer, top]), "link" + name)
    hutch.env["HUTCH_IMAGE_STORE"] = str(store)
    r = hutch("run", "--image", "link" + name, "--", "sh", "-c", "echo ran")
    assert r.returncode != 0, r.stdout
    assert b"ran" not in r.stdout
    err = r.stderr.decode()
    assert f"mount {fstype} on '/{name}'" in err, err
    assert hutch.ids() == [] and users(store) == []


def test_unknown_or_invalid_image_refused(h):
    r = h("create", "--image", "nothere")
    assert r.returncode == 65  # not found (docs/errors.md), as build's base
    assert b"no such image in the store" in r.stderr and b"hutch image pull nothere" in r.stderr
    r = h("create", "--image", "a..b")
    assert r.returncode == 64 and b"invalid --image 'a..b'" in r.stderr
    # A short name is never pulled by create (which registry is a guess).
    r = h("create", "--image", "python:3.12")
    assert r.returncode == 65 and b"never a short name" in r.stderr
    r = h("create", "--image", "test", env={"HUTCH_IMAGE_STORE": "relative/store"})
    assert r.returncode == 64 and b"HUTCH_IMAGE_STORE" in r.stderr


def test_image_host_is_the_host_root(h):
    sb = h.create("--image", "host")
    assert sb.info["config"]["image"] == "host"
    assert sb.sh("ls /usr/local") == ""  # hidden, as without --image
    assert "ld.so.cache" in sb.sh("ls /etc")
    sb.rm()


def test_limits_ttl_network_and_files_on_an_image(h, fakenet_here, tmp_path):
    h.env["HUTCH_RESOLVER"] = RESOLVER
    sb = h.create("--image", "test", "--instance-type", "nano", "--ttl", "30")
    # memory: nano's 256 MiB, no swap
    res = sb.run("python3 -c 'b = bytearray(400 << 20); b[::4096] = b\"x\" * len(b[::4096])'")
    assert res["exit_code"] != 0 and res.get("oom_killed") is True, res
    # pids: nano's limit holds
    assert sb.status()["config"]["limits"]["pids"] == 256
    # network none: nothing leaves, at once
    res = sb.run(f"python3 -c 'import socket; socket.create_connection((\"{WEB}\", 80), 3)'")
    assert res["exit_code"] != 0 and "Network is unreachable" in res["stderr"], res
    # files: the JSON endpoints, raw /files and a directory as tar
    status, res = sb.api("POST", "/v1/write_file", {"path": "/workspace/a.txt", "content": "hi\n"})
    assert status == 200, res
    assert sb.sh("cat /workspace/a.txt") == "hi\n"
    status, res = sb.api("POST", "/v1/read_file", {"path": "/etc/motd"})
    assert status == 200 and res["content"] == "hello from the image\n", res
    sb.sh("mkdir -p /workspace/d/e && echo deep > /workspace/d/e/f")
    out = h("cp", f"{sb.id}:/workspace/d", str(tmp_path / "copied"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "copied" / "e" / "f").read_text() == "deep\n"
    sb.rm()
    # network all on an image: the fake internet's web server answers
    sb = h.create("--image", "test", "--network", "all")
    code = ("import socket; s = socket.create_connection(('" + WEB + "', 80), 5); "
            "s.sendall(b'GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n'); print(s.recv(12).decode())")
    assert sb.sh(f'python3 -c "{code}"').startswith("HTTP/1.")
    sb.rm()
    # TTL: the sandbox is deleted at its end, its use of the image with it
    sb = h.create("--image", "test", "--ttl", "2")
    assert sb.id in users(h.env["HUTCH_IMAGE_STORE"])
    assert wait_until(lambda: not os.path.exists(os.path.dirname(sb.sock)), timeout=10)
    r = h("exec", sb.id, "--", "true")
    assert r.returncode == 66 and b"expired" in r.stderr, r.stderr
    assert wait_until(lambda: users(h.env["HUTCH_IMAGE_STORE"]) == [], timeout=10)


@pytest.mark.parametrize("verb", ["gc", "rm"])
def test_use_record_of_a_killed_supervisor_is_removed(h, images, verb):
    """kill -9 of a supervisor leaves its use record users/<id> (it removes
    it itself at a normal end): gc, and rm of the dead sandbox, remove it
    (42 of 300 fault rounds left one behind, before)."""
    import signal
    from conftest import proc_comm
    sb = h.create("--image", "test")
    other = h.create("--image", "test")
    assert sorted([sb.id, other.id]) == users(images)
    sup = sb.status()["supervisor_pid"]
    os.kill(sup, signal.SIGKILL)
    assert wait_until(lambda: proc_comm(sup) is None, 10)
    r = h(verb) if verb == "gc" else h("rm", sb.id)
    assert r.returncode == 0, r.stderr
    assert users(images) == [other.id]  # the live sandbox's stays
    other.rm()  # (its supervisor removes its own after answering)
    assert wait_until(lambda: users(images) == [], 10), users(images)


def test_escape_attempts_leave_the_store_unchanged(h, images):
    before = layers_hash(images)
    sb = h.create("--image", "test")
    other = h.create("--image", "test")
    # appuser owns /opt/owned in the image: writing it copies it up into
    # this sandbox's own layer only.
    sb.sh("echo changed > /opt/owned")
    assert sb.sh("cat /opt/owned") == "changed\n"
    assert other.sh("cat /opt/owned") == "image data\n"
    attempts = [
        "echo x > /usr/bin/dash",                      # root's file of the image
        "echo x > /opt/new",                           # root's directory
        "echo x > /proc/self/root/usr/bin/dash",       # the same through /proc
        "ls /proc/1/root/",                            # init's root
        "mount -o remount,rw /",
        "mount -o remount,rw /proc/self/root",
        "umount /workspace",
        "umount -l /",
        "mount -t overlay x -o lowerdir=/usr,upperdir=/tmp/u,workdir=/tmp/w /tmp/m",
        "mount --bind /opt /tmp",
    ]
    for cmd in attempts:
        res = sb.run(cmd)
        assert res["exit_code"] != 0, (cmd, res)
    # The overlay's own paths name nothing in the sandbox.
    opts = sb.sh("grep ' / / ' /proc/self/mountinfo")
    # (upper and work on the sandbox's disk, ../disk/, or its tmpfs)
    assert "lowerdir+=/layers/" in opts or re.search(r"lowerdir=1:0,upperdir=\.\./(disk/)?upper,",
                                                     opts), opts
    assert str(images) not in opts
    assert sb.run("ls /layers /upper")["exit_code"] != 0
    sb.rm()
    other.rm()
    assert layers_hash(images) == before
    assert wait_until(lambda: users(images) == [], timeout=10)


def test_prune_keeps_the_layers_of_a_live_sandbox(hutch, tmp_path, root_layer):
    store = tmp_path / "store"
    hutch.env["HUTCH_IMAGE_STORE"] = str(store)
    import_image(store, o.layout(str(tmp_path / "lay"), [root_layer, top_layer()], env=ENV),
                 "short")
    layers = sorted(os.listdir(store / "layers"))
    sb = hutch.create("--image", "short")
    assert hutch("image", "rm", "short").returncode == 0
    r = hutch("image", "prune")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(store / "layers")) == layers
    assert sb.sh("cat /etc/motd") == "hello from the image\n"
    sb.rm()
    # The use record goes in the teardown after rm's answer; until then a
    # prune keeps the layers (as it must while the mounts may be alive).
    assert wait_until(lambda: users(store) == [], timeout=10)
    r = hutch("image", "prune")
    assert r.returncode == 0, r.stderr
    assert os.listdir(store / "layers") == []


def test_pool_key_names_the_image(h, images, tmp_path, root_layer):
    def key(*opts):
        r = h("pool", "key", "--json", *opts)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["key"]
    host, img = key(), key("--image", "test")
    assert host != img and key("--image", "host") == host
    assert key("--image", "three") != img
    # The same name on other content is another pool.
    import_image(images, o.layout(str(tmp_path / "again"), [root_layer], env=ENV), "renamed")
    first = key("--image", "renamed")
    import_image(images, o.layout(str(tmp_path / "again2"), [root_layer, top_layer()], env=ENV),
                 "renamed")
    assert key("--image", "renamed") != first
    assert h("image", "rm", "renamed").returncode == 0


def test_doctor_checks_overlayfs_the_store_and_skopeo(h, images, tmp_path):
    def checks(**env):
        r = h("doctor", "--json", env=env)
        assert r.returncode == 0, r.stderr  # none of the three is required
        return {c["check"]: c for c in json.loads(r.stdout)}
    c = checks()
    assert c["overlayfs"]["ok"] and "idmapped layers of " + str(images) in c["overlayfs"]["detail"]
    assert c["image store"]["ok"] and c["image store"]["detail"] == f"{images}: 4 images"
    assert c["skopeo"]["ok"] == bool(SKOPEO) and not c["skopeo"]["required"]
    c = checks(PATH="/nonexistent")
    assert not c["skopeo"]["ok"] and "apt-get install skopeo" in c["skopeo"]["detail"]
    c = checks(HUTCH_IMAGE_STORE=str(tmp_path / "not" / "yet"))
    assert c["image store"]["ok"] and "not made yet" in c["image store"]["detail"]
    (tmp_path / "file").write_text("not a store")
    c = checks(HUTCH_IMAGE_STORE=str(tmp_path / "file"))
    assert not c["image store"]["ok"] and not c["overlayfs"]["ok"]


def test_pools_of_host_root_and_of_an_image_serve_only_their_own(h, images):
    from test_pool import pooled_ids, pools, start
    try:
        start(h, size=1)
        host_ready = pooled_ids(h)
        r = h("create", "--json", "--image", "test")
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert info["id"] not in host_ready  # made cold, not the host-root one
        assert h("exec", info["id"], "--", "cat", "/etc/os-release").stdout == b"ID=hutch-test\n"
        start(h, "--image", "test", size=1)
        assert wait_until(lambda: len(pooled_ids(h)) == 2, timeout=30)
        image_ready = [i for i in pooled_ids(h) if i not in host_ready]
        r = h("create", "--json", "--image", "test")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["id"] in image_ready  # claimed from the image's pool
        r = h("create", "--json")
        assert r.returncode == 0, r.stderr
        taken = json.loads(r.stdout)["id"]
        assert taken in host_ready
        assert h("exec", taken, "--", "sh", "-c", "test -e /etc/ld.so.cache").returncode == 0
    finally:
        keepers = [p["keeper_pid"] for p in pools(h) if p["alive"]]
        h("pool", "stop", "--all")
        for pid in keepers:
            assert wait_until(lambda: not os.path.exists(f"/proc/{pid}"), timeout=30)


def test_run_create_and_inspect_say_which_root(h):
    # create and run say it where their progress goes (a terminal, or
    # --progress always); inspect, ls and create --json say it as "root".
    r = h("create", "--progress", "always", "--image", "test")
    assert r.returncode == 0, r.stderr
    assert b"hutch: root: image test\n" in r.stderr
    sid = r.stdout.decode().strip()
    info = json.loads(h("inspect", sid).stdout)
    assert (info["root"], info["image"]) == ("image", "test")
    assert [(s["root"], s["image"]) for s in json.loads(h("ls", "--json").stdout)] == [("image", "test")]
    h("rm", sid)
    r = h("run", "--progress", "always", "--image", "host", "--", "true")
    assert r.returncode == 0 and b"hutch: root: host-derived" in r.stderr
    assert b"hutch image build-default" in r.stderr
    created = json.loads(h("create", "--json", "--image", "host").stdout)
    assert (created["root"], created["image"]) == ("host", None)
    h("rm", created["id"])
    # Not a terminal, no --progress: stderr stays the command's own.
    r = h("run", "--image", "test", "--", "sh", "-c", "echo err >&2")
    assert r.returncode == 0 and r.stderr == b"err\n"
    # A refused image gets no root line, only the reason.
    r = h("create", "--progress", "always", "--image", "nothere")
    assert r.returncode == 65 and b"root:" not in r.stderr and b"no such image" in r.stderr


CREATING_KEYS = ["id", "status", "supervisor_pid", "init_pid", "created_at", "expires_at",
                 "socket", "config", "cgroup", "uid_base", "uid_slot", "ports", "image_use"]


def test_a_create_killed_while_creating_is_shown_then_undone_by_gc(h, images):
    """state.json's "creating" (issue 25: setup writes it from its plan and
    its own objects, before the sandbox holds them) says what gc undoes
    after a crash: ls shows the sandbox creating, with its cgroups, its -p
    forward and its image's use record; the supervisor killed -9 while
    on_create runs (state.json is not written again until ready) leaves a
    dead sandbox that gc removes whole: state dir, cgroups, use record."""
    port = free_port()
    p = h.popen("create", "--image", "test", "--instance-type", "nano",
                "-p", f"127.0.0.1:{port}:80", "--on-create", "sleep 60")
    st = None
    try:
        assert wait_until(lambda: len(h.ids()) == 1, 20), "no sandbox appeared"
        sid = h.ids()[0]
        path = os.path.join(h.rtdir, sid, "state.json")

        def creating():
            try:
                with open(path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
        assert wait_until(lambda: creating() is not None, 20), "no state.json"
        st = creating()
        assert list(st) == CREATING_KEYS, st
        assert st["id"] == sid and st["status"] == "creating" and st["init_pid"] == 0, st
        assert st["expires_at"] - st["created_at"] == 86400, st
        assert st["socket"] == os.path.join(h.rtdir, sid, "api.sock"), st
        assert st["config"]["image"] == "test" and st["config"]["on_create"] == "sleep 60"
        assert st["config"]["publish"] == [f"127.0.0.1:{port}:80"], st["config"]
        assert st["ports"] == [{"sandbox_port": 80, "host_address": "127.0.0.1",
                                "host_port": port, "host": f"127.0.0.1:{port}",
                                "source": "publish"}], st["ports"]
        dirs = st["cgroup"]["dirs"]
        # The record comes first, its cgroups after it (gc must know them
        # before they exist; on v1 both after init's clone3): all of them,
        # and no other, exist by on_create.
        assert dirs and wait_until(lambda: sorted(dirs) == sorted(cgroup_dirs_named(sid)), 20), \
            (dirs, cgroup_dirs_named(sid), st["cgroup"])
        assert os.path.exists(st["image_use"]) and users(images) == [sid], st["image_use"]
        # ls reads it: creating, live, its port
        ls = json.loads(h("ls", "--json").stdout)
        assert [(e["id"], e["status"], e["live"]) for e in ls] == [(sid, "creating", True)], ls
        assert f"127.0.0.1:{port}->80" in h("ls").stdout.decode()
        os.kill(st["supervisor_pid"], signal.SIGKILL)
        _, err = p.communicate(timeout=30)
        assert p.returncode != 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert wait_until(lambda: not os.path.exists(f"/proc/{st['supervisor_pid']}"), 10)
    r = h("gc")
    assert r.returncode == 0, r.stderr
    assert h.ids() == [] and cgroup_dirs_named(sid) == []
    assert not os.path.exists(st["image_use"]) and users(images) == []
