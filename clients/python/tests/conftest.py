# SPDX-License-Identifier: Apache-2.0
"""Hermetic client tests: the session's own image store and runtime dir in
the environment the client passes to hutch (each test of test_client.py
gets its own on top), never the machine's /var/lib/hutch or /run/hutch."""
import ctypes
import os
import shutil
import subprocess
import tempfile
import time

import pytest

_DIR = None


def pytest_configure(config):
    global _DIR
    _DIR = tempfile.mkdtemp(prefix="hpy-session-", dir="/tmp")
    os.environ["HUTCH_IMAGE_STORE"] = os.path.join(_DIR, "store")
    os.environ["HUTCH_RUNTIME_DIR"] = os.path.join(_DIR, "rt")


def pytest_unconfigure(config):
    if _DIR:
        rt = os.path.join(_DIR, "rt")
        hutch = os.environ.get("HUTCH_BIN") or os.path.join(
            os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
                os.path.abspath(__file__))))), "build", "hutch")
        if os.path.isdir(rt) and hutch and os.access(hutch, os.X_OK):
            env = dict(os.environ, HUTCH_RUNTIME_DIR=rt)
            subprocess.run([hutch, "rm", "--all"], capture_output=True, timeout=120, env=env)
            # gc stops the dir's lxcfs (the /proc views) once no supervisor is left
            end = time.monotonic() + 10
            while os.path.exists(os.path.join(rt, ".lxcfs")) and time.monotonic() < end:
                subprocess.run([hutch, "gc"], capture_output=True, timeout=60, env=env)
                time.sleep(0.05)
        shutil.rmtree(_DIR, ignore_errors=True)


CLONE_NEWNET = 0x40000000


@pytest.fixture
def own_net():
    """The test in a new, anonymous network namespace with only lo: what
    hutch wires for network all (its veth, route, nftables table) never
    reaches the machine's namespace and goes with it. (The integration
    suite's netfake.own_netns(); these tests also run installed, without
    tests/integration.)"""
    libc = ctypes.CDLL(None, use_errno=True)
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.unshare(CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
        try:
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)
            yield
        finally:
            if libc.setns(back, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the machine's netns")
    finally:
        os.close(back)
