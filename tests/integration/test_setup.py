# SPDX-License-Identifier: Apache-2.0
"""The first hour (issue 32): scripts/install-deps installs what running
needs by default and the rest behind flags; the README's commands and the
CI example use the smallest set that does their job."""
import os
import re
import subprocess

from conftest import REPO

DEPS = os.path.join(REPO, "scripts", "install-deps")
# Packages only the tests, the packaging or the benchmarks use.
TEST_ONLY = {"libcmocka-dev", "python3-pytest", "python3-httpx", "clang", "clang-format",
             "libclang-rt-14-dev", "podman", "containerd", "catatonit", "busybox-static",
             "docker-registry", "zsh", "fish", "strace", "lintian", "debhelper", "dh-python",
             "crun", "runc", "umoci", "socat", "bubblewrap", "slirp4netns", "qemu-system-x86"}


def deps(*args):
    return subprocess.run([DEPS, *args], capture_output=True, text=True, check=False)


def listed(*flags):
    r = deps("--list", *flags)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_default_and_build_install_no_test_package():
    run = listed()
    assert {"python3", "ca-certificates"} <= run
    build = listed("--build")
    assert run < build and {"cmake", "libseccomp-dev", "libmicrohttpd-dev"} <= build
    assert not (build | listed("--images")) & TEST_ONLY
    assert {"skopeo", "mmdebstrap"} <= listed("--images")


def test_flags_add_their_sets():
    t = listed("--test")
    assert listed("--build") | listed("--images") <= t
    assert {"libcmocka-dev", "python3-pytest", "podman", "containerd"} <= t
    assert {"debhelper", "lintian", "pybuild-plugin-pyproject"} <= listed("--package")
    assert {"runc", "crun", "socat"} <= listed("--bench")   # .ci/run's flags keep working
    assert {"qemu-system-x86", "mmdebstrap"} <= listed("--v2vm")
    assert {"golang-go", "containernetworking-plugins", "runc"} <= listed("--cri")
    assert t | listed("--package") | listed("--bench") == listed("--all")


def test_unknown_flag_is_a_usage_error():
    r = deps("--tests")
    assert r.returncode == 64 and "usage: scripts/install-deps" in r.stderr and "--test" in r.stderr


def test_v2vm_reads_the_first_pkgs_line():
    # ../shared/v2vm takes the first PKGS="..." line literally (no
    # expansion) and scripts/test-v2 adds --list-vm: together the build,
    # test and package sets, without the host-only ones.
    text = open(DEPS).read()
    first = re.search(r'^PKGS="([^"]*)"', text, re.M).group(1).split()
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", p) for p in first)
    vm = set(first) | set(deps("--list-vm").stdout.split())
    host_only = set(re.search(r'^TEST_HOST="([^"]*)"', text, re.M).group(1).split())
    # What running needs beyond that first line (lxcfs) stays out too.
    host_only |= listed() - set(first)
    assert (listed("--test") | listed("--package")) - host_only <= vm
    assert not vm & host_only and "qemu-system-x86" not in vm


def test_readme_and_ci_example_use_the_small_sets():
    readme = open(os.path.join(REPO, "README.md")).read()
    cmds = re.findall(r"^S=\$\(.*$", readme, re.M)
    assert "install-deps --build && cmake" in cmds[0] and "hutch run" in cmds[0]
    assert any("install-deps --test && $S scripts/test" in c for c in cmds)
    ci = open(os.path.join(REPO, "examples", "github-actions.yml")).read()
    assert "install-deps --build\n" in ci
    assert "scripts/install-deps --all" in open(os.path.join(REPO, ".ci", "run")).read()
