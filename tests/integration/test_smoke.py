# SPDX-License-Identifier: Apache-2.0
"""The README's first command works and leaves nothing behind."""
import os

from conftest import cgroup_dirs_named


def test_run_hello(hutch):
    r = hutch("run", "--", "python3", "-c", 'print("hello from the sandbox")')
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello from the sandbox\n"
    assert hutch.ids() == []


def test_run_exit_code_and_streams(hutch):
    r = hutch("run", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert r.returncode == 7
    assert r.stdout == b"out\n"
    assert r.stderr == b"err\n"


def test_create_exec_rm(hutch):
    sb = hutch.create()
    assert os.path.exists(sb.sock)
    assert oct(os.stat(sb.sock).st_mode & 0o777) == "0o600"
    r = hutch("exec", sb.id, "--", "id", "-u")
    assert r.returncode == 0 and r.stdout == b"1000\n"
    assert cgroup_dirs_named(sb.id)
    r = hutch("rm", sb.id)
    assert r.returncode == 0
    assert not os.path.exists(os.path.dirname(sb.sock))
    # at once: the supervisor removes them before its answer (a v2 host's
    # systemd scope too)
    assert cgroup_dirs_named(sb.id) == []
