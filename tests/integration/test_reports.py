# SPDX-License-Identifier: Apache-2.0
"""Reports that tell the truth (issue 18 #5): exec whose supervisor dies
under it exits 66 saying so, not 70 "bad HTTP answer"; an ended sandbox is
said one way everywhere: "was deleted at", "crashed at", "expired at"."""
import json
import os
import signal
import subprocess

from conftest import HUTCH, wait_until


def exec_sleeping(hutch, sb):
    """hutch exec of a command that has started and sleeps."""
    p = subprocess.Popen([HUTCH, "exec", sb.id, "--", "sh", "-c", "echo started; sleep 60"],
                         env=hutch.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"started\n"
    return p


def test_exec_whose_supervisor_dies_exits_66(hutch):
    sb = hutch.create()
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    p = exec_sleeping(hutch, sb)
    os.kill(sup, signal.SIGKILL)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 66, (p.returncode, err)
    assert b"bad HTTP answer" not in err, err
    assert f"sandbox {sb.id} is gone: its supervisor died".encode() in err, err
    hutch("gc")


def test_a_crashed_sandbox_is_said_crashed_at(hutch):
    sb = hutch.create()
    init = json.loads(hutch("inspect", sb.id).stdout)["init_pid"]
    # A request waiting on the sandbox when init dies gets the 410.
    p = exec_sleeping(hutch, sb)
    os.kill(init, signal.SIGKILL)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 66, (p.returncode, err)
    assert f"sandbox {sb.id} crashed at ".encode() in err, err
    # The CLI, later, from the record.
    assert wait_until(lambda: not os.path.exists(sb.sock), timeout=15)
    r = hutch("exec", sb.id, "true")
    assert r.returncode == 66, r
    assert f"sandbox {sb.id} crashed at ".encode() in r.stderr, r.stderr
    assert b"was crashed" not in r.stderr + err, (r.stderr, err)


def test_a_deleted_sandbox_is_said_was_deleted_at(hutch):
    sb = hutch.create()
    assert hutch("rm", sb.id).returncode == 0
    r = hutch("exec", sb.id, "true")
    assert r.returncode == 66, r
    assert f"sandbox {sb.id} was deleted at ".encode() in r.stderr, r.stderr
