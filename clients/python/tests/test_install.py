# SPDX-License-Identifier: Apache-2.0
"""The client installs offline, with what Debian ships (issue 17): pip
builds it with the system's setuptools and wheel, no index, into a fresh
virtual environment; the installed copy (not the source tree) imports,
carries py.typed and runs a sandbox."""
import os
import shutil
import subprocess
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)

PROGRAM = textwrap.dedent("""
    import os, hutch
    root = os.path.dirname(hutch.__file__)
    print(root)
    print(os.path.exists(os.path.join(root, "py.typed")))
    with hutch.LocalSandbox(instance_type="nano") as s:
        print(s.execute("echo installed").stdout.strip())
""")


def stop_lxcfs(env):
    """The sandbox's runtime dir keeps its lxcfs (the /proc views) until gc
    finds no supervisor left: stop it, so no FUSE mount outlives the test."""
    hutch = env["HUTCH_BIN"]
    lx = os.path.join(env["HUTCH_RUNTIME_DIR"], ".lxcfs")
    for _ in range(200):
        if not os.path.exists(lx) or not os.access(hutch, os.X_OK):
            return
        subprocess.run([hutch, "gc"], capture_output=True, timeout=60, env=env)
        time.sleep(0.05)
    raise AssertionError(f"lxcfs still running in {lx}")


def test_offline_install_into_a_venv_runs_a_sandbox(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_NO_INDEX"] = "1"  # offline: nothing may come from an index
    env["HUTCH_RUNTIME_DIR"] = str(tmp_path / "rt")
    # The installed copy finds no build/ beside it: name the binary.
    env["HUTCH_BIN"] = os.environ.get("HUTCH_BIN") or os.path.join(
        os.path.dirname(os.path.dirname(PKG)), "build", "hutch")
    # Built from a copy, which must stay as it was: setuptools' build/ and
    # *.egg-info go to a temporary directory (setup.py), not beside the
    # sources, where a later build would reuse them.
    src = tmp_path / "src"
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                            "__pycache__", "tests"))
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        "--disable-pip-version-check", str(src)],
                       capture_output=True, text=True, env=env, timeout=300, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(os.listdir(src)) == ["README.md", "hutch", "pyproject.toml", "setup.py"]
    try:
        r = subprocess.run([py, "-c", PROGRAM], capture_output=True, text=True, env=env,
                           timeout=120, cwd=str(tmp_path))
    finally:
        stop_lxcfs(env)
    assert r.returncode == 0, r.stderr
    root, typed, out = r.stdout.splitlines()
    assert root.startswith(str(venv)), root  # the installed copy, not the tree
    assert typed == "True"
    assert out == "installed"
