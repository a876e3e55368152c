# SPDX-License-Identifier: Apache-2.0
"""Hermetic client tests: the session's own image store and runtime dir in
the environment the client passes to hutch (each test of test_client.py
gets its own on top), never the machine's /var/lib/hutch or /run/hutch."""
import os
import shutil
import subprocess
import tempfile
import time

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
