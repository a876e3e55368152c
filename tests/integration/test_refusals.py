# SPDX-License-Identifier: Apache-2.0
"""Refusals with a class (issue 25): an error answer of the API takes its
status from its class (base/error.c's table, with HTTP's finer statuses in
supervisor/api/http.c), its message names the fix, and the CLI exits with
the same class's code for the same failure (docs/errors.md). The paths
whose status was picked by hand before: POST /bind_port's failures (the
bind's errno), the request's headers over their bound (the body's:
test_api.py).

Everything here listens on the host's loopback only (network none)."""
import shutil
import subprocess

import pytest
from conftest import HUTCH

USAGE, FAILURE = 64, 70
PUBLISH_MAX = 32  # runtime/portspec.h


def not_this_machines():
    """An IPv4 address none of this machine's interfaces has (RFC 2544's
    benchmark range; nothing is sent to it, a bind is refused)."""
    have = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for addr in ("198.18.255.254", "198.19.255.253"):
        if f" {addr}/" not in have:
            return addr
    pytest.skip("both candidate addresses are this machine's")


def bind(sb, body):
    return sb.api("POST", "/bind_port", body)


def test_forwards_at_their_bounds(hutch):
    # -p at most 32 times (a usage error beyond), then one POST /bind_port
    # (the executor's 409 beyond): the bound of forwards (33, a limit in
    # ports.c) is never reached through either.
    publish = [a for i in range(PUBLISH_MAX) for a in ("-p", f"0:{8000 + i}")]
    r = hutch("create", "--network", "none", *publish, "-p", "0:9000")
    assert r.returncode == USAGE, r.stderr
    assert b"at most %d published ports" % PUBLISH_MAX in r.stderr, r.stderr
    assert hutch.ids() == []
    sb = hutch.create("--network", "none", *publish)
    try:
        st, res = bind(sb, {"port": "9000"})
        assert st == 200 and res["source"] == "bind_port", (st, res)
        st, res = bind(sb, {"port": "9001"})
        assert st == 409, (st, res)
        assert res == {"success": False, "error": "Port already bound", "current_port": "9000"}
        assert len(sb.status()["ports"]) == PUBLISH_MAX + 1
    finally:
        sb.rm()


def test_host_address_not_this_machines_is_the_callers(hutch):
    addr = not_this_machines()
    r = hutch("create", "--network", "none", "-p", f"{addr}:0:8000")
    err = r.stderr.decode()
    assert r.returncode == USAGE, err
    assert f"host address {addr} is not an address of this machine" in err, err
    assert "ip -br addr" in err, err
    assert hutch.ids() == []
    sb = hutch.create("--network", "none")
    try:
        st, res = bind(sb, {"port": "8000", "host_address": addr})
        assert st == 400 and res["error"]["code"] == "invalid_request", (st, res)
        msg = res["error"]["message"]
        assert f"host address {addr} is not an address of this machine" in msg, msg
        assert "leave it out for 127.0.0.1" in msg, msg
        assert sb.status()["ports"] == []
        st, res = bind(sb, {"port": "8000"})  # the sandbox still takes one
        assert st == 200 and res["host_address"] == "127.0.0.1", res
    finally:
        sb.rm()


def test_headers_over_their_bound_are_a_limit(sandbox):
    big = {"X-Big-1": "a" * (40 << 10), "X-Big-2": "b" * (40 << 10)}
    st, res = sandbox.api("GET", "/status", headers=big)
    assert st == 431 and res["error"]["code"] == "headers_too_large", (st, res)
    msg = res["error"]["message"]
    assert "request headers larger than 65536 bytes together" in msg, msg
    assert "send large values in the body" in msg, msg
    st, res = sandbox.api("GET", "/status")
    assert st == 200, res



@pytest.mark.parametrize("lxcfs", ["none", "on"])
def test_fork_refused_is_a_limit_and_leaves_nothing(hutch, lxcfs):
    """Every fork of the create refused with EAGAIN (the process limit: a
    cgroup's pids.max, ulimit -u; injected by strace): the create names the
    limit and its fix, exits with the limit's code, and leaves no sandbox,
    mount or cgroup. With lxcfs its start is the first fork refused (its
    bind mount was left behind); without, the supervisor's."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    env = dict(hutch.env)
    if lxcfs == "none":
        env["HUTCH_LXCFS"] = "none"
    forks = "clone,clone3,fork,vfork"
    r = subprocess.run(["strace", "-f", "-o", "/dev/null", "-e", "trace=" + forks,
                        "-e", f"inject={forks}:error=EAGAIN", HUTCH, "create"],
                       env=env, capture_output=True, timeout=60)
    err = r.stderr.decode()
    assert r.returncode == FAILURE, err
    what = "the sandbox's supervisor" if lxcfs == "none" else "lxcfs"
    assert f"{what}: cannot fork: the process limit is reached" in err, err
    assert "remove sandboxes or raise the limit" in err and "hutch doctor" not in err, err
    assert hutch.ids() == []
    with open("/proc/self/mountinfo") as f:
        left = [line for line in f if hutch.rtdir in line]
    assert left == [], left
    # and the next create (forks allowed) works
    sb = hutch.create()
    assert sb.sh("echo ok") == "ok\n"
    sb.rm()


def test_fork_whose_socketpair_fails_makes_nothing(hutch):
    """hutch fork's socketpair to its creator refused (EMFILE, injected by
    strace): 70 naming the call and its errno, no fork made, the source
    running on."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    sb = hutch.create("--instance-type", "nano")
    r = subprocess.run(["strace", "-f", "-o", "/dev/null", "-e", "trace=socketpair",
                        "-e", "inject=socketpair:error=EMFILE", HUTCH, "fork", sb.id],
                       env=hutch.env, capture_output=True, timeout=120)
    err = r.stderr.decode()
    assert r.returncode == FAILURE and r.stdout == b"", err
    assert "fork: socketpair: Too many open files" in err and "nothing made" in err, err
    assert hutch.ids() == [sb.id]
    assert sb.sh("echo alive") == "alive\n"
    sb.rm()
