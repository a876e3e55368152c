"""Image rows: create/run from an image next to the peers, pulls from a loopback registry,
the disk of live sandboxes of one image."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from .common import HutchError, interleave, log, NullNs, PeerError, REPO
from .peers import Oci, Podman


def measure_image(args, res, hutch, crun, tmpdir):
    log("create-to-ready from an image")
    g = res.group("create-to-ready from an image (target: <= 1.2x the host root, cold and "
                  "warm)")
    sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
    import ociimage
    import rootimage
    store = os.path.join(tmpdir, "image-store")
    layer = os.path.join(tmpdir, "root.tar")
    rootimage.build(layer)
    with open(layer, "rb") as fh:
        raw = fh.read()
    env_list = ["PATH=/usr/bin:/bin"]
    lay = ociimage.layout(os.path.join(tmpdir, "layout"), [raw], env=env_list)
    env = dict(hutch.r.env, HUTCH_IMAGE_STORE=store)
    saved, hutch.r.env = hutch.r.env, env
    podman = crun_img = None
    try:
        hutch.r.timed([hutch.bin, "image", "import", lay, "bench"], HutchError)

        def cycle(*opts):
            dt, sid = hutch.create(*opts)
            hutch.rm(sid)
            return dt

        variants = [("hutch create (host root)", lambda: cycle()),
                    ("hutch create --image (cold)", lambda: cycle("--image", "bench")),
                    ("hutch run -- true (host root)", lambda: hutch.run(["true"])),
                    ("hutch run --image -- true",
                     lambda: hutch.r.timed([hutch.bin, "run", "--image", "bench", "--",
                                            "true"], HutchError)[0])]
        pairs = [("hutch create --image (cold)", "hutch create (host root)", "<= 1.2"),
                 ("hutch run --image -- true", "hutch run -- true (host root)", None)]
        # The same image's files for crun (unpacked here: crun runs a
        # directory) and for podman (a docker-save archive, podman load).
        if crun:
            rootfs = os.path.join(tmpdir, "image-rootfs")
            os.mkdir(rootfs)
            subprocess.run(["tar", "-xf", layer, "-C", rootfs], check=True)
            crun_img = Oci(crun.name, crun.r, tmpdir, crun.ns, rootfs=rootfs)
            try:
                crun_img.run(["true"])
                variants.append(("crun run (the image unpacked, true)",
                                 lambda: crun_img.run(["true"])))
                pairs.append(("hutch run --image -- true", "crun run (the image unpacked, true)",
                              None))
            except PeerError as e:
                res.notes.append("crun cannot run the image's rootfs here: %s" % e)
        if shutil.which("podman"):
            podman = Podman(hutch.r, tmpdir, *(("crun", crun.ns) if crun else ("runc", NullNs())))
            name = "podman run --rm (the image, %s)" % podman.runtime
            try:
                podman.load(ociimage.docker_archive(os.path.join(tmpdir, "image.tar"), [raw],
                                                    env=env_list))
                podman.run("test:latest", ["true"])
                variants.append((name, lambda: podman.run("test:latest", ["true"])))
                pairs.append(("hutch run --image -- true", name, None))
            except PeerError as e:
                res.notes.append("podman cannot run the image here: %s" % e)
        interleave(g, variants, args.iterations)

        # Warm: a pool of the image and one of the host root, each claim
        # after the keepers refilled.
        hutch.r.timed([hutch.bin, "pool", "start", "--size", "2", "--image", "bench"],
                      HutchError)
        hutch.r.timed([hutch.bin, "pool", "start", "--size", "2", "--image", "host"],
                      HutchError)
        try:
            def refilled():
                for _ in range(3000):
                    _, out = hutch.r.timed([hutch.bin, "pool", "ls", "--json"], HutchError,
                                           capture=True)
                    if all(p["ready"] >= p["size"] for p in json.loads(out)):
                        return
                    time.sleep(0.01)
                raise HutchError("the image's pool did not refill in 30 s")

            def warm(image):
                refilled()
                return cycle("--image", image)
            interleave(g, [("hutch create --image, warm pool", lambda: warm("bench")),
                           ("hutch create, warm pool (host root)", lambda: warm("host"))],
                       args.iterations)
        finally:
            subprocess.run([hutch.bin, "pool", "stop", "--all"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=hutch.r.env)
        pairs.append(("hutch create --image, warm pool", "hutch create, warm pool (host root)",
                      "<= 1.2"))
        g["pairs"] = pairs
        if not args.quick:
            measure_image_disk(res, hutch, store)
            measure_image_pull(args, res, hutch, tmpdir)
    finally:
        hutch.r.env = saved
        if podman:
            podman.cleanup()
        if crun_img:
            crun_img.cleanup()


def registry_on_loopback(tmpdir):
    """Debian's docker-registry on 127.0.0.1, storage under tmpdir: (proc, addr)."""
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    cfg = os.path.join(tmpdir, "registry.yml")
    with open(cfg, "w") as f:
        f.write("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                "    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%d\n"
                % (os.path.join(tmpdir, "registry"), port))
    proc = subprocess.Popen(["docker-registry", "serve", cfg], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, "127.0.0.1:%d" % port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise HutchError("docker-registry did not start")


# The pull benchmark's image: three layers of this host's files, ~560 MB.
PULL_LAYERS = (["usr/lib/gcc"], ["usr/share/locale"], ["usr/lib/python3", "usr/libexec"])


def measure_image_pull(args, res, hutch, tmpdir):
    """hutch image pull of a ~560 MB image from a registry on loopback next
    to what a user would do without hutch: skopeo copy to an OCI layout,
    then umoci unpack. Each sample starts from an empty store / empty dirs."""
    missing = [t for t in ("docker-registry", "skopeo", "umoci") if not shutil.which(t)]
    if missing:
        res.notes.append("image pull not measured: %s missing (scripts/install-deps --bench)"
                         % ", ".join(missing))
        return
    import ociimage
    log("pull and unpack of a ~560 MB image")
    g = res.group("pull + unpack of a ~560 MB image from a registry on loopback "
                  "(target: <= 1.5x skopeo copy + umoci unpack)")
    work = tempfile.mkdtemp(prefix="pull-", dir=tmpdir)
    proc = None
    try:
        layers = [subprocess.run(["tar", "-cf", "-", "-C", "/"] + dirs, check=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
                  for dirs in PULL_LAYERS]
        size = sum(len(x) for x in layers)
        lay = ociimage.layout(os.path.join(work, "src"), layers, env=["PATH=/usr/bin:/bin"],
                              compress=False)
        del layers
        proc, addr = registry_on_loopback(work)
        ref = "%s/bench/big:1" % addr
        hutch.r.timed(["skopeo", "copy", "--dest-tls-verify=false", "--dest-compress",
                       "oci:%s:latest" % lay, "docker://" + ref])
        n = [0]

        def fresh(name):
            n[0] += 1
            d = os.path.join(work, "%s-%d" % (name, n[0]))
            return d

        def hutch_pull():
            store = fresh("store")
            try:
                env = dict(hutch.r.env, HUTCH_IMAGE_STORE=store)
                t0 = time.perf_counter()
                p = subprocess.run([hutch.bin, "image", "pull", ref, "big"],
                                   env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
                dt = time.perf_counter() - t0
                if p.returncode:
                    raise HutchError("hutch image pull: %s" % p.stderr.decode()[-500:])
                return dt
            finally:
                shutil.rmtree(store, ignore_errors=True)

        def skopeo_umoci():
            d, b = fresh("oci"), fresh("bundle")
            try:
                t0 = time.perf_counter()
                hutch.r.timed(["skopeo", "copy", "--src-tls-verify=false", "docker://" + ref,
                               "oci:%s:1" % d])
                hutch.r.timed(["umoci", "unpack", "--image", "%s:1" % d, b])
                return time.perf_counter() - t0
            finally:
                shutil.rmtree(d, ignore_errors=True)
                shutil.rmtree(b, ignore_errors=True)

        interleave(g, [("hutch image pull (~560 MB)", hutch_pull),
                       ("skopeo copy + umoci unpack", skopeo_umoci)],
                   max(1, min(args.iterations, 3)), warmup=0)
        g["pairs"] = [("hutch image pull (~560 MB)", "skopeo copy + umoci unpack", "<= 1.5")]
        res.notes.append("image pull: %s, %.0f MB uncompressed in %d layers (gzip by skopeo)"
                         % (" + ".join(" ".join(d) for d in PULL_LAYERS), size / 1e6,
                            len(PULL_LAYERS)))
    finally:
        if proc:
            proc.terminate()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def disk_used(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def tree_bytes(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return total


def measure_image_disk(res, hutch, store):
    """100 live sandboxes of one image: the store's bytes and the disk under
    it do not grow (each sandbox's writable layer is its own tmpfs)."""
    log("disk: 100 live sandboxes of one image")
    n = 100
    store_before, disk_before = tree_bytes(store), disk_used(store)
    ids = []
    try:
        for _ in range(n):
            ids.append(hutch.create("--image", "bench", "--instance-type", "nano")[1])
        for sid in ids[:3]:  # they write, into their own layer
            hutch.exec(sid, ["sh", "-c", "head -c 1048576 /dev/zero > /workspace/f; "
                             "head -c 1048576 /dev/zero > /tmp/f"])
        store_after, disk_after = tree_bytes(store), disk_used(store)
    finally:
        for sid in ids:
            hutch.rm(sid)
    res.notes.append(
        "disk: %d live sandboxes of one image: the store %.1f MB before and %.1f MB after; "
        "the file system under it %+.1f MB (the store grows by the sandboxes' use records, "
        "users/<id>, a block each; other processes write there too; each sandbox's writes "
        "go to its own tmpfs)" % (
            n, store_before / 1e6, store_after / 1e6, (disk_after - disk_before) / 1e6))
