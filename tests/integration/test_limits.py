# SPDX-License-Identifier: Apache-2.0
"""Instance type limits are really enforced (DESIGN §5): memory, pids, CPU
quota and tmpfs size, measured from inside, and the sandbox survives each.
"""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import HUTCH, SLOWDOWN, cgroup_dirs_named, retired_dirs, wait_until

MEMORY_BOMB = "b = bytearray(2 << 30)\nprint('survived', len(b))"
GROWING_LIST = "x = []\nwhile True: x.append(bytearray(1 << 20))"


def init_pid(sb):
    return json.loads(sb.hutch("inspect", sb.id).stdout)["init_pid"]


def only_init_left(sb):
    return wait_until(lambda: sb.host_pids() == [init_pid(sb)], timeout=10)


@pytest.fixture
def nano(hutch):
    sb = hutch.create("--instance-type", "nano")
    yield sb
    sb.rm()


@pytest.fixture
def nano_tmpfs(hutch):
    """--workspace tmpfs: the writable places in memory (an ordinary
    user's; the disk's own cases are test_disk.py's)."""
    sb = hutch.create("--instance-type", "nano", "--workspace", "tmpfs")
    yield sb
    sb.rm()


def test_memory_bomb_oom_killed_via_api(nano):
    init = init_pid(nano)
    res = nano.run(argv=["python3", "-c", MEMORY_BOMB], timeout=60)
    assert "survived" not in res["stdout"]
    assert res["status"] == "oom_killed", res
    assert res["oom_killed"] is True
    assert res["signal"] == 9 and res["exit_code"] is None
    assert res["message"].startswith("killed: out of memory"), res
    assert "256 MiB" in res["message"] and "nano" in res["message"]
    # The sandbox stays usable, with the same init.
    assert nano.sh("echo still here") == "still here\n"
    assert init_pid(nano) == init
    assert only_init_left(nano)
    # An ordinary command that ends by itself is not reported as an OOM kill.
    res = nano.run(argv=["python3", "-c", "b = bytearray(64 << 20); print(len(b))"])
    assert res["status"] == "exited" and res["oom_killed"] is False, res


def test_memory_bomb_in_a_shell_string_is_reported_as_oom(nano):
    """A shell that waits for its child reports the child's SIGKILL as exit
    137: that is an OOM kill too when the cgroup's counter moved (issue 18
    #5; it was reported as a plain exit 137 with oom_killed false)."""
    bomb = "python3 -c 'b = bytearray(2 << 30)' || exit $?"  # the shell waits
    res = nano.run(bomb, timeout=60)
    assert res["status"] == "oom_killed", res
    assert res["oom_killed"] is True
    assert res["exit_code"] == 137, res  # the shell's real exit status
    assert res["message"].startswith("killed: out of memory"), res
    # A shell that exits 137 by itself is no OOM kill.
    res = nano.run("exit 137")
    assert res["status"] == "exited" and res["oom_killed"] is False, res
    assert res["exit_code"] == 137


def test_memory_bomb_cli_exec_and_run(hutch):
    sb = hutch.create("--instance-type", "micro")
    try:
        r = hutch("exec", sb.id, "--", "python3", "-c", GROWING_LIST)
        assert r.returncode == 137, r
        assert b"killed: out of memory" in r.stderr, r.stderr
        r = hutch("exec", sb.id, "--", "echo", "ok")
        assert r.returncode == 0 and r.stdout == b"ok\n", r
    finally:
        sb.rm()
    r = hutch("run", "--instance-type", "nano", "--", "python3", "-c", MEMORY_BOMB)
    assert r.returncode == 137, r
    assert b"killed: out of memory" in r.stderr, r.stderr
    assert b"survived" not in r.stdout


FORK_BOMB = r"""
import os, time
kids, err = [], None
for i in range(2000):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
print(len(kids), err, flush=True)
if KILL:
    for k in kids:
        os.kill(k, 9)
    for k in kids:
        os.waitpid(k, 0)
    print("reaped", flush=True)
else:
    time.sleep(60)
"""


def test_fork_bomb_stops_at_pids_max(nano):
    res = nano.run(argv=["python3", "-c", "KILL = True\n" + FORK_BOMB], timeout=60)
    assert res["exit_code"] == 0, res
    n, err, reaped = res["stdout"].split()
    # pids.max is 256 for nano: init and python take two of them.
    assert 200 <= int(n) <= 254, res["stdout"]
    assert int(err) == 11  # EAGAIN from fork
    assert reaped == "reaped"
    assert only_init_left(nano)
    assert nano.sh("echo alive") == "alive\n"


def test_fork_bomb_cleaned_up_by_timeout(nano):
    """The bomb does not clean up after itself: the command's timeout kills
    the whole tree and the pids come back."""
    # Forking 250 pythons takes ~6 s at 0.25 vCPU.
    res = nano.run(argv=["python3", "-c", "KILL = False\n" + FORK_BOMB],
                   timeout=round(15 * SLOWDOWN))
    assert res["status"] == "timed_out", res
    assert 200 <= int(res["stdout"].split()[0]) <= 254, res
    assert only_init_left(nano)
    assert nano.sh("echo alive") == "alive\n"


BUSY = r"""
import os, time
t0, c0 = time.monotonic(), os.times()
while time.monotonic() - t0 < 1.5:
    pass
c1 = os.times()
print((c1.user + c1.system - c0.user - c0.system) / (time.monotonic() - t0))
"""


def test_cpu_quota_nano(nano):
    ratio = float(nano.sh(f"python3 -c '{BUSY}'"))
    assert ratio < 0.4, f"nano (0.25 vCPU) got {ratio:.2f} CPU"
    assert ratio > 0.1, f"nano got almost no CPU: {ratio:.2f}"


def cpu_controller_dir(sid):
    """The sandbox's cgroup that has the cpu controller's files (v1 or v2)."""
    for d in cgroup_dirs_named(sid):
        if os.path.exists(os.path.join(d, "cpu.stat")) and (
                os.path.exists(os.path.join(d, "cpu.max"))
                or os.path.exists(os.path.join(d, "cpu.cfs_quota_us"))):
            return d
    raise AssertionError(f"no cpu cgroup for {sid}: {cgroup_dirs_named(sid)}")


def cpu_quota(d):
    """(quota, period) in microseconds."""
    if os.path.exists(os.path.join(d, "cpu.max")):
        q, p = open(os.path.join(d, "cpu.max")).read().split()
        return int(q), int(p)
    return (int(open(os.path.join(d, "cpu.cfs_quota_us")).read()),
            int(open(os.path.join(d, "cpu.cfs_period_us")).read()))


def nr_throttled(d):
    for line in open(os.path.join(d, "cpu.stat")):
        k, v = line.split()
        if k == "nr_throttled":
            return int(v)
    raise AssertionError(f"no nr_throttled in {d}/cpu.stat")


def test_cpu_quota_medium(hutch):
    """medium is 2 vCPU: one busy thread is never held back by the quota.
    Measured by the kernel's throttling count, not by the CPU share the
    thread got, which a loaded host lowers whatever the quota says."""
    sb = hutch.create("--instance-type", "medium")
    try:
        d = cpu_controller_dir(sb.id)
        assert cpu_quota(d) == (200000, 100000), cpu_quota(d)
        before = nr_throttled(d)
        ratio = float(sb.sh(f"python3 -c '{BUSY}'"))
        assert ratio > 0.1, f"the busy thread got almost no CPU: {ratio:.2f}"
        assert nr_throttled(d) == before, "one thread was throttled under a 2 vCPU quota"
    finally:
        sb.rm()


def test_cpu_quota_nano_throttles(nano):
    """The other side of the same count: nano's 0.25 vCPU does hold a busy
    thread back."""
    d = cpu_controller_dir(nano.id)
    assert cpu_quota(d) == (25000, 100000), cpu_quota(d)
    before = nr_throttled(d)
    nano.sh(f"python3 -c '{BUSY}'")
    assert nr_throttled(d) > before


FILL = r"""
import errno, os
n = 0
try:
    with open(PATH, "wb") as f:
        chunk = bytes(1 << 20)
        for n in range(600):
            f.write(chunk)
            f.flush()
    print("WROTE", n + 1)
except OSError as e:
    print("FAILED", errno.errorcode.get(e.errno, e.errno), n, flush=True)
"""


@pytest.mark.parametrize("writer,path", [("dd", "/workspace/big"), ("python", "/workspace/big"),
                                         ("dd", "/tmp/big")])
def test_disk_fill_fails_and_sandbox_survives(nano_tmpfs, writer, path):
    """With --workspace tmpfs, nano has 2.5 GiB of tmpfs but 256 MiB of
    memory, and tmpfs pages are
    charged to the memory cgroup: 600 MiB cannot be written either way.
    The writer gets ENOSPC/ENOMEM or is OOM-killed; init must not be. dd
    matters: its resident set is smaller than init's, and the file's pages
    belong to no process, so the OOM killer once chose init."""
    nano = nano_tmpfs
    init = init_pid(nano)
    if writer == "dd":
        res = nano.run(argv=["dd", "if=/dev/zero", f"of={path}", "bs=1M", "count=600"],
                       timeout=60)
        if res["status"] == "exited":
            assert res["exit_code"] != 0, res
            assert re.search("No space left|Cannot allocate memory", res["stderr"]), res
    else:
        res = nano.run(argv=["python3", "-c", f"PATH = {path!r}\n" + FILL], timeout=60)
        assert "WROTE" not in res["stdout"], res
        if res["status"] == "exited":
            assert res["stdout"].startswith("FAILED"), res
            assert res["stdout"].split()[1] in ("ENOSPC", "ENOMEM"), res
    if res["status"] != "exited":
        assert res["status"] == "oom_killed", res
    assert init_pid(nano) == init, "init was killed: the sandbox crashed"
    r = nano.run(f"rm -f {path} && echo removed")
    assert r["stdout"] == "removed\n", r
    assert nano.sh("echo alive") == "alive\n"
    # And the memory really came back.
    res = nano.run(argv=["python3", "-c", "b = bytearray(128 << 20); print(len(b))"])
    assert res["exit_code"] == 0, res


def test_tmpfs_sizes_follow_instance_type(nano_tmpfs):
    out = nano_tmpfs.sh("df -k --output=target,size /workspace /tmp /home/appuser")
    sizes = {ln.split()[0]: int(ln.split()[1]) for ln in out.splitlines()[1:]}
    for target, kib in sizes.items():
        assert kib == 2560 * 1024, (target, kib)  # nano: 2.5 GiB


def test_commands_are_preferred_oom_victims(nano):
    """Commands start at oom_score_adj 500 so that init, whose resident set
    is larger than dd's, is never the OOM killer's choice; a command can
    go back to 0 but not below, nor touch init's value."""
    assert nano.sh("cat /proc/self/oom_score_adj") == "500\n"
    res = nano.run("echo -1000 > /proc/self/oom_score_adj")
    assert res["exit_code"] != 0, res
    res = nano.run("echo 1000 > /proc/1/oom_score_adj")
    assert res["exit_code"] != 0, res
    assert nano.sh("echo 0 > /proc/self/oom_score_adj && cat /proc/self/oom_score_adj") == "0\n"
    with open(f"/proc/{init_pid(nano)}/oom_score_adj") as f:
        assert f.read() == "0\n"


def test_init_and_commands_are_in_every_cgroup_of_the_sandbox(hutch):
    """init joins the sandbox's cgroups by itself (v1: each hierarchy's
    `tasks`, sent before GO once the supervisor made them after the clone;
    v2: clone3 CLONE_INTO_CGROUP), not by a later migration: seen from the host, init and a running command are listed in
    cgroup.procs of every directory the state records, and in no other; on
    a v1 host the commands sit in the freezer directory's child "cmds"
    (idle sleep freezes them, never init)."""
    sb = hutch.create("--instance-type", "nano")
    try:
        with open(os.path.join(hutch.rtdir, sb.id, "state.json")) as f:
            dirs = json.load(f)["cgroup"]["dirs"]
        assert dirs and all(os.path.basename(d) == "hutch-" + sb.id for d in dirs), dirs
        sb.run(argv=["sh", "-c", "sleep 300 & echo started"])
        assert wait_until(lambda: len(sb.host_pids()) >= 2, timeout=10)
        pids = sb.host_pids()
        assert init_pid(sb) in pids, pids
        init = init_pid(sb)
        for d in dirs:
            with open(os.path.join(d, "cgroup.procs")) as f:
                listed = {int(x) for x in f.read().split()}
            assert init in listed, (d, init, listed)
            cmds = os.path.join(d, "cmds", "cgroup.procs")
            if os.path.exists(cmds):  # v1 freezer: the commands' own child
                assert "freezer" in d, d
                with open(cmds) as f:
                    listed |= {int(x) for x in f.read().split()}
            assert set(pids) <= listed, (d, pids, listed)
        # the host side of each process agrees: its path ends in the sandbox's dir
        for pid in pids:
            with open(f"/proc/{pid}/cgroup") as f:
                lines = f.read().splitlines()
            for d in dirs:
                base = "/" + os.path.basename(d)
                assert any(ln.endswith(base) or (pid != init and ln.endswith(base + "/cmds"))
                           for ln in lines), (pid, d, lines)
    finally:
        sb.rm()


def test_rm_kills_a_process_put_into_the_sandboxs_cgroup_and_leaves_nothing(hutch):
    """The teardown removes each cgroup from its parent alone (rmdir; on v1
    the freezer's "cmds" child by name first) and opens the cgroup itself
    only when that is refused: a process of the host's moved into the
    sandbox's cgroup (v1: the freezer's own directory, beside "cmds") is
    found that way, killed, and `hutch rm` returns with no cgroup left."""
    sb = hutch.create("--instance-type", "nano")
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        with open(os.path.join(hutch.rtdir, sb.id, "state.json")) as f:
            dirs = json.load(f)["cgroup"]["dirs"]
        into = next((d for d in dirs if "/freezer/" in d), dirs[0])
        with open(os.path.join(into, "cgroup.procs"), "w") as f:
            f.write(str(stranger.pid))
        r = hutch("rm", sb.id)
        assert r.returncode == 0, r.stderr
        assert cgroup_dirs_named(sb.id) == [], cgroup_dirs_named(sb.id)
        assert stranger.wait(timeout=10) == -9
    finally:
        if stranger.poll() is None:
            stranger.kill()
            stranger.wait()
        hutch("rm", "-f", sb.id)


V2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")


def _tracer_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("TracerPid:"))


@pytest.mark.skipif(not V2, reason="v2's removal (v1's: the test above and test_budgets)")
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_v2_rm_removes_an_empty_cgroup_from_its_parent_alone(hutch, tmp_path):
    """On v2 an empty sandbox cgroup (init reaped: its pid namespace died
    with it) is removed from its parent's fd alone (one rmdir), as on v1
    (e52d72d): its own fd, cgroup.kill and the wait for "populated 0" only
    when the rmdir is refused (the test above)."""
    sb = hutch.create("--instance-type", "nano")
    with open(os.path.join(hutch.rtdir, sb.id, "state.json")) as f:
        name = os.path.basename(json.load(f)["cgroup"]["dirs"][0])
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    trace = tmp_path / "rm.strace"
    st = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=openat,openat2,unlinkat,rmdir",
                           "-o", str(trace), "-p", str(sup)])
    try:
        assert wait_until(lambda: _tracer_of(sup) != 0, 10 * SLOWDOWN, interval=0.05)
        assert hutch("rm", sb.id).returncode == 0
        st.wait(timeout=30 * SLOWDOWN)  # strace ends with the supervisor
    finally:
        if st.poll() is None:
            st.kill()
            st.wait()
    lines = trace.read_text().splitlines()
    assert [ln for ln in lines if f'"{name}", AT_REMOVEDIR) = 0' in ln], lines
    opened = [ln for ln in lines if f'{name}"' in ln and "unlinkat" not in ln or "cgroup.kill" in ln]
    assert opened == [], opened
    assert cgroup_dirs_named(sb.id) == []


def own_v1_dir(controller):
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if controller in ctrls.split(","):
                return os.path.normpath(f"/sys/fs/cgroup/{controller}/{path}")
    pytest.skip(f"no cgroup v1 {controller} hierarchy")


@pytest.mark.skipif(V2, reason="v1: the cgroups are made after init's clone")
def test_cgroup_refused_after_the_clone_ends_the_create_and_leaves_nothing(hutch):
    """On v1 the supervisor makes the cgroups after init's clone (while init
    makes its network namespace): the pids cgroup's mkdir refused there
    (EACCES, injected by strace on the pids hierarchy only) ends the create
    with the error naming the directory, and leaves no sandbox, cgroup,
    process or retired directory; the next create works."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    r = subprocess.run(["strace", "-f", "-o", "/dev/null", "-P", own_v1_dir("pids"),
                        "-e", "trace=mkdirat", "-e", "inject=mkdirat:error=EACCES",
                        HUTCH, "run", "--", "true"],
                       env=hutch.env, capture_output=True, timeout=120)
    err = r.stderr.decode()
    m = re.search(r"create cgroup '/sys/fs/cgroup/pids/[^']*hutch-([0-9a-f]{12})': "
                  r"Permission denied", err)
    assert r.returncode == 70 and m, (r.returncode, err)
    sid = m.group(1)
    assert hutch.ids() == []
    assert wait_until(lambda: cgroup_dirs_named(sid) == [], timeout=10), cgroup_dirs_named(sid)
    assert wait_until(lambda: retired_dirs(hutch.rtdir) == [], timeout=10)
    r = hutch("run", "--", "echo", "ok")
    assert r.returncode == 0 and r.stdout == b"ok\n", r.stderr


def test_own_cgroup_visible_read_only_inside(nano):
    """Tools size themselves from the instance type, as under docker: the
    sandbox's own cgroup at /sys/fs/cgroup (its cgroup namespace's root),
    read-only (issue 15). v1 hosts show no /sys/fs/cgroup at all."""
    res = nano.run("cat /proc/self/cgroup; cat /sys/fs/cgroup/memory.max "
                   "/sys/fs/cgroup/cpu.max /sys/fs/cgroup/pids.max; "
                   "echo max > /sys/fs/cgroup/memory.max")
    if not V2:
        assert "No such file" in res["stderr"], res
        return
    lines = res["stdout"].split("\n")
    assert lines[0] == "0::/", res  # nothing above its own cgroup
    assert lines[1:4] == ["268435456", "25000 100000", "256"], res
    assert res["exit_code"] != 0 and "Read-only file system" in res["stderr"], res
    # nothing above it, and nothing of the host's sysfs
    # (and lxcfs's CPU count, /sys/devices/system/cpu/online, where lxcfs
    # serves one: test_isolation.py)
    res = nano.run("ls /sys; ls /sys/fs")
    assert res["stdout"].split() in (["fs", "cgroup"], ["devices", "fs", "cgroup"]), res
