# SPDX-License-Identifier: Apache-2.0
"""Pods as containerd's CRI makes them (issue 30), on namespaces the tests
make as CNI would (test_oci.py's cni_netns): the pod's net.* sysctls,
containerd 2.x's defaults among them (enable_unprivileged_ports and
enable_unprivileged_icmp put net.ipv4.ip_unprivileged_port_start=0 and
net.ipv4.ping_group_range="0 2147483647" in the pause container's spec),
are written by the runtime in the pod's own network namespace, which the
container's user namespace does not own.
"""
import os
import subprocess

from test_oci import (NAMESPACES, _root_base, cni_namespaces, cni_netns, config, oci,  # noqa: F401
                      pytestmark)

SYSCTLS_2X = {"net.ipv4.ip_unprivileged_port_start": "0",
              "net.ipv4.ping_group_range": "0 2147483647"}


def sysctl_in(netns, key):
    path = "/proc/sys/" + key.replace(".", "/")
    return subprocess.run(["ip", "netns", "exec", os.path.basename(netns), "cat", path],
                          capture_output=True, text=True, check=True).stdout.strip()


def sysctl_here(key):
    with open("/proc/sys/" + key.replace(".", "/")) as f:
        return f.read().strip()


def test_cni_netns_sysctls(oci, cni_netns):
    """containerd 2.x's default sysctls and a pod's own net.* key, in the
    CNI network namespace: written there (the host's are unchanged), and
    an unprivileged process in the container binds port 80; an ipc key
    in the same spec is still the container's (written by its init)."""
    path, _ = cni_netns
    host = {k: sysctl_here(k) for k in SYSCTLS_2X}
    sysctls = dict(SYSCTLS_2X, **{"net.ipv4.tcp_keepalive_time": "600",
                                  "kernel.shmmni": "1000"})
    # nc listening on :80 shows in /proc/net/tcp or tcp6 (state 0A); a refused
    # bind ends nc first.
    probe = ("cat /proc/sys/kernel/shmmni; nc -l -p 80 & p=$!; "
             "while kill -0 $p 2>/dev/null; do grep -qE ':0050 [0-9A-F]+:0000 0A'"
             " /proc/net/tcp /proc/net/tcp6"
             " && { echo BOUND; kill $p; exit 0; }; done; echo NOT-BOUND; exit 1")
    b = oci.bundle(["sh", "-c", probe], name="sys",
                   linux={"namespaces": cni_namespaces(path), "sysctl": sysctls},
                   process={"terminal": False, "user": {"uid": 1000, "gid": 1000},
                            "args": ["sh", "-c", probe], "env": ["PATH=/bin"], "cwd": "/"})
    r = oci("run", "--bundle", b, "sys")
    assert r.returncode == 0, r.output
    for k, v in sysctls.items():
        if k.startswith("net."):
            assert sysctl_in(path, k).split() == v.split(), k
    assert r.output.splitlines()[0] == "1000" and "BOUND" in r.output.split(), r.output
    assert {k: sysctl_here(k) for k in SYSCTLS_2X} == host


BIND_80 = ("nc -l -p 80 & p=$!; "
           "while kill -0 $p 2>/dev/null; do grep -qE ':0050 [0-9A-F]+:0000 0A'"
           " /proc/net/tcp /proc/net/tcp6"
           " && { echo BOUND; kill $p; exit 0; }; done; echo NOT-BOUND; exit 0")


def test_cni_netns_defaults_unless_the_pod_sets_them(oci, cni_netns):
    """containerd 1.6's pause container (no net.* key in its spec): the
    first container in the CNI namespace gets containerd 2.x's defaults
    written there (port 0 and up for anyone, ping for every group), so
    uid 1000 binds port 80 as root does under runc; a key the pod sets
    wins (1024: uid 1000 cannot), the other default still written."""
    path, _ = cni_netns
    proc = {"terminal": False, "user": {"uid": 1000, "gid": 1000},
            "args": ["sh", "-c", BIND_80], "env": ["PATH=/bin"], "cwd": "/"}
    host = {k: sysctl_here(k) for k in SYSCTLS_2X}
    b = oci.bundle(proc["args"], name="dflt", process=proc,
                   linux={"namespaces": cni_namespaces(path)})
    r = oci("run", "--bundle", b, "dflt")
    assert r.returncode == 0 and r.output.split() == ["BOUND"], r.output
    for k, v in SYSCTLS_2X.items():
        assert sysctl_in(path, k).split() == v.split(), k
    ns = os.path.basename(path)
    for k, v in (("net.ipv4.ip_unprivileged_port_start", "1024"),
                 ("net.ipv4.ping_group_range", "1 0")):
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"{k}={v}"], check=True)
    port = "net.ipv4.ip_unprivileged_port_start"
    b = oci.bundle(proc["args"], name="own", process=proc,
                   linux={"namespaces": cni_namespaces(path), "sysctl": {port: "1024"}})
    r = oci("run", "--bundle", b, "own")
    assert r.returncode == 0 and r.output.split()[-1] == "NOT-BOUND", r.output
    assert sysctl_in(path, port) == "1024"
    assert sysctl_in(path, "net.ipv4.ping_group_range").split() == ["0", "2147483647"]
    assert {k: sysctl_here(k) for k in SYSCTLS_2X} == host


def test_cni_netns_sysctl_refused_names_key(oci, cni_netns):
    """A net.* key the kernel refuses in that namespace fails create,
    naming the key; nothing runs."""
    path, _ = cni_netns
    b = oci.bundle(["true"], name="bad",
                   linux={"namespaces": cni_namespaces(path),
                          "sysctl": {"net.ipv4.ip_unprivileged_port_start": "notanumber"}})
    r = oci("run", "--bundle", b, "bad")
    assert r.returncode == 1, r.output
    assert "linux.sysctl.net.ipv4.ip_unprivileged_port_start: write 'notanumber'" in r.output


def test_hostpath_of_host_root_is_the_containers_root(oci, tmp_path):
    """A hostPath volume owned by host root, mode 0700 (critest's
    "starting container with volume": a host temp dir), is readable and
    writable by the container's root as under runc: binds are idmapped
    onto the container's ids (as Kubernetes does for a pod with a user
    namespace), host uid N as the container's N. The container's uid 1000
    gets its own file and not root's (the directory opened to 0711); what
    root writes is host root's."""
    vol = tmp_path / "hostpath"
    vol.mkdir(mode=0o700)
    (vol / "f").write_text("host-root\n")
    os.chmod(vol / "f", 0o600)
    (vol / "u").write_text("user-1000\n")
    os.chown(vol / "u", 1000, 1000)
    os.chmod(vol / "u", 0o600)
    mounts = [{"destination": "/vol", "type": "bind", "source": str(vol),
               "options": ["rbind", "rw"]}]

    def run(name, uid, probe):
        proc = {"terminal": False, "user": {"uid": uid, "gid": uid},
                "args": ["sh", "-c", probe], "env": ["PATH=/bin"], "cwd": "/"}
        b = oci.bundle(proc["args"], name=name, process=proc,
                       mounts=config([])["mounts"] + mounts)
        os.makedirs(os.path.join(b, "rootfs", "vol"), exist_ok=True)
        r = oci("run", "--bundle", b, name)
        assert r.returncode == 0, r.output
        return r.output.split()

    out = run("root", 0, "stat -c %u /vol /vol/f /vol/u; cat /vol/f; echo new > /vol/g;"
                         " cat /vol/g")
    assert out == ["0", "0", "1000", "host-root", "new"], out
    assert os.stat(vol / "g").st_uid == 0 and (vol / "g").read_text() == "new\n"
    os.chmod(vol, 0o711)  # for uid 1000 to reach its file
    out = run("user", 1000, "cat /vol/u; cat /vol/f 2>/dev/null || echo DENIED; true")
    assert out == ["user-1000", "DENIED"], out
