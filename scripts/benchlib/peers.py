"""The roots of hutch and its peers: bubblewrap, crun and runc (OCI), podman."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from .common import (
    CRUN_ID_BASE, HutchError, MountNs, PeerError, proc_children, proc_comm, proc_tree, Runner)

# --------------------------------------------------------------------------
# runtimes

BWRAP_ROOT = [
    "--unshare-all", "--die-with-parent",
    "--ro-bind", "/usr", "/usr",
    "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
    "--proc", "/proc", "--dev", "/dev",
    "--tmpfs", "/tmp", "--tmpfs", "/workspace", "--chdir", "/workspace",
]


class Hutch:
    def __init__(self, binary, runner):
        self.bin = binary
        self.r = runner
        self.ids = []

    def run(self, argv):
        return self.r.timed([self.bin, "run", "--"] + argv, HutchError)[0]

    def create(self, *opts):
        dt, out = self.r.timed([self.bin, "create", *opts], HutchError, capture=True)
        sid = out.strip()
        if not sid or len(sid.split()) != 1:
            raise HutchError("hutch create printed %r, expected an id" % out)
        self.ids.append(sid)
        return dt, sid

    def rm(self, sid):
        dt = self.r.timed([self.bin, "rm", sid], HutchError)[0]
        if sid in self.ids:
            self.ids.remove(sid)
        return dt

    def exec(self, sid, argv):
        return self.r.timed([self.bin, "exec", sid, "--"] + argv, HutchError)[0]

    def inspect(self, sid):
        _, out = self.r.timed([self.bin, "inspect", sid], HutchError, capture=True)
        return json.loads(out)

    def socket(self, sid):
        s = self.inspect(sid).get("socket")
        if not s:
            raise HutchError("hutch inspect %s shows no socket" % sid)
        return s

    def cleanup(self):
        for sid in list(self.ids):
            subprocess.run([self.bin, "rm", sid], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=self.r.env)
        self.ids.clear()
        subprocess.run([self.bin, "rm", "--all"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=self.r.env)
        # gc stops the runtime dir's lxcfs (/proc views) once the last
        # supervisor has exited (they finish after rm answers)
        lx = os.path.join(self.r.env["HUTCH_RUNTIME_DIR"], ".lxcfs")
        end = time.monotonic() + 10
        while os.path.exists(lx) and time.monotonic() < end:
            subprocess.run([self.bin, "gc"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=self.r.env)
            if os.path.exists(lx):
                time.sleep(0.05)


class Bwrap:
    def __init__(self, runner):
        self.r = runner
        self.procs = []

    def run(self, argv):
        return self.r.timed(["bwrap"] + BWRAP_ROOT + argv)[0]

    def start_idle(self):
        """A bwrap sandbox running `sleep infinity`; returns (popen, sleep pid)."""
        p = subprocess.Popen(["bwrap"] + BWRAP_ROOT + ["sleep", "infinity"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=self.r.env)
        self.procs.append(p)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if p.poll() is not None:
                raise PeerError("bwrap ... sleep infinity exited with %d" % p.returncode)
            leaf = [q for q in proc_tree(p.pid) if proc_comm(q) == "sleep"]
            if leaf:
                return p, leaf[0]
            time.sleep(0.002)
        raise PeerError("bwrap sandbox did not start sleep within 5 s")

    def cleanup(self):
        # kill bwrap's pid-1 child first: the pid namespace goes with it and
        # the outer bwrap reaps it and exits (no orphan left to init)
        for p in self.procs:
            if p.poll() is None:
                for c in proc_children(p.pid):
                    try:
                        os.kill(c, signal.SIGKILL)
                    except OSError:
                        pass
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()


class Oci:
    """crun or runc with a generated bundle (empty rootfs dir + mounts)."""

    def __init__(self, name, runner, tmpdir, ns, rootfs=None):
        """rootfs: an unpacked image to run instead of the host's /usr."""
        self.name = name
        self.r = runner
        self.ns = ns
        self.base = tempfile.mkdtemp(prefix=name + "-", dir=tmpdir)
        self.root = os.path.join(self.base, "state")
        os.mkdir(self.root)
        self.ids = []
        self.seq = 0
        self.bundles = {}
        self.host_usr = rootfs is None
        self.rootfs = rootfs or os.path.join(self.base, "rootfs")
        if self.host_usr:
            os.mkdir(self.rootfs)
            for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"),
                                 ("lib64", "usr/lib64"), ("sbin", "usr/sbin")):
                os.symlink(target, os.path.join(self.rootfs, link))
        for d in ("usr", "proc", "dev", "tmp", "workspace"):
            os.makedirs(os.path.join(self.rootfs, d), exist_ok=True)
        os.chmod(self.base, 0o755)

    def global_args(self):
        a = [self.name, "--root", self.root]
        if self.name == "crun" and isinstance(self.ns, MountNs):
            a.append("--cgroup-manager=disabled")
        return a

    def bundle(self, argv):
        key = tuple(argv)
        if key in self.bundles:
            return self.bundles[key]
        b = os.path.join(self.base, "bundle%d" % len(self.bundles))
        os.mkdir(b)
        caps = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
        cfg = {
            "ociVersion": "1.0.0",
            "process": {
                "terminal": False,
                "user": {"uid": 0, "gid": 0},
                "args": list(argv),
                "env": ["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"],
                "cwd": "/workspace",
                "capabilities": {k: caps for k in
                                 ("bounding", "effective", "permitted", "ambient")},
                "noNewPrivileges": True,
            },
            # absolute: runc refuses a rootfs that is a symlink
            "root": {"path": self.rootfs, "readonly": True},
            "hostname": "bench",
            "mounts": [
                {"destination": "/proc", "type": "proc", "source": "proc"},
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
                {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
                 "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
                {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
                 "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            ] + ([
                {"destination": "/usr", "type": "bind", "source": "/usr",
                 "options": ["rbind", "ro", "nosuid", "nodev"]},
            ] if self.host_usr else []) + [
                {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "nodev", "mode=1777"]},
                {"destination": "/workspace", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "nodev", "mode=1777"]},
            ],
            "linux": {
                "namespaces": [{"type": t} for t in
                               ("pid", "network", "ipc", "uts", "mount", "cgroup", "user")],
                "uidMappings": [{"containerID": 0, "hostID": CRUN_ID_BASE, "size": 65536}],
                "gidMappings": [{"containerID": 0, "hostID": CRUN_ID_BASE, "size": 65536}],
                "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list",
                                "/proc/sched_debug", "/proc/scsi", "/proc/acpi"],
                "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                  "/proc/sysrq-trigger"],
            },
        }
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        self.bundles[key] = b
        return b

    def new_id(self):
        self.seq += 1
        return "bench-%d-%d" % (os.getpid(), self.seq)

    def run(self, argv):
        b = self.bundle(argv)
        cid = self.new_id()
        self.ids.append(cid)
        with self.ns:
            dt = self.r.timed(self.global_args() + ["run", "--bundle", b, cid])[0]
        self.ids.remove(cid)  # `run` without -d deletes the container on exit
        return dt

    def start_idle(self):
        b = self.bundle(["sleep", "infinity"])
        cid = self.new_id()
        self.ids.append(cid)
        with self.ns:
            dt = self.r.timed(self.global_args() + ["run", "-d", "--bundle", b, cid])[0]
        return dt, cid

    def exec(self, cid, argv):
        with self.ns:
            return self.r.timed(self.global_args() + ["exec", cid] + argv)[0]

    def delete(self, cid):
        with self.ns:
            dt = self.r.timed(self.global_args() + ["delete", "-f", cid])[0]
        self.ids.remove(cid)
        return dt

    def pid(self, cid):
        with self.ns:
            p = subprocess.run(self.global_args() + ["state", cid],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return json.loads(p.stdout)["pid"]

    def cleanup(self):
        for cid in list(self.ids):
            try:
                with self.ns:
                    subprocess.run(self.global_args() + ["delete", "-f", cid],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except OSError:
                pass
        self.ids.clear()


class Podman:
    """podman with storage of its own under tmpdir and a given OCI runtime.
    This host's hard RLIMIT_NOFILE is 20000 (no CAP_SYS_RESOURCE): podman's
    default ulimits (1048576) fail, so a containers.conf lowers them."""

    def __init__(self, runner, tmpdir, runtime, ns):
        """runtime: crun or runc; ns: the mount namespace it needs here (crun:
        the one without the controller-less cgroup2 tree, as Oci's)."""
        self.runtime, self.ns = runtime, ns
        self.base = tempfile.mkdtemp(prefix="podman-", dir=tmpdir)
        conf = os.path.join(self.base, "containers.conf")
        with open(conf, "w") as f:
            f.write('[containers]\ndefault_ulimits = ["nofile=4096:4096", '
                    '"nproc=4096:4096"]\n')
        self.r = Runner(self.base, dict(runner.env, CONTAINERS_CONF=conf))
        self.argv = ["podman", "--root", os.path.join(self.base, "storage"),
                     "--runroot", os.path.join(self.base, "run"), "--storage-driver",
                     "overlay", "--cgroup-manager", "cgroupfs", "--events-backend", "file"]

    def load(self, archive):
        self.r.timed(self.argv + ["load", "-q", "-i", archive])

    def run(self, image, argv):
        with self.ns:
            return self.r.timed(self.argv + ["run", "--rm", "--network", "none", "--runtime",
                                             self.runtime, image] + argv)[0]

    def cleanup(self):
        subprocess.run(self.argv + ["system", "reset", "-f"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=self.r.env)
        shutil.rmtree(self.base, ignore_errors=True)
