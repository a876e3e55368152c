# SPDX-License-Identifier: Apache-2.0
"""A pod's shared pid namespace (issue 30): the CRI's POD mode, the
kubelet's shareProcessNamespace. A container whose linux.namespaces names
the pod's pid namespace (/proc/PID/ns/pid of the pause container's
process or its supervisor, as containerd writes it) has its init born
there by hutch's supervisor (a helper that setns()es and clones, never a
process entering a live namespace); the pod's PID 1 is the pause
container's process, as under runc (its pid namespace nested in its
sandbox's: init/pidns.c), and its hutch init is outside. Driven through the OCI command line as
containerd's shim drives it: create/start (run), kill, delete, ps.

What is asserted is the observable effect: a process of container A is
in container B's /proc; no host process is; no hutch init there is
dumpable (its exe and memory closed to the pod's root); kill --all and ps
of one container touch only its own processes; the pod's end ends all;
a member's supervisor killed takes its processes with it.
"""
import os
import signal
import subprocess

from conftest import wait_until
from test_oci import _root_base, oci, pytestmark  # noqa: F401

PROC = {"pid": "pid", "network": "net", "ipc": "ipc", "uts": "uts"}


def pod_ns(pid, share=("pid", "network", "ipc", "uts")):
    """linux.namespaces joining pid's pod (the CRI's POD mode by default)."""
    out = []
    for t in ("pid", "network", "ipc", "uts", "mount"):
        out.append({"type": t, "path": f"/proc/{pid}/ns/{PROC[t]}"} if t in share
                   else {"type": t})
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


# Every process of the container's /proc: pid, exe (or DENIED), ENV if
# its environ is readable (else -), cmdline.
LIST_PROCS = ("for d in /proc/[0-9]*; do p=${d#/proc/}; e=$(readlink $d/exe 2>/dev/null)"
              " || e=DENIED; v=-; cat $d/environ >/dev/null 2>&1 && v=ENV;"
              " c=$(tr '\\0' ' ' < $d/cmdline); echo \"$p|$e|$v|$c\"; done; true")


def ps(oci, cid, n):
    """ps --format json of cid once it lists n processes (its shell forks)."""
    got = []

    def listed():
        r = oci("ps", "--format", "json", cid)
        assert r.returncode == 0, r.output
        got[:] = [int(x) for x in r.output.strip()[1:-1].split(",")]
        return len(got) == n
    assert wait_until(listed), got
    return set(got)


def start_pod(oci, tmp_path):
    """The pause container, then A (sleep 4242) in its pid namespace via
    its supervisor's pid (containerd's form)."""
    b = oci.bundle(["sleep", "1000"], name="infra", hostname="podhost")
    assert oci("run", "--detach", "--bundle", b, "infra").returncode == 0
    sup = oci.status_file("infra")["pid"]
    b = oci.bundle(["sleep", "4242"], name="a", linux={"namespaces": pod_ns(sup)})
    r = oci("run", "--detach", "--bundle", b, "a")
    assert r.returncode == 0, r.output
    return sup


def test_pod_pid_namespace_shared(oci, tmp_path):
    """B sees A's and the pause container's processes, no host process,
    and no hutch init it can dump; its pid namespace is the pause
    container's; A in the CONTAINER mode next to it sees only its own."""
    marker = subprocess.Popen(["sleep", "4343"])  # a host process
    try:
        sup = start_pod(oci, tmp_path)
        infra_pid = oci.state("infra")["pid"]
        b = oci.bundle(["sh", "-c", "readlink /proc/self/ns/pid; " + LIST_PROCS], name="b",
                       linux={"namespaces": pod_ns(infra_pid)})
        r = oci("run", "--bundle", b, "b")
        assert r.returncode == 0, r.output
        lines = r.output.splitlines()
        assert lines[0] == os.readlink(f"/proc/{infra_pid}/ns/pid"), r.output
        procs = [ln.split("|", 3) for ln in lines[1:] if ln.count("|") >= 3]
        cmds = [c.strip() for _, _, _, c in procs]
        assert "sleep 4242" in cmds and "sleep 1000" in cmds, r.output
        assert "sleep 4343" not in cmds, r.output
        # Only the pod's: A's and B's inits (exe and environ closed; the
        # pause container's is outside) and busybox.
        for pid, exe, env, cmd in procs:
            assert exe in ("DENIED", "/bin/busybox"), r.output
            assert exe != "DENIED" or env == "-", r.output
        assert sum(exe == "DENIED" for _, exe, _, _ in procs) == 2, r.output
        # the pod's PID 1: the pause container's process, as under runc
        assert [c.strip() for p, _, _, c in procs if p == "1"] == ["sleep 1000"], r.output
        # CONTAINER mode beside it: a pid namespace of its own.
        b = oci.bundle(["sh", "-c", LIST_PROCS], name="c",
                       linux={"namespaces": pod_ns(sup, share=("network", "ipc", "uts"))})
        r = oci("run", "--bundle", b, "c")
        assert r.returncode == 0, r.output
        assert "sleep" not in r.output, r.output
    finally:
        marker.kill()
        marker.wait()
    for cid in ("b", "c", "a", "infra"):
        assert oci("delete", "--force", cid).returncode == 0


def test_pod_pid_kill_all_and_ps_are_the_containers(oci, tmp_path):
    """kill --all and ps of A reach A's processes only (the pod's other
    containers share the namespace); the pod's end (its pause container
    killed) ends every container in it."""
    start_pod(oci, tmp_path)
    infra = oci.state("infra")["pid"]
    b = oci.bundle(["sh", "-c", "sleep 4444 & exec sleep 4545"], name="b",
                   linux={"namespaces": pod_ns(infra)})
    assert oci("run", "--detach", "--bundle", b, "b").returncode == 0
    a, bpid = oci.state("a")["pid"], oci.state("b")["pid"]
    listed = ps(oci, "b", 3)  # B's init, sleep 4545 and its sleep 4444
    assert bpid in listed and a not in listed and infra not in listed, (listed, a, infra)
    assert oci("kill", "--all", "b", "KILL").returncode == 0
    assert wait_until(lambda: not any(alive(p) for p in listed))
    assert wait_until(lambda: oci.state("b")["status"] == "stopped")
    assert alive(a) and alive(infra)
    # The pod's end: its PID 1 goes, and the kernel ends A with it.
    assert oci("kill", "infra", "KILL").returncode == 0
    assert wait_until(lambda: not alive(a) and not alive(infra))
    assert wait_until(lambda: oci.state("a")["status"] == "stopped")
    for cid in ("b", "a", "infra"):
        assert oci("delete", cid).returncode == 0
    assert wait_until(lambda: oci.hutch.ids() == [] and os.listdir(oci.root) == [])


def test_pod_pid_member_supervisor_killed(oci, tmp_path):
    """A member's supervisor killed (kill -9): its init goes (parent-death
    signal) and takes A's processes with it, though the pod's namespace
    lives on (init is their subreaper: a double fork does not escape)."""
    start_pod(oci, tmp_path)
    infra = oci.state("infra")["pid"]
    b = oci.bundle(["sh", "-c", "(sleep 4646 &) ; exec sleep 4747"], name="b",
                   linux={"namespaces": pod_ns(infra)})
    assert oci("run", "--detach", "--bundle", b, "b").returncode == 0
    listed = ps(oci, "b", 3)  # the orphaned sleep 4646 is init's
    os.kill(oci.status_file("b")["pid"], signal.SIGKILL)
    assert wait_until(lambda: not any(alive(p) for p in listed))
    assert alive(infra) and alive(oci.state("a")["pid"])
    for cid in ("b", "a", "infra"):
        oci("delete", "--force", cid)
