# SPDX-License-Identifier: Apache-2.0
"""kill -9 of the CLI during create leaves a working sandbox or nothing:
nothing when the supervisor saw its creator gone before the id was handed
over, a working sandbox when the CLI died after receiving it."""
import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import subprocess
import time

import pytest

from conftest import (HUTCH, SLOWDOWN, cgroups_gone, proc_children, proc_comm, proc_stat,
                      supervisor_alive, wait_until)


def settled(hutch):
    """Every sandbox dir belongs to a running supervisor, or to none (the CLI
    died before the supervisor took over: gc's job)."""
    for sid in hutch.ids():
        path = os.path.join(hutch.rtdir, sid, "state.json")
        try:
            with open(path) as f:
                if json.load(f).get("status") == "running":
                    continue
        except (OSError, ValueError):
            pass
        if supervisor_alive(hutch, sid):
            return False
    return True


@pytest.mark.parametrize("delay_ms", [0, 1, 3, 6, 10, 20, 40])
def test_kill_cli_during_create(hutch, delay_ms):
    p = hutch.popen("create")
    # The delay is what varies between runs: the assertion holds whatever
    # point of create the kill lands on.
    time.sleep(delay_ms / 1000)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert wait_until(lambda: settled(hutch), timeout=20)
    r = hutch("gc")
    assert r.returncode == 0
    for sid in hutch.ids():
        r = hutch("exec", sid, "--", "true")
        if r.returncode == 66:
            # Its creator died before it received the id: the supervisor
            # deletes such a sandbox by itself (issue 18 #3).
            assert b"deleted" in r.stderr, r.stderr
            assert wait_until(lambda: sid not in hutch.ids(), timeout=10)
        else:
            assert r.returncode == 0, r.stderr
            assert hutch("rm", sid).returncode == 0
        assert cgroups_gone(sid)
    # No half-made directory either.
    assert [d for d in os.listdir(hutch.rtdir) if d.startswith(".new-")] == [] if os.path.isdir(hutch.rtdir) else True


def exec_with_the_lock_held_a_moment(hutch, sid):
    """hutch exec SID -- true while the test holds the sandbox's lock for
    0.3 s, as a dying init may hold it a moment after its supervisor."""
    import threading
    fd = os.open(os.path.join(hutch.rtdir, sid, "lock"), os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        release = threading.Timer(0.3, fcntl.flock, (fd, fcntl.LOCK_UN))
        release.start()
        try:
            return hutch("exec", sid, "--", "true")
        finally:
            release.join()
    finally:
        os.close(fd)


def test_exec_refused_by_a_dead_supervisor_says_gone(hutch):
    """A supervisor killed before exec connects leaves its socket file, so
    the connection is refused, while its dying init may still hold the
    sandbox's lock a moment: exec waits for the lock and says the sandbox
    is gone (66), not an internal error (70, "Connection refused"; seen as
    a flake of test_faults). The test holds the lock itself for 0.3 s in
    place of the dying init."""
    sb = hutch.create("--instance-type", "nano")
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    os.kill(sup, signal.SIGKILL)
    assert wait_until(lambda: not supervisor_alive(hutch, sb.id), 10)
    assert os.path.exists(sb.sock)  # a socket without a listener: refused
    r = exec_with_the_lock_held_a_moment(hutch, sb.id)
    assert r.returncode == 66, r.stderr
    assert b"gone" in r.stderr and b"Connection refused" not in r.stderr, r.stderr
    # And with the lock held past the wait, the refusal is reported as it
    # is (a live-looking sandbox whose supervisor does not answer).
    fd = os.open(os.path.join(hutch.rtdir, sb.id, "lock"), os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        r = hutch("exec", sb.id, "--", "true")
        # rm cannot tell it dead either: it says so and removes nothing
        rm = hutch("rm", sb.id)
    finally:
        os.close(fd)
    assert r.returncode == 70 and b"cannot connect" in r.stderr, r.stderr
    assert rm.returncode == 70 and b"is alive but does not answer on '" in rm.stderr, rm.stderr
    assert b"kill its supervisor (supervisor_pid of hutch inspect) and run 'hutch gc'" \
        in rm.stderr, rm.stderr
    assert hutch.ids() == [sb.id]
    assert hutch("gc").returncode == 0
    assert hutch.ids() == []


def test_exec_lost_to_an_expired_sandbox_says_it_as_every_verb(hutch):
    """A request the sandbox no longer answers, with a tombstone already
    written (its supervisor's TTL end writes the tombstone before the rest
    of its end; here the supervisor is killed after and the tombstone
    written in its place): exec says why and when as every verb does,
    "expired at T (ttl reached)" (hutch_cli_gone()); hutch_cli_lost() made
    its own message without "(ttl reached)" before."""
    sb = hutch.create("--instance-type", "nano")
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    os.kill(sup, signal.SIGKILL)
    assert wait_until(lambda: not supervisor_alive(hutch, sb.id), 10)
    os.makedirs(os.path.join(hutch.rtdir, ".gone"), exist_ok=True)
    with open(os.path.join(hutch.rtdir, ".gone", sb.id), "w") as f:
        f.write("expired %d\n" % int(time.time()))
    r = exec_with_the_lock_held_a_moment(hutch, sb.id)
    assert r.returncode == 66, r.stderr
    assert b"sandbox %s expired at " % sb.id.encode() in r.stderr, r.stderr
    assert r.stderr.endswith(b" (ttl reached)\n"), r.stderr
    assert hutch("gc").returncode == 0
    assert hutch.ids() == []


def kill_supervisor(hutch, sb):
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    os.kill(sup, signal.SIGKILL)
    assert wait_until(lambda: not supervisor_alive(hutch, sb.id), 10)


@pytest.mark.parametrize("remover", ["gc", "rm"])
def test_a_killed_supervisors_sandbox_removed_keeps_its_record(hutch, remover):
    """A sandbox whose supervisor was killed -9, then removed by hutch gc
    (or rm), ends as one that ended by itself: a tombstone that inspect,
    exec and the record verbs report (66, why and when), its journal and
    log kept beside it with a last line saying what happened. Before,
    gc deleted them without a record: every verb said 'no sandbox'."""
    sb = hutch.create("--instance-type", "nano")
    assert sb.sh("echo kept") == "kept\n"
    kill_supervisor(hutch, sb)
    r = hutch(remover, sb.id) if remover == "rm" else hutch("gc")
    assert r.returncode == 0, r.stderr
    assert hutch.ids() == []
    words = (b"ended: its supervisor died (killed or crashed) and hutch gc removed it at "
             if remover == "gc" else b"was deleted at ")
    r = hutch("inspect", sb.id)
    assert r.returncode == 66 and f"hutch: sandbox {sb.id} ".encode() + words in r.stderr, r
    assert json.loads(r.stdout)["status"] == ("supervisor-died" if remover == "gc" else "deleted")
    r = hutch("exec", sb.id, "--", "true")
    assert r.returncode == 66 and words in r.stderr, r
    r = hutch("journal", sb.id)
    assert r.returncode == 0 and b"echo kept" in r.stdout, r
    r = hutch("events", sb.id)
    assert r.returncode == 0, r
    last = r.stdout.decode().splitlines()[-1]
    assert last.endswith(f"{remover}: its supervisor was gone (killed or crashed); what it left "
                         "is removed"), r.stdout
    r = hutch("net-log", sb.id)  # network none keeps none: gone, said why
    assert r.returncode == 66 and words in r.stderr, r
    assert b"no egress log of it is kept" in r.stderr, r
    # A second gc finds nothing more and keeps the record
    r = hutch("gc")
    assert r.returncode == 0 and b"removed 0 " in r.stdout, r
    assert hutch("journal", sb.id).returncode == 0


def test_create_whose_supervisor_dies_while_another_holds_its_answer(hutch):
    """The CLI waits for the supervisor's answer on a socket whose other
    end the supervisor's children inherit (init until it closes what it
    inherited, a disk maker): a supervisor killed then left the CLI waiting
    for an EOF that never came (main's binary: the create hangs while the
    holder lives). HUTCH_TEST_SUPERVISOR_STOP: the supervisor forks a
    holder of that socket and stops itself; killed there, the create ends
    at once, 70, naming the supervisor's death and its log, and nothing is
    left (the CLI reaps it as gc does: a tombstone, its log kept)."""
    env = hutch.env
    hutch.env = dict(env, HUTCH_TEST_SUPERVISOR_STOP="1")
    try:
        p = hutch.popen("create")
    finally:
        hutch.env = env
    holder, sup = None, []
    try:
        assert wait_until(lambda: (sup.__setitem__(slice(None), proc_children(p.pid)) or sup)
                          and (proc_stat(sup[0]) or ["?"])[0] == "T", 30), "no stopped supervisor"
        holders = proc_children(sup[0])
        assert len(holders) == 1
        holder = holders[0]
        assert wait_until(lambda: proc_comm(holder) == "hutch-test-hold", 10)
        os.kill(sup[0], signal.SIGKILL)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 70, err
        assert b"supervisor (pid %d) died during setup" % sup[0] in err, err
        sid = err.split(b"hutch events ")[1][:12].decode()
        assert b"what it left is removed" in err, err
        assert proc_comm(holder) == "hutch-test-hold"  # still holds it
        assert sid not in hutch.ids()
        r = hutch("events", sid)
        assert r.returncode == 0 and b"its supervisor was gone" in r.stdout, r
        r = hutch("inspect", sid)
        assert r.returncode == 66 and b"supervisor died" in r.stderr, r.stderr
    finally:
        for pid in sup[:1] + [holder] * bool(holder):
            if proc_comm(pid):
                os.kill(pid, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
            p.wait()



def hold_sockets(pid):
    """Copies of every socket process pid holds (pidfd_getfd), in this
    process: the other ends a run waits on stay open after pid dies, as
    when a process its supervisor forked (init until it closes what it
    inherited, a disk maker) holds them."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    held = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    continue
            except OSError:
                continue
            copy = libc.syscall(438, pidfd, int(fd), 0)  # pidfd_getfd
            assert copy >= 0, os.strerror(ctypes.get_errno())
            held.append(copy)
    finally:
        os.close(pidfd)
    return held


def line_within(f, timeout):
    """One line of the pipe f, or b"" if none came within timeout."""
    ready, _, _ = select.select([f], [], [], timeout)
    return f.readline() if ready else b""


@contextlib.contextmanager
def run_with_its_sockets_held(hutch, *args):
    """hutch run ARGS, whose command prints "started" first; its supervisor's
    sockets held by the test once it did: (the run, its sandbox, its
    supervisor's pid), the copies closed and the run killed at the end."""
    p = hutch.popen("run", *args, stdin=subprocess.PIPE)
    held = []
    try:
        assert line_within(p.stdout, 30 * SLOWDOWN) == b"started\n", "the command did not start"
        [sid] = hutch.ids()
        sup = json.loads(hutch("inspect", sid).stdout)["supervisor_pid"]
        held = hold_sockets(sup)
        yield p, sid, sup
    finally:
        for fd in held:
            os.close(fd)
        if p.poll() is None:
            p.kill()
            p.wait()


def test_run_whose_supervisor_dies_while_another_holds_its_stream(hutch):
    """hutch run waited for its stream's end and then, after "D", for its
    hand-over socket's EOF: a supervisor killed -9 while another process
    held those sockets' other ends kept the run waiting for ever (main's
    binary: communicate() times out). The run now waits on a pidfd of the
    supervisor too: it ends at once, 66, saying the supervisor died, and
    reaps what it left as gc does (a tombstone, its log kept)."""
    with run_with_its_sockets_held(hutch, "--", "sh", "-c",
                                   "echo started; exec sleep 100") as (p, sid, sup):
        os.kill(sup, signal.SIGKILL)
        out, err = p.communicate(timeout=30 * SLOWDOWN)
        assert p.returncode == 66, err
        assert f"sandbox {sid} is gone: its supervisor died".encode() in err, err
        assert f"supervisor (pid {sup}) died before the run ended (killed or crashed); " \
            f"what it left is removed; its log: hutch events {sid}".encode() in err, err
        assert hutch.ids() == []
        r = hutch("inspect", sid)
        assert r.returncode == 66 and b"supervisor died" in r.stderr, r.stderr


def test_run_ends_when_its_supervisor_ended_while_another_holds_its_socket(hutch):
    """The run's end: "D", then its supervisor deletes the sandbox and exits;
    the socket's EOF never came while another process held its other end
    (main's binary: communicate() times out). The supervisor's exit ends
    the wait; the sandbox was deleted whole, so nothing is said."""
    with run_with_its_sockets_held(hutch, "-i", "--", "sh", "-c",
                                   "echo started; read x; echo got $x") as (p, sid, sup):
        out, err = p.communicate(b"go\n", timeout=30 * SLOWDOWN)
        assert (p.returncode, out, err) == (0, b"got go\n", b""), err
        assert hutch.ids() == [] and not proc_comm(sup)


def test_gc_during_a_failed_create_writes_no_tombstone(hutch):
    """A create that fails before its supervisor (here: an lxcfs that is
    not there) removes its state dir, then lets its lock go. The other
    order (main's before this) let a gc in between reap the dir as a dead
    sandbox's: a "supervisor-died" tombstone, and its log, for an id never
    handed out. HUTCH_TEST_CREATE_FAIL_STOP stops the CLI once its lock is
    let go; gc runs there."""
    env = hutch.env
    hutch.env = dict(env, HUTCH_LXCFS="/nonexistent/lxcfs", HUTCH_TEST_CREATE_FAIL_STOP="1")
    try:
        p = hutch.popen("create")
    finally:
        hutch.env = env
    try:
        assert wait_until(lambda: (proc_stat(p.pid) or ["?"])[0] == "T", 30), "the CLI never stopped"
        r = hutch("gc")
        assert r.returncode == 0, r.stderr
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 70 and b"/nonexistent/lxcfs" in err, err
        gone = os.path.join(hutch.rtdir, ".gone")
        assert not os.path.isdir(gone) or os.listdir(gone) == [], os.listdir(gone)
        assert hutch.ids() == []
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _init_before_its_pdeathsig():
    """(pid, parent) of a process in a pid namespace not ours stopped at
    the entry of prctl(PR_SET_PDEATHSIG, SIGKILL) (157 0x1 0x9): an init
    held there by strace's delay, or None."""
    ours = os.readlink("/proc/self/ns/pid")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/syscall") as f:
                if not f.read().startswith("157 0x1 0x9 "):
                    continue
            if os.readlink(f"/proc/{pid}/ns/pid") != ours:
                return int(pid), int(proc_stat(int(pid))[1])
        except (OSError, TypeError):
            pass
    return None


def test_supervisor_killed_before_init_s_pdeathsig(hutch):
    """A supervisor killed after init's clone, before init has set its
    PR_SET_PDEATHSIG (strace holds init 3 s at that prctl's entry, its
    second, the first a PR_SET_NAME): init, whose parent-death signal can
    no longer come, reads EOF on its socket while it waits for GO and
    exits, its pid namespace with it, before anything ran in the sandbox.
    (init's getppid() check there could never fire: 0 in a new pid
    namespace, parent alive or not; init/init.c.)"""
    assert hutch("run", "--", "true").returncode == 0  # the stock, the template
    st = subprocess.Popen(["strace", "-f", "-q", "-o", "/dev/null", "-e", "trace=prctl",
                           "-e", "inject=prctl:delay_enter=3000000:when=2", HUTCH, "create"],
                          env=hutch.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    found = []
    try:
        assert wait_until(lambda: found.append(_init_before_its_pdeathsig()) or found[-1], 60), \
            "no init stopped at its PR_SET_PDEATHSIG"
        init, sup = found[-1]
        os.kill(sup, signal.SIGKILL)
        # init runs on after the delay: its pid gone (reaped by whoever
        # took it) or a zombie, within the delay and a margin
        assert wait_until(lambda: (proc_stat(init) or ["Z"])[0] == "Z", 15 * SLOWDOWN), \
            proc_stat(init)
    finally:
        if found and found[-1]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(found[-1][0], signal.SIGKILL)  # a failure's init
        st.terminate()  # detaches from what is left
        try:
            st.wait(30)
        except subprocess.TimeoutExpired:
            st.kill()
            st.wait()
        st.stdout.close()
        st.stderr.close()
    hutch("gc")
