# SPDX-License-Identifier: Apache-2.0
"""--preserve-fds N (issue 19): the caller's fds 3 .. 3+N-1 are the
container's process's 3, 4, ... (podman's conmon passes them for socket
activation). Bytes written into a passed pipe come out of it, both ways.
"""
import json
import os
import subprocess

import pytest

from conftest import HUTCH, wait_until
from test_oci import _root_base, oci, pytestmark  # noqa: F401 (fixtures, skip mark)

PAYLOAD = bytes(range(256)) * 64 + b"end\n"


def oci_with_fds(oci, fds, *args):
    """hutch oci ARGS with fds[i] as its fd 3+i (a shell places them)."""
    redir = " ".join(f"{3 + i}>&{fd}" for i, fd in enumerate(fds))
    closing = " ".join(f"{fd}>&-" for fd in fds)
    script = f'exec "$0" "$@" {redir} {closing}'
    # A file, not a pipe: the supervisor keeps the container's stdio.
    with open(os.path.join(oci.tmp, "fds.out"), "w+b") as out:
        r = subprocess.run(["bash", "-c", script, HUTCH, "oci", "--root", oci.root, *args],
                           pass_fds=fds, stdout=out, stderr=subprocess.STDOUT, env=oci.env,
                           timeout=60, stdin=subprocess.DEVNULL)
        out.seek(0)
        r.stderr = out.read()
    return r


def close_all(*fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def high(fd, at):
    os.dup2(fd, at)
    os.close(fd)
    return at


@pytest.mark.parametrize("verb", ["create", "run"])
def test_preserved_fds_reach_the_process(oci, verb):
    # Pipe a: the container writes into its fd 3; pipe b: it reads its fd 4.
    ar, aw = os.pipe()
    br, bw = os.pipe()
    aw, br = high(aw, 60), high(br, 61)
    b = oci.bundle(["sh", "-c", "echo start >&3; cat <&4 >&3; ls /proc/self/fd > /dev/null"])
    try:
        args = ["-d"] if verb == "run" else []
        r = oci_with_fds(oci, [aw, br], verb, *args, "--bundle", b, "--preserve-fds", "2", "f1")
        assert r.returncode == 0, r.stderr
        os.close(aw)
        os.close(br)
        if verb == "create":
            assert oci("start", "f1").returncode == 0
        os.write(bw, PAYLOAD)
        os.close(bw)
        got = b""
        while chunk := os.read(ar, 65536):
            got += chunk
        assert got == b"start\n" + PAYLOAD
    finally:
        close_all(ar, aw, br, bw)
    assert wait_until(lambda: oci.state("f1")["status"] == "stopped")
    assert oci("delete", "f1").returncode == 0


def test_only_the_preserved_fds_are_passed(oci):
    """fd 3 is passed, fd 4 (open in the caller) is not."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    w1, w2 = high(w1, 62), high(w2, 63)
    b = oci.bundle(["sh", "-c", "echo one >&3; echo two >&4 || echo no-fd-4 >&3"])
    try:
        r = oci_with_fds(oci, [w1, w2], "run", "--bundle", b, "--preserve-fds", "1", "f2")
        assert r.returncode == 0, r.stderr
        os.close(w1)
        os.close(w2)
        got = b""
        while chunk := os.read(r1, 4096):
            got += chunk
        assert got == b"one\nno-fd-4\n"
    finally:
        close_all(r1, r2, w1, w2)
    assert oci("delete", "--force", "f2").returncode == 0


@pytest.mark.parametrize("arg,msg", [
    ("x", "--preserve-fds: 'x' is not a number of fds from 0 to 61"),
    ("-1", "--preserve-fds: '-1' is not a number"),
    ("62", "--preserve-fds: '62' is not a number"),
    ("5", "--preserve-fds 5: fd 3 is not open"),
])
def test_preserve_fds_refusals(oci, arg, msg):
    b = oci.bundle(["true"])
    r = subprocess.run([HUTCH, "oci", "--root", oci.root, "create", "--bundle", b,
                        "--preserve-fds", arg, "f3"], capture_output=True, env=oci.env,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and msg in r.stderr.decode(), r.stderr
    assert not os.path.exists(os.path.join(oci.root, "f3"))


def test_exec_preserve_fds(oci):
    b = oci.bundle(["sleep", "100"])
    assert oci("run", "-d", "--bundle", b, "f4").returncode == 0
    r1, w1 = os.pipe()
    w1 = high(w1, 64)
    try:
        r = oci_with_fds(oci, [w1], "exec", "--preserve-fds", "1", "f4", "sh", "-c",
                         "head -c 16384 /dev/zero | tr '\\0' x >&3; echo >&3 done")
        assert r.returncode == 0, r.stderr
        os.close(w1)
        got = b""
        while chunk := os.read(r1, 65536):
            got += chunk
        assert got == b"x" * 16384 + b"done\n"
    finally:
        close_all(r1, w1)
    r = subprocess.run([HUTCH, "oci", "--root", oci.root, "exec", "--preserve-fds", "4", "f4",
                        "true"], capture_output=True, env=oci.env, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and b"--preserve-fds 4: fd 3 is not open" in r.stderr, r.stderr
    assert oci("delete", "--force", "f4").returncode == 0
