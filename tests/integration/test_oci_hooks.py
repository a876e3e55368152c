# SPDX-License-Identifier: Apache-2.0
"""A bundle's hooks (issue 19; runtime-spec config.md "POSIX-platform
Hooks"): each phase runs where and when the spec says, with the state JSON
on its stdin; a failing create hook fails create and leaves nothing; a
timeout kills the hook; poststart and poststop failures are only logged.

The hooks are the bundle's own static busybox (its host path: a hook's
path is resolved in the runtime's namespaces, except startContainer's),
writing what they saw into a directory of the test's.
"""
import json
import os
import subprocess
import time

import pytest

from conftest import HUTCH, cgroup_dirs_named, wait_until
from test_oci import _root_base, config, oci, podman, pytestmark  # noqa: F401 (fixtures, skip mark)


def sh_hook(oci_b, script, **extra):
    """A hook running script with the bundle's busybox sh (a host path)."""
    h = {"path": os.path.join(oci_b, "rootfs", "bin", "busybox"),
         "args": ["busybox", "sh", "-c", script]}
    h.update(extra)
    return h


def out_dir(tmp_path):
    out = tmp_path / "out"
    out.mkdir(mode=0o777, exist_ok=True)
    os.chmod(out, 0o777)
    return out


def out_mount(out):
    return config([])["mounts"] + [{"destination": "/out", "type": "bind", "source": str(out),
                                    "options": ["rbind", "rw"]}]


def ns_of(pid, ns="mnt"):
    return os.readlink(f"/proc/{pid}/ns/{ns}")


def assert_nothing_left(oci, cid, pid=None):
    assert not os.path.exists(os.path.join(oci.root, cid)), os.listdir(oci.root)
    assert not oci.hutch.ids(), oci.hutch.ids()
    if pid:
        # The supervisor answers before the kernel's share of the
        # teardown (as for every failed create): bounded, not instant.
        assert wait_until(lambda: not os.path.exists(f"/proc/{pid}")), f"pid {pid} left"


def test_host_hooks_get_the_state_in_order(oci, tmp_path):
    """prestart and createRuntime at create (status creating, init's pid,
    in the caller's mount namespace), poststart once running (the
    process's pid), poststop at delete (stopped); args and env as given,
    each in the listed order; poststop taken from create's config."""
    log = tmp_path / "log"
    b = oci.bundle(["sleep", "100"])

    def hook(name):
        return sh_hook(b, f'cat > {tmp_path}/{name}.json; echo "{name} $FOO $0" >> {log}; '
                          f'readlink /proc/self/ns/mnt > {tmp_path}/{name}.mnt',
                       env=["FOO=foo-" + name])

    hooks = {"prestart": [hook("pre1"), hook("pre2")], "createRuntime": [hook("cr")],
             "poststart": [hook("ps")], "poststop": [hook("pst1"), hook("pst2")]}
    for h in hooks.values():
        for x in h:
            x["args"].append("arg1")
    oci.bundle(["sleep", "100"], hooks=hooks)
    r = oci("create", "--bundle", b, "h1")
    assert r.returncode == 0, r.output
    created = oci.state("h1")
    init_pid = created["pid"]
    for name in ("pre1", "pre2", "cr"):
        st = json.loads((tmp_path / f"{name}.json").read_text())
        assert st["id"] == "h1" and st["status"] == "creating" and st["bundle"] == b
        assert st["pid"] == init_pid and st["ociVersion"]
        # The hook ran in the runtime's mount namespace; the pid it was
        # given is in the container's.
        assert (tmp_path / f"{name}.mnt").read_text().strip() == ns_of("self")
        assert ns_of(init_pid) != ns_of("self")
    assert log.read_text() == "pre1 foo-pre1 arg1\npre2 foo-pre2 arg1\ncr foo-cr arg1\n"
    assert not (tmp_path / "ps.json").exists()
    # A config.json changed after create changes nothing (state.json's).
    oci.bundle(["sleep", "100"])
    r = oci("start", "h1")
    assert r.returncode == 0, r.output
    running = oci.state("h1")
    st = json.loads((tmp_path / "ps.json").read_text())
    assert st["status"] == "running" and st["pid"] == running["pid"] != init_pid
    assert oci("kill", "h1", "KILL").returncode == 0
    r = oci("delete", "--force", "h1")
    assert r.returncode == 0, r.output
    for name in ("pst1", "pst2"):
        st = json.loads((tmp_path / f"{name}.json").read_text())
        assert st["id"] == "h1" and st["status"] == "stopped" and st["pid"] == 0
    assert log.read_text().splitlines()[3:] == ["ps foo-ps arg1", "pst1 foo-pst1 arg1",
                                                "pst2 foo-pst2 arg1"]
    assert_nothing_left(oci, "h1")


def test_container_hooks_run_in_the_container(oci, tmp_path):
    """createContainer: the program opened on the host, run in the
    container's mount (and user) namespace as its root, status creating;
    startContainer: resolved in the container, status created, before the
    process runs."""
    out = out_dir(tmp_path)
    b = oci.bundle(["true"])
    (tmp_path / "b" / "rootfs" / "marker-in-root").write_text("x")
    probe = ("cat > /out/{n}.json; readlink /proc/self/ns/mnt > /out/{n}.mnt; "
             "ls / > /out/{n}.ls; id -u > /out/{n}.uid; test -e /out/ran || touch /out/{n}.first")
    cc = sh_hook(b, probe.format(n="cc"))
    sc = {"path": "/bin/sh", "args": ["sh", "-c", probe.format(n="sc")]}
    oci.bundle(["sh", "-c", "touch /out/ran; exec sleep 100"], mounts=out_mount(out),
                 hooks={"createContainer": [cc], "startContainer": [sc]})
    r = oci("create", "--bundle", b, "h2")
    assert r.returncode == 0, r.output
    init_pid = oci.state("h2")["pid"]
    st = json.loads((out / "cc.json").read_text())
    assert st["status"] == "creating" and st["id"] == "h2" and st["pid"] == init_pid
    assert (out / "cc.mnt").read_text().strip() == ns_of(init_pid) != ns_of("self")
    assert "marker-in-root" in (out / "cc.ls").read_text().split()
    assert (out / "cc.uid").read_text().strip() == "0"
    assert not (out / "sc.json").exists()
    r = oci("start", "h2")
    assert r.returncode == 0, r.output
    st = json.loads((out / "sc.json").read_text())
    assert st["status"] == "created" and st["pid"] == init_pid
    assert (out / "sc.mnt").read_text().strip() == ns_of(init_pid)
    assert (out / "sc.first").exists() and (out / "cc.first").exists()
    assert wait_until(lambda: (out / "ran").exists())
    assert oci("delete", "--force", "h2").returncode == 0
    assert_nothing_left(oci, "h2", init_pid)


@pytest.mark.parametrize("phase", ["prestart", "createRuntime", "createContainer"])
def test_failing_create_hook_leaves_nothing(oci, tmp_path, phase):
    """The error names the phase, index, path, status and what the hook
    said; no state dir, sandbox, cgroup or process is left."""
    out = out_dir(tmp_path)
    b = oci.bundle(["true"])
    # A passing host hook first records init's pid and cgroup.
    record = sh_hook(b, f"cat > {out}/state.json; "
                        f"pid=$(sed 's/.*\"pid\":\\([0-9]*\\).*/\\1/' {out}/state.json); "
                        f"cat /proc/$pid/cgroup > {out}/cgroup")
    # The failing one: in the container when createContainer (its /out).
    where = "/out" if phase == "createContainer" else str(out)
    bad = sh_hook(b, f"cat > {where}/seen.json; echo boom >&2; exit 3")
    hooks = {"createRuntime": [record], phase: [bad]} if phase == "createContainer" else \
        {phase: [record, bad]}
    oci.bundle(["true"], mounts=out_mount(out), hooks=hooks)
    r = oci("create", "--bundle", b, "h3")
    assert r.returncode == 1
    idx = 0 if phase == "createContainer" else 1
    assert f"hooks.{phase}[{idx}] '{bad['path']}': exited with status 3: boom" in r.output, \
        r.output
    seen = json.loads((out / "seen.json").read_text())
    assert seen["id"] == "h3" and seen["status"] == "creating"
    pid = json.loads((out / "state.json").read_text())["pid"]
    assert pid == seen["pid"] > 0
    names = {os.path.basename(line.split(":", 2)[2])
             for line in (out / "cgroup").read_text().splitlines()}
    sids = [n[len("hutch-"):] for n in names if n.startswith("hutch-")]
    assert sids, names
    assert_nothing_left(oci, "h3", pid)
    for sid in sids:
        assert wait_until(lambda: not cgroup_dirs_named(sid)), cgroup_dirs_named(sid)


def test_hook_killed_by_a_signal_is_named(oci, tmp_path):
    b = oci.bundle(["true"])
    oci.bundle(["true"], hooks={"createRuntime": [sh_hook(b, "kill -9 $$")]})
    r = oci("create", "--bundle", b, "h4")
    assert r.returncode == 1
    assert "hooks.createRuntime[0]" in r.output and "killed by signal 9" in r.output, r.output
    assert_nothing_left(oci, "h4")


@pytest.mark.parametrize("phase", ["createRuntime", "createContainer"])
def test_hook_timeout_kills_it(oci, tmp_path, phase):
    out = out_dir(tmp_path)
    b = oci.bundle(["true"])
    where = "/out" if phase == "createContainer" else str(out)
    # The pid as the host sees it: the hook's own /proc/self is the
    # container's in createContainer; its parent records it there too.
    oci.bundle(["true"], mounts=out_mount(out), hooks={phase: [
        sh_hook(b, f"echo $$ > {where}/pid; readlink /proc/self/ns/pid > {where}/pidns; "
                   "exec sleep 100", timeout=1)]})
    t0 = time.monotonic()
    r = oci("create", "--bundle", b, "h5")
    assert r.returncode == 1
    assert time.monotonic() - t0 < 30
    assert f"hooks.{phase}[0]" in r.output and "timed out after 1 s (killed)" in r.output, \
        r.output
    pid = int((out / "pid").read_text())
    if phase == "createRuntime":
        assert not os.path.exists(f"/proc/{pid}"), "the hook outlived its timeout"
    else:
        # Its pid namespace died with the sandbox: no process is left in
        # it (the namespace's inode names no process of the host).
        pidns = (out / "pidns").read_text().strip()
        left = [p for p in os.listdir("/proc") if p.isdigit() and _pidns(p) == pidns]
        assert not left, left
    assert_nothing_left(oci, "h5")


def _pidns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def test_start_container_hook_failure_fails_start(oci, tmp_path):
    out = out_dir(tmp_path)
    b = oci.bundle(["true"])
    oci.bundle(["sh", "-c", "touch /out/ran"], mounts=out_mount(out),
                 hooks={"startContainer": [{"path": "/bin/sh",
                                            "args": ["sh", "-c", "echo nope; exit 5"]}]})
    assert oci("create", "--bundle", b, "h6").returncode == 0
    init_pid = oci.state("h6")["pid"]
    r = oci("start", "h6")
    assert r.returncode == 1
    assert "hooks.startContainer[0] '/bin/sh': exited with status 5: nope" in r.output, r.output
    assert oci.state("h6")["status"] == "stopped"
    assert not (out / "ran").exists()
    assert oci("delete", "h6").returncode == 0
    assert_nothing_left(oci, "h6", init_pid)


def test_start_container_hook_missing_program(oci, tmp_path):
    b = oci.bundle(["true"])
    oci.bundle(["true"], hooks={"startContainer": [{"path": "/no/such/hook"}]})
    assert oci("create", "--bundle", b, "h7").returncode == 0
    r = oci("start", "h7")
    assert r.returncode == 1
    assert "hooks.startContainer[0] '/no/such/hook': exited with status 127" in r.output
    assert oci("delete", "h7").returncode == 0


def test_create_container_hook_missing_program(oci, tmp_path):
    b = oci.bundle(["true"])
    oci.bundle(["true"], hooks={"createContainer": [{"path": "/no/such/hook"}]})
    r = oci("create", "--bundle", b, "h8")
    assert r.returncode == 1
    assert "hooks.createContainer[0].path: '/no/such/hook'" in r.output, r.output
    assert_nothing_left(oci, "h8")


def test_poststart_and_poststop_failures_are_logged_only(oci, tmp_path):
    b = oci.bundle(["sleep", "100"])
    oci.bundle(["sleep", "100"], hooks={
        "poststart": [sh_hook(b, "exit 4"), sh_hook(b, f"touch {tmp_path}/ps2")],
        "poststop": [sh_hook(b, "exit 6"), sh_hook(b, f"touch {tmp_path}/pst2")]})
    assert oci("create", "--bundle", b, "h9").returncode == 0
    r = oci("start", "h9")
    assert r.returncode == 0, r.output
    assert "hooks.poststart[0]" in r.output and "exited with status 4 (ignored)" in r.output
    assert (tmp_path / "ps2").exists()
    assert oci.state("h9")["status"] == "running"
    r = oci("delete", "--force", "h9")
    assert r.returncode == 0, r.output
    assert "hooks.poststop[0]" in r.output and "exited with status 6 (ignored)" in r.output
    assert (tmp_path / "pst2").exists()
    assert_nothing_left(oci, "h9")


@pytest.mark.parametrize("hooks,msg", [
    ({"preStart": []}, "hooks.preStart: unknown phase"),
    ({"prestart": [{"path": "bin/true"}]}, "hooks.prestart[0].path: not an absolute path"),
    ({"poststop": [{"args": ["x"]}]}, "hooks.poststop[0].path: not an absolute path"),
    ({"poststart": [{"path": "/bin/true", "timeout": 0}]},
     "hooks.poststart[0].timeout: not a whole number of seconds"),
    ({"createRuntime": [{"path": "/bin/true"}, {"path": "/bin/true", "timeout": 1.5}]},
     "hooks.createRuntime[1].timeout: not a whole number"),
    ({"createRuntime": [{"path": "/bin/true", "timeout": "5"}]},
     "hooks.createRuntime[0].timeout: not a whole number"),
    ({"createContainer": {"path": "/bin/true"}}, "hooks.createContainer: not an array"),
    ({"startContainer": ["/bin/true"]}, "hooks.startContainer[0]: not an object"),
    ({"prestart": [{"path": "/bin/true", "env": ["NOEQUALS"]}]},
     "hooks.prestart[0].env[0]: not KEY=VALUE"),
    ({"prestart": [{"path": "/bin/true", "args": [1]}]}, "hooks.prestart[0].args[0]: not a string"),
    ({"prestart": [{"path": 7}]}, "hooks.prestart[0].path"),
    ([], "hooks: not an object"),
    ({"prestart": [{"path": "/bin/true"}] * 33}, "hooks.prestart: more than 32 hooks"),
])
def test_hooks_refusals_name_the_field(oci, hooks, msg):
    b = oci.bundle(["true"])
    oci.bundle(["true"], hooks=hooks)
    r = oci("create", "--bundle", b, "hx")
    assert r.returncode == 1 and msg in r.output, r.output
    assert not os.path.exists(os.path.join(oci.root, "hx"))


def test_features_lists_the_hooks(hutch, tmp_path):
    r = subprocess.run([HUTCH, "oci", "--root", str(tmp_path / "root"), "features"],
                       capture_output=True, env=hutch.env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["hooks"] == ["prestart", "createRuntime", "createContainer",
                                             "startContainer", "poststart", "poststop"]


def test_podman_hooks_dir(podman, tmp_path):
    """podman --hooks-dir: podman writes its hooks into config.json, hutch
    runs them (prestart at create, poststop at podman's cleanup)."""
    hooks_dir = tmp_path / "hooks.d"
    hooks_dir.mkdir()
    busybox = str(tmp_path / "img" / "bin" / "busybox")
    for stage in ("prestart", "poststop"):
        (hooks_dir / f"{stage}.json").write_text(json.dumps({
            "version": "1.0.0",
            "hook": {"path": busybox,
                     "args": ["busybox", "sh", "-c", f"cat > {tmp_path}/{stage}.json"]},
            "when": {"always": True}, "stages": [stage]}))
    r = podman("--hooks-dir", str(hooks_dir), "run", "--rm", "--network", "none",
               "--cidfile", str(tmp_path / "cid"), "localhost/bb:1", "true")
    assert r.returncode == 0, r.stderr
    cid = (tmp_path / "cid").read_text().strip()
    pre = json.loads((tmp_path / "prestart.json").read_text())
    assert pre["id"] == cid and pre["status"] == "creating" and pre["pid"] > 0
    assert wait_until(lambda: (tmp_path / "poststop.json").exists())
    post = json.loads((tmp_path / "poststop.json").read_text())
    assert post["id"] == cid and post["status"] == "stopped"
