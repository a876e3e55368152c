# SPDX-License-Identifier: Apache-2.0
"""Terminals (issue 12): exec -t/-it on a pty of the sandbox's own devpts,
driven here from a real pty (python's pty module) as a user's terminal
would: shells, the Python REPL, ^C, ^D, exit codes, window size at start
and after a resize, the caller's terminal settings restored, and TIOCSTI /
TIOCLINUX still refused on the sandbox's pty."""
import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

from conftest import HUTCH, wait_until


class Term:
    """The hutch CLI on a pty of ours: its controlling terminal. user: an
    ordinary user (test_rootless.User) whose terminal it is and who runs
    the CLI."""

    def __init__(self, hutch, *args, rows=24, cols=80, user=None):
        self.master, self.slave = os.openpty()
        as_user = {}
        if user:
            os.fchown(self.slave, user.uid, user.gid)  # as login makes it
            as_user = dict(user=user.uid, group=user.gid, extra_groups=[], cwd="/")
        self.resize(rows, cols, signal_cli=False)
        # (tcgetattr of the master reads the slave's settings: the
        # kernel's mode ioctls on a pty master act on its slave, which
        # wait() closes.)
        self.before = termios.tcgetattr(self.slave)

        def ctty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            # A shell's foreground job: ^C and Ctrl-backslash act, even when this run
            # inherited them ignored (a job started with & by a
            # non-interactive sh, as a CI step can be).
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGQUIT, signal.SIG_DFL)
        self.p = subprocess.Popen([HUTCH, *args], stdin=self.slave, stdout=self.slave,
                                  stderr=self.slave, env={**hutch.env, "TERM": "xterm"},
                                  start_new_session=True, preexec_fn=ctty, **as_user)
        self.out = b""

    def resize(self, rows, cols, signal_cli=True):
        # The kernel sends SIGWINCH to the terminal's foreground group.
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data):
        os.write(self.master, data)

    def expect(self, pattern, timeout=20):
        """Read until pattern (bytes regex) matches what came since the
        last match; return the match."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.out)
            if m:
                self.out = self.out[m.end():]
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no %r in %r" % (pattern, self.out[-500:]))
            r, _, _ = select.select([self.master], [], [], left)
            if r:
                try:
                    self.out += os.read(self.master, 65536)
                except OSError:  # EIO: every slave closed
                    raise AssertionError("no %r in %r (EOF)" % (pattern, self.out[-500:]))

    def wait(self, timeout=30):
        deadline = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < deadline:
            r, _, _ = select.select([self.master], [], [], 0.05)
            if r:
                try:
                    self.out += os.read(self.master, 65536)
                except OSError:
                    pass
        rc = self.p.wait(timeout=1)
        # What the CLI wrote last may still be on its way through the
        # pty's buffers when it has exited: with our end of the slave
        # closed too, the master reads it all, then EIO (the end).
        if self.slave is not None:
            os.close(self.slave)
            self.slave = None
        while time.monotonic() < deadline + 10:
            r, _, _ = select.select([self.master], [], [], 1)
            if not r:
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:
                break
            if not data:
                break
            self.out += data
        return rc

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        os.close(self.master)
        if self.slave is not None:
            os.close(self.slave)


@pytest.fixture
def term(hutch):
    made = []

    def make(*args, **kw):
        t = Term(hutch, *args, **kw)
        made.append(t)
        return t
    yield make
    for t in made:
        t.close()


def test_t_without_a_terminal_is_a_clear_error(hutch, sandbox):
    r = subprocess.run([HUTCH, "exec", "-t", sandbox.id, "--", "true"], env=hutch.env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert r.returncode == 64 and b"not a terminal" in r.stderr


def test_bash_session(sandbox, term):
    t = term("exec", "-it", sandbox.id, "--", "bash", "--norc", "--noprofile", "-i", rows=31,
             cols=101)
    t.expect(rb"\$ ")
    t.send(b"PS1='P> '; tty; stty size\r")
    t.expect(rb"/dev/pts/\d+\r\n")
    t.expect(rb"31 101\r\n")
    # the window follows a resize
    t.resize(42, 123)
    t.send(b"stty size\r")
    t.expect(rb"42 123\r\n")
    # ^C stops the foreground command and returns to the prompt
    t.send(b"sleep 100\r")
    assert wait_until(lambda: sandbox.run("pgrep -x sleep")["exit_code"] == 0)
    t.send(b"\x03")
    t.send(b"echo rc=$?\r")
    t.expect(rb"rc=130\r\n")
    # a full-screen-ish program sees a terminal
    t.send(b"test -t 0 && test -t 1 && echo both-ttys; echo TERM=$TERM\r")
    t.expect(rb"both-ttys\r\nTERM=xterm\r\n")
    t.send(b"exit 3\r")
    assert t.wait() == 3
    assert termios.tcgetattr(t.master) == t.before  # raw mode undone


def test_ctrl_d_ends_the_shell_with_0(sandbox, term):
    t = term("exec", "-it", sandbox.id, "--", "sh")
    t.expect(rb"\$ ")  # the prompt: the shell reads its terminal now
    t.send(b"echo ready\r")
    t.expect(rb"\r\nready\r\n")
    t.send(b"\x04")
    assert t.wait() == 0
    assert termios.tcgetattr(t.master) == t.before


def test_python_repl(sandbox, term):
    t = term("exec", "-it", sandbox.id, "--", "python3", "-i", "-q")
    t.expect(rb">>> ")
    t.send(b"6*7\r")
    # ^D only once the next prompt is out: readline puts the terminal in
    # its own mode for each line, and an EOF typed between two lines (in
    # canonical mode, nobody reading) is lost on any terminal
    t.expect(rb"42\r\n>>> ")
    t.send(b"\x04")
    assert t.wait() == 0


def test_login_shell_without_a_command(sandbox, term):
    t = term("exec", "-it", sandbox.id)
    t.expect(rb"\$ ")
    t.send(b"id -un; shopt -q login_shell && echo login-shell; exit\r")
    t.expect(rb"appuser\r\n")
    t.expect(rb"login-shell\r\n")
    assert t.wait() == 0


def test_t_alone_gives_output_a_terminal_without_reading_stdin(sandbox, term):
    t = term("exec", "-t", sandbox.id, "--", "sh", "-c", "test -t 1 && echo out-tty; exit 4")
    t.expect(rb"out-tty\r\n")
    assert t.wait() == 4


@pytest.mark.parametrize("req", ["TIOCSTI", "TIOCLINUX"])
def test_tiocsti_and_tioclinux_stay_refused_on_the_pty(sandbox, term, req):
    code = ("import fcntl, termios, errno\n"
            "req = getattr(termios, '%s', 0x541C)\n"
            "try:\n"
            "    fcntl.ioctl(0, req, b'x')\n"
            "    print('ALLOWED')\n"
            "except OSError as e:\n"
            "    print('refused', errno.errorcode[e.errno])\n" % req)
    t = term("exec", "-t", sandbox.id, "--", "python3", "-c", code)
    m = t.expect(rb"(ALLOWED|refused \w+)")
    assert m.group(1).startswith(b"refused"), m.group(1)
    assert t.wait() == 0


def test_hang_up_of_the_cli_kills_the_session(sandbox, term):
    t = term("exec", "-it", sandbox.id, "--", "sh", "-c", "echo up; sleep 1000")
    t.expect(rb"up\r\n")
    t.p.send_signal(signal.SIGTERM)
    assert t.wait() == 128 + signal.SIGTERM
    assert termios.tcgetattr(t.master) == t.before
    assert wait_until(lambda: sandbox.run("pgrep -x sleep")["exit_code"] == 1, timeout=10)


def test_run_refuses_tty(sandbox):
    status, res = sandbox.api("POST", "/v1/run", {"cmd": "true", "tty": {}})
    assert status == 400 and "POST /exec" in res["error"]["message"]


def bash(term, sandbox, **kw):
    t = term("exec", "-it", sandbox.id, "--", "bash", "--norc", "--noprofile", "-i", **kw)
    t.expect(rb"\$ ")
    t.send(b"PS1='P> '\r")
    t.expect(rb"P> ")
    return t


def test_tab_completion_in_bash(sandbox, term):
    t = bash(term, sandbox)
    # readline completes the command name on the sandbox's terminal: the
    # completed rest is echoed back before Enter
    t.send(b"ech\t")
    t.expect(rb"ech(\x1b\[[0-9;?]*[a-zA-Z])*o ")
    t.send(b"completed-$((6*7))\r")
    t.expect(rb"[\r\n]completed-42\r\n")  # the output, not the echoed line
    t.send(b"exit\r")
    assert t.wait() == 0
    assert termios.tcgetattr(t.master) == t.before


def test_top_is_shown_and_quits_with_q(sandbox, term):
    t = term("exec", "-it", sandbox.id, "--", "top", "-d", "0.5", rows=30, cols=100)
    t.expect(rb"load average")  # its full-screen header
    t.expect(rb"PID +USER")      # the task list
    t.send(b"q")
    assert t.wait() == 0
    assert termios.tcgetattr(t.master) == t.before


def test_ctrl_z_job_control_in_bash(sandbox, term):
    t = bash(term, sandbox)
    t.send(b"sleep 100\r")
    assert wait_until(lambda: sandbox.run("pgrep -x sleep")["exit_code"] == 0)
    t.send(b"\x1a")  # ^Z: the terminal stops the foreground job
    t.expect(rb"Stopped\s+sleep 100")
    t.expect(rb"P> ")
    st = sandbox.run("ps -o stat= -C sleep")["stdout"].strip()
    assert st.startswith("T"), st
    t.send(b"jobs\r")
    t.expect(rb"\[1\]\+\s+Stopped\s+sleep 100\r\n")
    t.send(b"fg\r")
    t.expect(rb"sleep 100\r\n")
    assert wait_until(lambda: sandbox.run("ps -o stat= -C sleep")["stdout"].strip()[:1] == "S")
    t.send(b"\x03")  # ^C ends it in the foreground again
    t.send(b"echo rc=$?\r")
    t.expect(rb"rc=130\r\n")
    assert sandbox.run("pgrep -x sleep")["exit_code"] == 1
    t.send(b"exit 0\r")
    assert t.wait() == 0
    assert termios.tcgetattr(t.master) == t.before


def test_terminal_restored_after_sigint_to_the_cli(sandbox, term):
    # ^C typed on the terminal goes to the sandbox (raw mode); a SIGINT
    # sent to hutch itself ends the session, and the modes come back
    t = term("exec", "-it", sandbox.id, "--", "sh", "-c", "echo up; sleep 1000")
    t.expect(rb"up\r\n")
    assert termios.tcgetattr(t.master) != t.before  # raw while it runs
    t.p.send_signal(signal.SIGINT)
    assert t.wait() == 128 + signal.SIGINT
    assert termios.tcgetattr(t.master) == t.before
    assert wait_until(lambda: sandbox.run("pgrep -x sleep")["exit_code"] == 1, timeout=10)


def test_terminal_restored_after_kill_9_of_the_supervisor(hutch, term):
    sb = hutch.create()
    try:
        t = term("exec", "-it", sb.id, "--", "sh", "-c", "echo up; sleep 1000")
        t.expect(rb"up\r\n")
        assert termios.tcgetattr(t.master) != t.before
        st = json.loads(hutch("inspect", sb.id).stdout)
        os.kill(st["supervisor_pid"], signal.SIGKILL)
        rc = t.wait()
        assert rc == 66, (rc, t.out)
        t.expect(rb"hutch: .*(sandbox|supervisor)", timeout=5)  # what it said last
        assert termios.tcgetattr(t.master) == t.before
    finally:
        hutch("rm", "-f", sb.id)
