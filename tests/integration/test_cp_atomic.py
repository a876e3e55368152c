# SPDX-License-Identifier: Apache-2.0
"""hutch cp ID:PATH LOCAL replaces LOCAL only with a complete copy (issue 18
#2): a missing source, a killed CLI or a sandbox dying mid-copy leave an
existing LOCAL exactly as it was, and no temporary file behind."""
import json
import os
import signal
import subprocess
import time

from conftest import HUTCH, wait_until

OLD = b"the old contents, which must survive\n"


def local_file(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    f = d / "existing.txt"
    f.write_bytes(OLD)
    os.chmod(f, 0o640)
    return d, f


def assert_untouched(d, f, ino):
    assert f.read_bytes() == OLD
    st = os.stat(f)
    assert st.st_ino == ino and st.st_mode & 0o777 == 0o640
    assert sorted(os.listdir(d)) == ["existing.txt"], os.listdir(d)


def wchar(pid):
    with open(f"/proc/{pid}/io") as fh:
        for line in fh:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def start_copy_and_stop_it(hutch, sid, dest):
    """A copy of the sandbox's 1 GiB file, stopped once it has written part
    of it (it cannot finish while stopped)."""
    p = subprocess.Popen([HUTCH, "cp", f"{sid}:big", str(dest)], env=hutch.env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert wait_until(lambda: p.poll() is not None or wchar(p.pid) > (1 << 20), timeout=30, interval=0.001)
    os.kill(p.pid, signal.SIGSTOP)
    assert p.poll() is None, "the copy ended before it could be interrupted"
    return p


def test_cp_out_of_a_missing_file_keeps_local(sandbox, hutch, tmp_path):
    d, f = local_file(tmp_path)
    ino = os.stat(f).st_ino
    r = hutch("cp", f"{sandbox.id}:no-such-file", str(f))
    assert r.returncode == 1, r
    assert b"no-such-file" in r.stderr
    assert_untouched(d, f, ino)
    # Into a directory, under the remote name: the same.
    r = hutch("cp", f"{sandbox.id}:existing.txt", str(d))
    assert r.returncode == 1, r
    assert_untouched(d, f, ino)


def test_cp_out_replaces_local_whole_and_keeps_its_mode(sandbox, hutch, tmp_path):
    d, f = local_file(tmp_path)
    sandbox.sh("printf new > /workspace/new.txt")
    r = hutch("cp", f"{sandbox.id}:new.txt", str(f))
    assert r.returncode == 0, r
    assert f.read_bytes() == b"new"
    assert os.stat(f).st_mode & 0o777 == 0o640
    assert sorted(os.listdir(d)) == ["existing.txt"]
    # A symbolic link keeps pointing at the file, which is replaced.
    link = d / "link"
    os.symlink("existing.txt", link)
    sandbox.sh("printf newer > /workspace/new.txt")
    assert hutch("cp", f"{sandbox.id}:new.txt", str(link)).returncode == 0
    assert os.readlink(link) == "existing.txt" and f.read_bytes() == b"newer"
    # A device is written to, not replaced.
    assert hutch("cp", f"{sandbox.id}:new.txt", "/dev/null").returncode == 0
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_cp_out_killed_mid_copy_keeps_local(sandbox, hutch, tmp_path):
    sandbox.sh("truncate -s 1G /workspace/big")
    d, f = local_file(tmp_path)
    ino = os.stat(f).st_ino
    p = start_copy_and_stop_it(hutch, sandbox.id, f)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert_untouched(d, f, ino)


def test_cp_out_of_a_sandbox_dying_mid_copy_keeps_local(hutch, tmp_path):
    sb = hutch.create()
    sb.sh("truncate -s 1G /workspace/big")
    d, f = local_file(tmp_path)
    ino = os.stat(f).st_ino
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    p = start_copy_and_stop_it(hutch, sb.id, f)
    os.kill(sup, signal.SIGKILL)
    assert wait_until(lambda: not os.path.exists(f"/proc/{sup}"), timeout=10)
    os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1, (p.returncode, err)
    assert b"ended early" in err, err
    assert_untouched(d, f, ino)
    hutch("gc")
