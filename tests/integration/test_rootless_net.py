# SPDX-License-Identifier: Apache-2.0
"""Rootless --network all (issue 15): user-mode networking through pasta.

A throw-away user with subordinate ids drives the CLI as itself against
the fake internet of netfake.py, from its host netns (198.51.100.0/24 in a
netns of the test's; every private address the probes try leads there
too, to a logger, so a broken rule shows as a logged connection, never as
real traffic). The sandbox reaches the fake web and
DNS server; the host itself (its loopback, its addresses), another
sandbox, private ranges, metadata and IPv6 all fail at once from inside;
nft inside fails (no capability); pasta is gone after rm, after the TTL
and after a kill -9 of the supervisor plus gc; a pasta killed from outside
is restarted (and a connection works again), at most 3 times in 60 s, a
failed or hung restart counting; and each error path (no pasta,
/dev/net/tun not usable, pasta failing) names its fix.

/dev/net/tun: pasta's tap needs it usable by the user. udev makes it 0666
on a standard system; this host has no udev (0600), so the module makes it
0666 while it runs and restores the mode after.
"""
import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import SLOWDOWN, proc_comm, wait_until
from netfake import (DNS, HOST_IP, PRIVATE, RESOLVER, WEB, WEB6, HostListener, in_host_netns,
                     sh)
from test_network import FAST, GRACE, assert_fast_failure, assert_logs_empty, probe, raw, resolve
from test_rootless import SESSION, User, UserHutch, _pids_of

TUN = "/dev/net/tun"
NOT_CAPABLE = 69
FAILURE = 70
HERE = os.path.dirname(os.path.abspath(__file__))
PASTA_COMMS = ("pasta", "passt", "passt.avx2", "pasta.avx2")

# hutch, the host's listeners and every client here run in the fake
# internet's host netns (netfake.py), never in the machine's own.
pytestmark = pytest.mark.usefixtures("fakenet")


def _host_addrs():
    """The host's own IPv4 addresses beside loopback and the fake uplink (netfake's
    HOST_LAN here)."""
    out = sh("ip", "-4", "-o", "addr", "show").stdout
    addrs = [ln.split()[3].split("/")[0] for ln in out.splitlines()]
    return [a for a in addrs if not a.startswith("127.") and a != HOST_IP]


@pytest.fixture(scope="module")
def tun():
    if not os.path.exists(TUN) or not shutil.which("pasta", path="/usr/bin:/usr/sbin:/bin"):
        pytest.skip(f"needs {TUN} and pasta (scripts/install-deps installs passt)")
    mode = stat.S_IMODE(os.stat(TUN).st_mode)
    if mode != 0o666:
        os.chmod(TUN, 0o666)
    try:
        yield
    finally:
        os.chmod(TUN, mode)


@pytest.fixture(scope="module")
def netuser():
    u = User(f"hrn{os.getpid() % 100000}")
    try:
        yield u
    finally:
        u.remove()


class UserNetHutch(UserHutch):
    def __init__(self, user, env=None):
        super().__init__(user, {"HUTCH_RESOLVER": RESOLVER, **(env or {})})

    def sandbox(self, *opts):
        sb = self.create("--network", "all", *opts)
        with open(os.path.join(HERE, "netprobe.py"), "rb") as f:
            sb.put_file("/workspace/probe.py", f.read(), "644")
        return sb


@pytest.fixture
def uh(netuser, tun, fakenet):
    h = UserNetHutch(netuser)
    yield h
    h("rm", "--all")
    h("gc")
    assert h.ids() == []
    assert wait_until(lambda: _pids_of(netuser.uid) == [], 10), _pids_of(netuser.uid)


def _helper_pid(sb):
    net = sb.status()["network"]
    assert net["helper"] == "pasta", net
    pid = net["helper_pid"]
    assert proc_comm(pid) in PASTA_COMMS, proc_comm(pid)
    return pid


def _gone(pid):
    return proc_comm(pid) is None


def test_all_reaches_the_fake_internet(uh, fakenet):
    sb = uh.sandbox("--nat-log", "on")
    net = sb.status()["network"]
    assert net["mode"] == "all" and "host_link" not in net, net
    pasta = _helper_pid(sb)
    with open(f"/proc/{pasta}/status") as f:
        assert f"Uid:\t{uh.user.uid}\t" in f.read()  # the user's, not root's
    assert in_host_netns(pasta)  # its sockets are the fake internet's host's
    events = uh("events", sb.id).stdout.decode()
    assert f"network all through pasta, pid {pasta}" in events
    assert "warning:" not in events  # the NAT path's log came up (the next test)
    mark = fakenet.mark()
    r = probe(sb, raw(WEB, 80, "GET / HTTP/1.0\r\nHost: api.test.example\r\n\r\n"),
              resolve("api.test.example"),
              {"op": "udp", "host": WEB, "port": 9999, "data": "rootless-udp"})
    assert r[0]["ok"] and "HTTP/1." in r[0]["recv"], r[0]
    assert r[1]["ok"] and r[1]["addrs"] == [WEB], r[1]
    # the fake servers saw them, from the host (pasta's sockets)
    assert wait_until(lambda: fakenet.since(mark, "http80"), 5)
    assert "api.test.example" in fakenet.dns_names(mark)
    assert wait_until(lambda: [e["data"] for e in fakenet.since(mark, "udpsink")]
                      == ["rootless-udp"], 5), fakenet.since(mark, "udpsink")
    # the sandbox's resolver is the stub, not pasta's
    assert "nameserver 127.0.0.1" in sb.sh("cat /etc/resolv.conf")
    # the egress log has the NAT path's flows too (issue 29, --nat-log on), with bytes
    def flows():
        st, res = sb.api("GET", "/v1/net_log")
        assert st == 200, res
        return {(x["proto"], x["address"]): x for x in res["records"] if x["kind"] == "nat"}
    assert wait_until(lambda: len(flows()) >= 2, 30), flows()
    got = flows()
    tcp, udp = got[("tcp", f"{WEB}:80")], got[("udp", f"{WEB}:9999")]
    assert tcp["verdict"] == "allowed" and tcp["bytes_down"] > 0, tcp
    assert udp["verdict"] == "allowed" and udp["bytes_up"] > 0, udp


def test_a_nat_log_the_users_netns_cannot_turn_on_is_said(uh, fakenet):
    """As root's (test_netlog_nat.py): a user's --nat-log on whose netns
    cannot turn the log on (HUTCH_TEST_NATLOG_SYSCTLS: conntrack's settings
    not where they are looked for, as without nf_conntrack) gets its
    sandbox, without the log, and the events log says why."""
    uh.env["HUTCH_TEST_NATLOG_SYSCTLS"] = "/proc/sys/net/netfilter/none"
    try:
        sb = uh.sandbox("--nat-log", "on")
    finally:
        del uh.env["HUTCH_TEST_NATLOG_SYSCTLS"]
    events = uh("events", sb.id).stdout.decode()
    assert "warning: --nat-log on, but the NAT path is not logged: egress log: write " \
           "'/proc/sys/net/netfilter/none/nf_conntrack_acct'" in events, events
    r = probe(sb, raw(WEB, 80, "GET / HTTP/1.0\r\nHost: api.test.example\r\n\r\n"))
    assert r[0]["ok"] and "HTTP/1." in r[0]["recv"], r[0]
    st, res = sb.api("GET", "/v1/net_log")
    assert st == 200 and res["complete"] is False, res
    assert [x for x in res["records"] if x["kind"] == "nat"] == [], res


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_host_private_ipv6_and_other_sandbox_fail_from_inside(uh, fakenet):
    pub = _free_port()
    a, b = uh.sandbox(), uh.sandbox("-p", f"127.0.0.1:{pub}:7777")
    b.put_file("/workspace/srv.py", b"import socket\n"
               b"s = socket.create_server(('0.0.0.0', 7777))\n"
               b"while True:\n    c, _ = s.accept(); c.sendall(b'sandbox-b\\n'); c.close()\n")
    b.sh("python3 /workspace/srv.py >/dev/null 2>&1 &")
    host_addrs = _host_addrs()
    assert host_addrs, "the host has no address beside loopback and the fake uplink"
    listener = HostListener(addrs=("127.0.0.1", HOST_IP, *host_addrs))
    try:
        nb, na = b.status()["network"], a.status()["network"]
        mark = fakenet.mark()
        targets = []
        for port in (listener.port, pub):  # a host service; b published on the host
            targets += [(HOST_IP, port), (na["gateway"], port), ("127.0.0.1", port)]
            targets += [(h, port) for h in host_addrs]
        targets += [(nb["address"], 7777), (nb["gateway"], 7777)]
        targets += [(ip, p) for ip in PRIVATE.values() for p in (80, 443)]
        targets += [(WEB6, 80), (WEB6, 443)]
        r = probe(a, *[raw(h, p) for h, p in targets],
                  {"op": "udp", "host": WEB6, "port": 9999, "data": "v6"},
                  {"op": "udp", "host": PRIVATE["metadata"], "port": 80, "data": "md"})
        assert_fast_failure(r[:-2])
        assert all(x["took"] < FAST for x in r[-2:]), r[-2:]
        assert_logs_empty(fakenet, mark, *[f"{n}_{p}" for n in PRIVATE for p in (80, 443)],
                          "v6_80", "v6_443", "v6_9999")
        time.sleep(GRACE)
        assert listener.accepted == [], listener.accepted
        # the published port works from the host: b's server was up all along
        import socket
        with socket.create_connection(("127.0.0.1", pub), timeout=5) as c:
            assert c.recv(64) == b"sandbox-b\n"
    finally:
        listener.close()


def test_nft_inside_fails_and_the_rules_stay(uh):
    sb = uh.sandbox()
    for cmd in ("nft flush ruleset", "nft delete table inet hutch_usernet",
                "nft list ruleset"):
        res = sb.run(cmd)
        assert res["exit_code"] != 0, (cmd, res)
        assert "Operation not permitted" in res["stderr"], res
    r = probe(sb, raw(HOST_IP, 22), raw(PRIVATE["metadata"], 80))
    assert_fast_failure(r)
    # and the rules are there, seen from the host in the sandbox's netns
    init = json.loads(uh("inspect", sb.id).stdout)["init_pid"]
    rules = sh("nsenter", "-t", str(init), "-n", "nft", "list", "table", "inet",
               "hutch_usernet").stdout
    assert "@blocked4" in rules and "@host4" in rules and "nfproto ipv6" in rules, rules
    for h in _host_addrs():
        assert h in rules, rules


def test_pasta_ends_with_rm_ttl_and_supervisor_kill(uh):
    sb = uh.sandbox()
    pasta = _helper_pid(sb)
    assert uh("rm", sb.id).returncode == 0
    assert wait_until(lambda: _gone(pasta), 5), proc_comm(pasta)

    # Its pasta's pid from its events (kept after its end), not its status:
    # under emulation (the v2 VM) its create took longer than the TTL of 2 s
    # and the sandbox was gone, its socket with it, before the status was read.
    sb = uh.create("--network", "all", "--ttl", "2")
    events = uh("events", sb.id).stdout.decode()
    found = re.search(r"network all through pasta, pid (\d+)", events)
    assert found, events
    pasta = int(found.group(1))
    assert wait_until(lambda: _gone(pasta), 15), proc_comm(pasta)
    assert wait_until(lambda: sb.id not in uh.ids(), 5)

    sb = uh.create("--network", "all")
    pasta = _helper_pid(sb)
    sup = json.loads(uh("inspect", sb.id).stdout)["supervisor_pid"]
    os.kill(sup, signal.SIGKILL)
    assert wait_until(lambda: _gone(pasta), 5), proc_comm(pasta)
    assert uh("gc").returncode == 0
    assert sb.id not in uh.ids()


def _children(pid):
    out = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/stat") as f:
                if p.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p))
        except (OSError, ValueError, IndexError):
            pass
    return out


def test_a_wrapper_that_forks_pasta_leaves_nothing(uh):
    """HUTCH_PASTA may be a wrapper that runs pasta as its child (not by
    exec): rm kills pasta's whole process group, not just the wrapper."""
    import tempfile
    d = tempfile.mkdtemp(prefix="hutch-rln-")
    os.chmod(d, 0o755)
    wrapper = os.path.join(d, "pasta")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\n/usr/bin/pasta "$@" &\nwait\n')
    os.chmod(wrapper, 0o755)
    try:
        uh.env["HUTCH_PASTA"] = wrapper
        sb = uh.sandbox()
    finally:
        del uh.env["HUTCH_PASTA"]
        shutil.rmtree(d)
    shell = sb.status()["network"]["helper_pid"]
    [pasta] = _children(shell)
    assert proc_comm(pasta) in PASTA_COMMS, proc_comm(pasta)
    r = probe(sb, raw(WEB, 80, "GET / HTTP/1.0\r\n\r\n"))
    assert r[0]["ok"], r
    assert uh("rm", sb.id).returncode == 0
    assert wait_until(lambda: _gone(pasta) and _gone(shell), 5), (proc_comm(pasta),
                                                                proc_comm(shell))


def test_without_pasta_names_the_package(uh):
    r = uh("create", "--no-limits", "--network", "all",
           env={"HUTCH_PASTA": "/nonexistent/pasta"})
    assert r.returncode == NOT_CAPABLE, r.stderr
    err = r.stderr.decode()
    assert "'passt' package" in err and "apt-get install passt" in err, err
    assert "/nonexistent/pasta" in err, err
    assert uh.ids() == []


def test_tun_not_usable_names_the_fix(uh):
    os.chmod(TUN, 0o600)
    try:
        r = uh("create", "--no-limits", "--network", "all")
    finally:
        os.chmod(TUN, 0o666)
    assert r.returncode == NOT_CAPABLE, r.stderr
    err = r.stderr.decode()
    assert TUN in err and "chmod 0666" in err, err
    assert uh.ids() == []


def test_pasta_failing_is_reported_and_nothing_stays(uh):
    import tempfile
    d = tempfile.mkdtemp(prefix="hutch-rln-")
    os.chmod(d, 0o755)
    fake = os.path.join(d, "fake-pasta")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho 'cannot open the tap: no luck' >&2\nexit 1\n")
    os.chmod(fake, 0o755)
    try:
        r = uh("create", "--no-limits", "--network", "all", env={"HUTCH_PASTA": fake})
    finally:
        shutil.rmtree(d)
    assert r.returncode == FAILURE, r.stderr
    err = r.stderr.decode()
    assert "pasta failed" in err and "no luck" in err, err
    assert uh.ids() == []
    assert wait_until(lambda: _pids_of(uh.user.uid) == [], 10), _pids_of(uh.user.uid)


def test_doctor_reports_pasta(uh):
    r = uh("doctor", "--json")
    checks = {c["check"]: c for c in json.loads(r.stdout)}
    c = checks["user network"]
    assert c["ok"] and "pasta" in c["detail"], c
    r = uh("doctor", "--json", env={"HUTCH_PASTA": "/nonexistent/pasta"})
    c = {c["check"]: c for c in json.loads(r.stdout)}["user network"]
    assert not c["ok"] and not c["required"] and "passt" in c["detail"], c


def _net(sb):
    return sb.status()["network"]


def _events(uh, sb):
    return uh("events", sb.id).stdout.decode()


def _restarted(sb, old):
    """Wait for a pasta other than old to be running; its pid."""
    def up():
        net = _net(sb)
        return net["helper_state"] == "running" and net["helper_pid"] not in (0, old)
    assert wait_until(up, 20), _net(sb)  # a hung one is killed at 10 s
    return _helper_pid(sb)


def _fetch_ok(sb, fakenet):
    mark = fakenet.mark()
    r = probe(sb, raw(WEB, 80, "GET / HTTP/1.0\r\nHost: api.test.example\r\n\r\n"))
    assert r[0]["ok"] and "HTTP/1." in r[0]["recv"], r[0]
    assert wait_until(lambda: fakenet.since(mark, "http80"), 5)


def _user_pastas(uid):
    return [p for p in _pids_of(uid) if proc_comm(p) in PASTA_COMMS]


def test_pasta_killed_is_restarted_and_the_network_works_again(uh, fakenet):
    """pasta killed from outside: the supervisor (pasta's pidfd in its
    loop) reaps it at once, starts a new one on init's namespaces (the fds
    it kept from create: init is no longer dumpable) without blocking its
    loop, and says so in the events and /status; a connection through the
    new one works."""
    sb = uh.sandbox()
    old = _helper_pid(sb)
    net = _net(sb)
    assert net["helper_state"] == "running" and net["helper_restarts"] == 0, net
    _fetch_ok(sb, fakenet)
    os.kill(old, signal.SIGKILL)
    new = _restarted(sb, old)
    assert _gone(old), proc_comm(old)  # reaped, not a zombie
    with open(f"/proc/{new}/status") as f:
        assert f"Uid:\t{uh.user.uid}\t" in f.read()
    net = _net(sb)
    assert net["helper_restarts"] == 1, net
    assert f"pasta (pid {old}) killed by signal 9" in net["helper_error"], net
    ev = _events(uh, sb)
    assert (f"network down: pasta (pid {old}) killed by signal 9; restarting it as pid {new} "
            "(restart 1 of 3 in 60 s)") in ev, ev
    assert f"network up: pasta restarted, pid {new}" in ev, ev
    _fetch_ok(sb, fakenet)
    assert sb.sh("echo still-here").strip() == "still-here"
    assert uh("rm", sb.id).returncode == 0
    assert wait_until(lambda: _gone(new), 5), proc_comm(new)


@pytest.mark.skipif(not SESSION, reason="idle sleep for a user needs its cgroup, from its systemd "
                    "user session on v2 (HUTCH_TEST_USER_SESSION=1, the pure-v2 VM's run)")
def test_pasta_killed_while_asleep_is_restarted_at_the_wake(uh, fakenet):
    """pasta killed while the sandbox sleeps (frozen): not restarted into
    the frozen cgroup, where it could never get ready and would use up the
    3 restarts and leave the network down for good; the wake restarts it."""
    sb = uh.sandbox("--idle-timeout", str(round(2 * SLOWDOWN)))
    old = _helper_pid(sb)
    state = os.path.join(uh.user.rtdir, sb.id, "state.json")

    def status():
        with open(state) as f:
            return json.load(f)["status"]
    assert wait_until(lambda: status() == "sleeping", 30 * SLOWDOWN), status()
    os.kill(old, signal.SIGKILL)
    assert wait_until(lambda: "network: pasta ended while the sandbox is frozen; acted on when "
                      "it thaws" in _events(uh, sb), 10 * SLOWDOWN), _events(uh, sb)
    assert status() == "sleeping"  # hutch events did not wake it
    assert "restarting it as pid" not in _events(uh, sb)
    # a command wakes it (/status and hutch events do not)
    assert sb.sh("echo awake").strip() == "awake"
    new = _restarted(sb, old)
    net = _net(sb)
    assert net["helper_restarts"] == 1 and net["helper_state"] == "running", net
    ev = _events(uh, sb)
    assert f"network down: pasta (pid {old}) killed by signal 9; restarting it as pid {new}" in ev, ev
    assert f"network up: pasta restarted, pid {new}" in ev, ev
    _fetch_ok(sb, fakenet)


def test_pasta_restarts_are_limited(uh, fakenet):
    """At most 3 restarts in 60 s: the 4th death leaves the network down
    for good (no pasta of the user's is left, none comes back), said in
    /status and the events; commands still run, a fetch fails at once."""
    sb = uh.sandbox()
    pid = _helper_pid(sb)
    for i in range(3):
        os.kill(pid, signal.SIGKILL)
        pid = _restarted(sb, pid)
        assert _net(sb)["helper_restarts"] == i + 1, _net(sb)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: _net(sb)["helper_state"] == "down", 10), _net(sb)
    net = _net(sb)
    assert net["helper_pid"] == 0 and net["helper_restarts"] == 3, net
    assert (f"pasta (pid {pid}) killed by signal 9; restarted 3 times in 60 s, not restarted "
            "again: the sandbox has no network") in net["helper_error"], net
    assert f"network down for good: pasta (pid {pid}) killed by signal 9" in _events(uh, sb)
    assert _gone(pid) and _user_pastas(uh.user.uid) == [], _user_pastas(uh.user.uid)
    r = probe(sb, raw(WEB, 80, "GET / HTTP/1.0\r\n\r\n"))
    assert not r[0]["ok"], r[0]
    assert sb.sh("echo still-here").strip() == "still-here"
    # what the loop had to do is done: still down, still no pasta
    net = _net(sb)
    assert net["helper_state"] == "down" and _user_pastas(uh.user.uid) == [], net
    assert uh("rm", sb.id).returncode == 0


def _flag_wrapper(uh, d):
    """A HUTCH_PASTA that execs pasta, unless told otherwise by a file in d
    (the user's): 'refuse' exits 1 saying so, 'hang' (removed) never
    becomes ready."""
    os.chown(d, uh.user.uid, uh.user.gid)
    wrapper = os.path.join(d, "pasta")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\n"
                f"if [ -e {d}/refuse ]; then echo 'refusing on purpose' >&2; exit 1; fi\n"
                f"if [ -e {d}/hang ]; then rm {d}/hang; exec sleep 60; fi\n"
                f"exec /usr/bin/pasta \"$@\"\n")
    os.chmod(wrapper, 0o755)
    return wrapper


@contextlib.contextmanager
def _wrapped_sandbox(uh):
    """A sandbox whose pasta is _flag_wrapper's; (sandbox, its flag dir)."""
    d = tempfile.mkdtemp(prefix="hutch-rln-")
    try:
        uh.env["HUTCH_PASTA"] = _flag_wrapper(uh, d)
        yield uh.sandbox(), d
    finally:
        del uh.env["HUTCH_PASTA"]
        shutil.rmtree(d)


def _flag(uh, d, name):
    uh.user.run(["touch", os.path.join(d, name)])
    assert os.path.exists(os.path.join(d, name))


def test_pasta_restart_failing_counts_and_gives_up(uh):
    """A restart that fails (the new pasta exits before it is ready) counts
    against the limit: after 3 of them the network is down for good, with
    what the last one said."""
    with _wrapped_sandbox(uh) as (sb, d):
        pid = _helper_pid(sb)
        _flag(uh, d, "refuse")
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: _net(sb)["helper_state"] == "down", 15), _net(sb)
        net = _net(sb)
        assert net["helper_pid"] == 0 and net["helper_restarts"] == 3, net
        assert "failed: refusing on purpose; restarted 3 times in 60 s, not restarted again" \
            in net["helper_error"], net
        ev = _events(uh, sb)
        assert ev.count("failed: refusing on purpose; restarting it as pid") == 2, ev
        assert "network down for good: the restarted pasta (pid" in ev, ev
        assert _user_pastas(uh.user.uid) == [], _user_pastas(uh.user.uid)
        assert uh("rm", sb.id).returncode == 0


def test_pasta_restart_not_ready_in_time_is_killed_and_retried(uh, fakenet):
    """A restarted pasta that never becomes ready is killed at its deadline
    (10 s), and the next one is started: the loop was not blocked meanwhile
    (/status answered at once while it hung)."""
    with _wrapped_sandbox(uh) as (sb, d):
        pid = _helper_pid(sb)
        _flag(uh, d, "hang")
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: _net(sb)["helper_state"] == "starting", 5), _net(sb)
        hung = _net(sb)["helper_pid"]
        t0 = time.monotonic()
        assert _net(sb)["helper_state"] == "starting"
        assert time.monotonic() - t0 < 1  # answered while pasta hangs
        new = _restarted(sb, hung)
        assert _gone(hung), proc_comm(hung)
        net = _net(sb)
        assert net["helper_restarts"] == 2, net
        ev = _events(uh, sb)
        assert f"the restarted pasta (pid {hung}) was not ready within 10 s" in ev, ev
        assert f"network up: pasta restarted, pid {new}" in ev, ev
        _fetch_ok(sb, fakenet)
        assert uh("rm", sb.id).returncode == 0
