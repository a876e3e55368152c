# SPDX-License-Identifier: Apache-2.0
"""Bounded fault injection (issue 18): kill -9 of the CLI, the supervisor
or init at random points of create, exec, cp and rm, also of a sleeping
sandbox. After each: a working sandbox or none, and a cp's local file whole
or untouched; at the end, after rm and gc, no process, cgroup or directory
is left. HUTCH_FAULTS_SEED replays a run; the seed is in the failure."""
import json
import os
import random
import re
import signal
import subprocess
import time

import pytest

from conftest import HUTCH, cgroup_dirs_named, retired_dirs, state_of, wait_until
from test_crash import supervisor_alive
from netfake import link_index

ROUNDS = 60
OLD = b"old local contents\n"


def pids_of(hutch, sid, links=None):
    """(supervisor pid, init pid); with links, the sandbox's host link is
    recorded there too."""
    r = hutch("inspect", sid)
    if r.returncode != 0:
        return None
    st = json.loads(r.stdout)
    net = st.get("network") or {}
    if links is not None and net.get("host_link"):
        links.add((net["host_link"], ifindex(net["host_link"]), net["address"]))
    return st["supervisor_pid"], st["init_pid"]


def ifindex(link):
    return link_index(link)  # in the test's netns (own_net), not sysfs's


def links_left(links):
    """The recorded host links still there, and rules or addresses still
    naming one. A name or address that another sandbox (another runtime
    dir on this machine) took again since, which its new link's ifindex
    shows, is that sandbox's."""
    rules = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout
    addrs = subprocess.run(["ip", "-4", "addr", "show"], capture_output=True, text=True).stdout
    left = []
    for name, index, address in links:
        now = ifindex(name)
        if now is not None and now == index:
            left.append(f"link {name}")
        elif now is None:
            if re.search(rf"\b{name}\b", rules) or re.search(rf"\b{re.escape(address)}\b", rules):
                left.append(f"nftables rule naming {name} or {address}")
            if re.search(rf"\b{name}\b", addrs):
                left.append(f"address on {name}")
    return left


def settled(hutch):
    """Every sandbox dir is served (running or sleeping) or has no
    supervisor: a create whose CLI died is ready, or deleted."""
    for sid in hutch.ids():
        if state_of(hutch, sid) in ("running", "sleeping"):
            continue
        if supervisor_alive(hutch, sid):
            return False
    return True


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def fresh(hutch, sleeping, net):
    args = (["--idle-timeout", "1"] if sleeping else []) + net
    sb = hutch.create(*args)
    assert sb.sh("truncate -s 64M /workspace/big") == ""
    if sleeping:
        assert wait_until(lambda: state_of(hutch, sb.id) == "sleeping", timeout=10)
    return sb


def one_round(hutch, rng, local, seen, net, links):
    op = rng.choice(["create", "exec", "cp", "rm"])
    victim = "cli" if op == "create" else rng.choice(["cli", "supervisor", "init"])
    sleeping = op != "create" and rng.random() < 0.3
    delay = rng.uniform(0, 0.04)
    sb = None if op == "create" else fresh(hutch, sleeping, net)
    pids = pids_of(hutch, sb.id, links) if sb else None
    if pids:
        seen.update(pids)
    local.write_bytes(OLD)
    argv = {"create": ["create", *net],
            "exec": ["exec", sb and sb.id, "--", "sh", "-c", "echo x; sleep 0.3"],
            "cp": ["cp", sb and f"{sb.id}:big", str(local)],
            "rm": ["rm", sb and sb.id]}[op]
    p = subprocess.Popen([HUTCH, *argv], env=hutch.env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(delay)
    target = p.pid if victim == "cli" else pids[0 if victim == "supervisor" else 1]
    try:
        os.kill(target, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError(f"{op} still running 30 s after {victim} was killed")
    where = f"{op}, {victim} killed after {delay * 1000:.1f} ms" + (", sleeping" if sleeping else "")
    # A cp's local file is whole or untouched.
    assert local.exists(), f"{where}: the local file was deleted"
    data = local.read_bytes()
    assert data == OLD or data == b"\0" * (64 << 20), f"{where}: local file is {len(data)} bytes"
    assert sorted(os.listdir(local.parent)) == [local.name], f"{where}: {os.listdir(local.parent)}"
    # Each sandbox works or is gone (once a create whose CLI died is done
    # with: ready, or deleted by its supervisor).
    assert wait_until(lambda: settled(hutch), timeout=20), f"{where}: not settled"
    for sid in hutch.ids():
        r = hutch("exec", sid, "--", "true", timeout=30)
        assert r.returncode in (0, 65, 66), f"{where}: exec in {sid}: {r.returncode} {r.stderr!r}"
        if r.returncode == 0:
            more = pids_of(hutch, sid, links)
            if more:
                seen.update(more)
    return where


@pytest.mark.parametrize("net", [[], ["--network", "all"]], ids=["none", "all"])
def test_fault_injection(own_net, hutch, tmp_path, net):
    """With --network all, also no host link, address or nftables rule of a
    sandbox is left (fewer rounds: each creates a veth pair)."""
    seed = int(os.environ.get("HUTCH_FAULTS_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    local = tmp_path / "out" / "local.bin"
    local.parent.mkdir()
    seen, ids, links = set(), set(), set()
    if net:
        # No query leaves: nothing in these rounds resolves a name.
        hutch.env["HUTCH_RESOLVER"] = "127.0.0.1:9"
    for i in range(ROUNDS if not net else ROUNDS // 3):
        try:
            one_round(hutch, rng, local, seen, net, links)
        except AssertionError as e:
            raise AssertionError(f"HUTCH_FAULTS_SEED={seed} round {i}: {e}") from None
        ids.update(hutch.ids())
        hutch("rm", "--all")
        assert hutch("gc").returncode == 0
        ids.update(g for g in os.listdir(os.path.join(hutch.rtdir, ".gone")) if "." not in g) \
            if os.path.isdir(os.path.join(hutch.rtdir, ".gone")) else None
    assert hutch.ids() == [], f"HUTCH_FAULTS_SEED={seed}: left {hutch.ids()}"
    assert wait_until(lambda: not any(alive(p) for p in seen), timeout=15), \
        f"HUTCH_FAULTS_SEED={seed}: processes left: {[p for p in seen if alive(p)]}"
    # A supervisor killed in the last round may still hold its lock (its
    # dying init does) when that round's gc ran: gc is what clears it.
    assert wait_until(lambda: hutch("gc").returncode == 0 and not retired_dirs(hutch.rtdir),
                      timeout=15, interval=0.2), \
        f"HUTCH_FAULTS_SEED={seed}: retired dirs left: {retired_dirs(hutch.rtdir)}"
    left = [d for sid in ids for d in cgroup_dirs_named(sid)]
    assert not left, f"HUTCH_FAULTS_SEED={seed}: cgroups left: {left}"
    assert not net or links, "no sandbox of mode all was seen"
    assert wait_until(lambda: not links_left(links), timeout=10), \
        f"HUTCH_FAULTS_SEED={seed}: {links_left(links)}"


def test_a_stopped_supervisor_does_not_hang_the_cli(hutch):
    """A supervisor that never answers (kill -STOP): every CLI call gives up
    after HUTCH_API_TIMEOUT naming the cause, rm names the fix, and rm -f
    kills it and its sandbox and leaves nothing."""
    sb = hutch.create()
    sup, init = pids_of(hutch, sb.id)
    os.kill(sup, signal.SIGSTOP)
    try:
        quick = {"HUTCH_API_TIMEOUT": "1"}
        for args in (["inspect", sb.id], ["exec", sb.id, "--", "true"], ["stats", sb.id],
                     ["ps", sb.id], ["rm", sb.id]):
            t0 = time.monotonic()
            r = hutch(*args, env=quick, timeout=30)
            err = r.stderr.decode()
            assert r.returncode != 0 and "did not answer within 1 s" in err, (args, err)
            assert time.monotonic() - t0 < 20, args
        assert f"hutch rm -f {sb.id}" in err, err
        assert alive(sup) and alive(init) and sb.id in hutch.ids()

        r = hutch("rm", "-f", sb.id, env=quick, timeout=30)
        assert r.returncode == 0, r.stderr
        assert not alive(sup) and not alive(init)
        assert sb.id not in hutch.ids()
        assert wait_until(lambda: cgroup_dirs_named(sb.id) == [], timeout=10)
    finally:
        if alive(sup):
            os.kill(sup, signal.SIGKILL)


def test_api_timeout_must_be_whole_seconds(hutch):
    sb = hutch.create()
    for bad in ("-1", "1.5", "abc", "86401"):
        r = hutch("inspect", sb.id, env={"HUTCH_API_TIMEOUT": bad})
        assert r.returncode == 64, (bad, r)  # the caller's setting: usage
        assert f"invalid HUTCH_API_TIMEOUT '{bad}'" in r.stderr.decode(), r.stderr
    r = hutch("inspect", sb.id, env={"HUTCH_API_TIMEOUT": "0"})
    assert r.returncode == 0, r.stderr
    assert sb.rm().returncode == 0


def test_cp_when_the_supervisor_dies_says_gone(hutch):
    """cp whose sandbox's supervisor is killed while the copy is under way
    (connecting, sending, or waiting for the answer, whichever it reached):
    exit 66 saying the sandbox is gone, not 70 (issue 32 #9)."""
    sb = hutch.create("--instance-type", "nano")
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    p = hutch.popen("cp", "-", sb.id + ":/workspace/f", stdin=subprocess.PIPE)
    try:
        p.stdin.write(b"x" * 65536)
        p.stdin.flush()
        os.kill(sup, signal.SIGKILL)  # the body never ends before this
        p.stdin.close()
        p.wait(timeout=60)
        err = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 66, err
    assert f"sandbox {sb.id}".encode() in err and b"gone" in err, err
    assert hutch("gc").returncode == 0
