# SPDX-License-Identifier: Apache-2.0
"""Network modes none / all / allow:HOSTS and --host-port, proved against the
fake internet of netfake.py: for every path the tests assert the observable
effect (the fake server's log shows the connection, or shows none; a refused
connection returned within FAST seconds, measured inside the sandbox).

hutch runs in the fake internet's host netns, whose only way out is the
fake internet, and every sandbox gets HUTCH_RESOLVER=198.51.100.53:53, so
nothing reaches the real network even if a rule under test is broken."""
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import time

import pytest

from conftest import (HUTCH, Hutch, Sandbox, assert_runtime_dir_clean, cgroup_dirs_named,
                      cgroups_gone, proc_comm, wait_until)
from netfake import (DNS, HOST_IP, PRIVATE, RESOLVER, UNLISTED, WEB, WEB6, HostListener,
                     hutch_links, in_host_netns, nft_table_exists, sh)

USAGE = 64
FAST = 3.0            # a refused path must fail within this many seconds
GRACE = 0.3           # after the last probe, before asserting a log stayed empty
HOST_INTERNAL = "host.hutch.internal"
POOL = ("10.200.", )  # HUTCH_NET_POOL default 10.200.0.0/16
HERE = os.path.dirname(os.path.abspath(__file__))

# hutch, the host's listeners and every client here run in the fake
# internet's host netns (netfake.py), never in the machine's own.
pytestmark = pytest.mark.usefixtures("fakenet")


class NetHutch(Hutch):
    """The CLI with the fake resolver: the supervisor never asks the host's
    real nameserver."""

    def __init__(self, rtdir):
        super().__init__(rtdir)
        self.env["HUTCH_RESOLVER"] = RESOLVER

    def cleanup(self):
        leftovers = self.ids()
        if leftovers:
            self("rm", "--all")
        self("gc")
        assert_runtime_dir_clean(self, leftovers)


def net_sandbox(h, *opts):
    sb = h.create(*opts)
    with open(os.path.join(HERE, "netprobe.py"), "rb") as f:
        sb.put_file("/workspace/probe.py", f.read(), "644")
    return sb


def install_ca(sb, fakenet):
    sb.put_file("/workspace/ca.pem", fakenet.ca_pem(), "644")


def probe(sb, *ops, timeout=60):
    res = sb.run(argv=["python3", "/workspace/probe.py"], stdin=json.dumps(list(ops)),
                 timeout=timeout)
    assert res["exit_code"] == 0, res
    results = json.loads(res["stdout"])
    for x in results:  # shown with a failing test, or with -s
        print("probe", json.dumps(x["op"]), "->", json.dumps({k: v for k, v in x.items() if k != "op"}))
    return results


def tls(host, port=443, sni=None):
    return {"op": "tls", "host": host, "port": port, "sni": sni}


def raw(host, port, send=""):
    return {"op": "raw", "host": host, "port": port, "send": send}


def resolve(name):
    return {"op": "resolve", "name": name}


def assert_fast_failure(results):
    """Every result failed (never connected through, never answered), and
    within FAST seconds (a drop instead of a reject shows as a slow one)."""
    for r in results:
        assert not r["ok"] or r.get("recv") == "", r
        assert r.get("body") is None, r
        assert r["took"] < FAST, f"took {r['took']}s instead of failing at once: {r}"


def assert_logs_empty(fakenet, mark, *names):
    time.sleep(GRACE)
    for n in names:
        assert fakenet.since(mark, n) == [], (n, fakenet.since(mark, n))


def network(sb):
    st = sb.status()
    assert "network" in st, st
    return st["network"]


def link_exists(name):
    return sh("ip", "link", "show", name, check=False).returncode == 0


def nft_ruleset():
    return sh("nft", "list", "ruleset", check=False).stdout


@pytest.fixture
def nh(tmp_path):
    h = NetHutch(tmp_path / "rt")
    yield h
    h.cleanup()


# ---------------------------------------------------------------------------
# option syntax (nothing is created; the --host-port rules are in test_cli.py)

@pytest.mark.parametrize("entry", ["https://api.test.example", "api.test.example/path",
                                   "*.test.example", "*", "http://10.0.0.1:80"])
def test_allow_entry_syntax_refused_naming_the_entry(nh, entry):
    r = nh("create", "--network", f"allow:api.test.example,{entry}")
    assert r.returncode == USAGE, r.stderr
    assert entry in r.stderr.decode(), r.stderr
    assert nh.ids() == [] and r.stdout == b""


def test_host_port_may_not_shadow_a_listed_ip_port(nh):
    # (the name cases, 53, 443, counts and ranges are in test_cli.py)
    r = nh("create", "--network", f"allow:{WEB}:8443", "--host-port", "8443")
    assert r.returncode == USAGE and b"8443" in r.stderr, r.stderr
    assert nh.ids() == []


def _cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


HOLD = """
import socket, sys
held = []
for _ in range(100):
    try:
        held.append(socket.create_connection(("198.51.100.7", 443), timeout=5))
    except OSError:
        break
print(len(held), flush=True)
sys.stdin.read()
"""


def test_allow_proxy_at_its_fd_limit_resets_instead_of_spinning(nh):
    """A supervisor whose egress proxy is out of fds (here 64, hard) resets
    the connections it cannot take, records why, and does not spin on its
    level-triggered listener (it burned a whole core before). Nothing
    leaves the sandbox: the connections wait for a ClientHello that never
    comes."""
    r = subprocess.run(["bash", "-c", 'ulimit -n 64; ulimit -Hn 64; '
                        'exec "$0" create --json --network allow:198.51.100.7', HUTCH],
                       capture_output=True, env=nh.env, timeout=60)
    assert r.returncode == 0, r.stderr
    sb = Sandbox(nh, json.loads(r.stdout))
    sid = sb.id
    pid = sb.status()["supervisor_pid"]
    p = subprocess.Popen([HUTCH, "exec", "-i", sid, "--", "python3", "-c", HOLD],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=nh.env)
    try:
        assert int(p.stdout.readline()) > 0
        t0 = _cpu_ticks(pid)
        time.sleep(1)  # a spinning listener would burn this second
        assert _cpu_ticks(pid) - t0 < 20, "the supervisor spins at its fd limit"
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    refused = network(sb)["refused"]
    assert any("out of file descriptors" in x["reason"] for x in refused), refused


# ---------------------------------------------------------------------------
# mode all

class AllEnv:
    pass


@pytest.fixture(scope="class")
def allenv(fakenet, tmp_path_factory):
    e = AllEnv()
    e.h = NetHutch(tmp_path_factory.mktemp("rt-all"))
    e.listeners = []
    try:
        # a host service opened with --host-port, and one that is not
        e.opened = HostListener(addrs=("127.0.0.1",), reply=b"opened-port\n")
        e.closed = HostListener(addrs=("127.0.0.1",), reply=b"closed-port\n")
        e.listeners += [e.opened, e.closed]
        e.links_before = hutch_links()
        e.a = net_sandbox(e.h, "--network", "all", "--host-port", str(e.opened.port))
        e.b = net_sandbox(e.h, "--network", "all")
        install_ca(e.a, fakenet)
        e.na, e.nb = network(e.a), network(e.b)
        # the host itself on its fake-uplink address and on both gateways
        e.host = HostListener(addrs=(HOST_IP, e.na["gateway"], e.nb["gateway"]))
        e.listeners.append(e.host)
        yield e
    finally:
        for lst in e.listeners:
            lst.close()
        e.h.cleanup()


class TestAll:
    def test_status_and_inspect(self, allenv):
        n = allenv.na
        assert n["mode"] == "all"
        assert n["resolver"] == RESOLVER
        assert n["host_ports"] == [allenv.opened.port]
        assert n["address"].startswith(POOL) and n["gateway"].startswith(POOL)
        a, g = (int(x.split(".")[3]) for x in (n["address"], n["gateway"]))
        assert a & ~3 == g & ~3 and a != g, n  # one /30
        assert re.fullmatch(r"hutch\d+", n["host_link"]) and link_exists(n["host_link"])
        assert n["host_link"] not in allenv.links_before
        # hutch ran in the fake internet's host netns, not the machine's
        assert in_host_netns(allenv.a.status()["supervisor_pid"])
        assert n["gateway"] in sh("ip", "-o", "-4", "addr", "show", "dev", n["host_link"]).stdout
        nb = allenv.nb
        assert nb["address"] != n["address"] and nb["host_link"] != n["host_link"]
        assert nb["host_ports"] == []
        r = allenv.h("inspect", allenv.a.id)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["network"]["host_link"] == n["host_link"]
        assert nft_table_exists()

    def test_resolv_conf_and_hosts(self, allenv):
        conf = allenv.a.sh("cat /etc/resolv.conf")
        assert [l for l in conf.splitlines() if l.startswith("nameserver")] == ["nameserver 127.0.0.1"]
        hosts = allenv.a.sh("cat /etc/hosts")
        assert re.search(r"^169\.254\.100\.1\s+.*\bhost\.hutch\.internal\b", hosts, re.M), hosts

    def test_tls_by_name_and_dns_forwarding(self, allenv, fakenet):
        nonce = secrets.token_hex(4)
        mark = fakenet.mark()
        r = probe(allenv.a, resolve(f"any-{nonce}.test.example"), resolve("unlisted.test.example"),
                  tls("api.test.example", 443, "api.test.example"),
                  tls("unlisted.test.example", 443, "unlisted.test.example"),
                  raw(WEB, 80, "GET / HTTP/1.0\r\n\r\n"))
        assert r[0]["addrs"] == [WEB] and r[1]["addrs"] == [UNLISTED], r
        assert r[2]["body"] == f"fake-https {WEB}:443 sni=api.test.example\n", r[2]
        assert r[3]["body"] == f"fake-https {UNLISTED}:443 sni=unlisted.test.example\n", r[3]
        assert r[4]["recv"].endswith(f"fake-http {WEB}:80\n"), r[4]
        # every query was forwarded to HUTCH_RESOLVER
        names = fakenet.dns_names(mark)
        for name in (f"any-{nonce}.test.example", "unlisted.test.example", "api.test.example"):
            assert name in names, names
        # NAT: the fake internet sees the host's address, not the sandbox's
        reqs = [e for e in fakenet.since(mark, "https443") if e["event"] == "request"]
        assert len(reqs) == 1 and reqs[0]["peer"].split(":")[0] == HOST_IP, reqs

    def test_udp_works(self, allenv, fakenet):
        nonce = secrets.token_hex(6)
        mark = fakenet.mark()
        probe(allenv.a, {"op": "udp", "host": WEB, "port": 9999, "data": f"udp-{nonce}"})
        assert wait_until(lambda: [e["data"] for e in fakenet.since(mark, "udpsink")]
                          == [f"udp-{nonce}"], 5), fakenet.since(mark, "udpsink")

    def test_private_metadata_ipv6_fail_fast(self, allenv, fakenet):
        mark = fakenet.mark()
        ops = [raw(a, p) for a in PRIVATE.values() for p in (80, 443)]
        ops += [raw(WEB6, 443), raw(WEB6, 80)]
        r = probe(allenv.a, *ops, {"op": "udp", "host": WEB6, "port": 9999, "data": "v6"})
        assert_fast_failure(r[:-1])
        assert r[-1]["took"] < FAST
        assert_logs_empty(fakenet, mark, *[f"{n}_{p}" for n in PRIVATE for p in (80, 443)],
                          "v6_80", "v6_443", "v6_9999")

    def test_host_itself_and_gateways_fail_fast(self, allenv):
        port = allenv.host.port
        targets = [HOST_IP, allenv.na["gateway"], allenv.nb["gateway"]]
        r = probe(allenv.a, *[raw(t, port) for t in targets])
        assert_fast_failure(r)
        time.sleep(GRACE)
        assert allenv.host.accepted == []

    def test_other_sandbox_unreachable(self, allenv):
        b = allenv.b
        b.put_file("/workspace/srv.py", b"import socket\n"
                   b"s = socket.create_server(('0.0.0.0', 7777))\n"
                   b"while True:\n    c, _ = s.accept(); c.sendall(b'sandbox-b\\n'); c.close()\n")
        b.sh("python3 /workspace/srv.py >/dev/null 2>&1 &")
        own = lambda: probe(b, raw(allenv.nb["address"], 7777))[0].get("recv") == "sandbox-b\n"
        assert wait_until(own, 10), "B's own listener never came up (control)"
        r = probe(allenv.a, raw(allenv.nb["address"], 7777))
        assert_fast_failure(r)

    def test_host_port_opens_exactly_that_port(self, allenv):
        o, c = allenv.opened, allenv.closed
        r = probe(allenv.a, raw(HOST_INTERNAL, o.port), raw(HOST_INTERNAL, c.port),
                  raw("169.254.100.1", o.port))
        assert r[0]["recv"] == "opened-port\n", r[0]
        assert r[2]["recv"] == "opened-port\n", r[2]
        assert not r[1]["ok"] and r[1]["err"] == "refused" and r[1]["took"] < FAST, r[1]
        # B has no host port: the same port is closed there
        rb = probe(allenv.b, raw(HOST_INTERNAL, o.port))
        assert rb[0]["err"] == "refused" and rb[0]["took"] < FAST, rb
        time.sleep(GRACE)
        assert len(o.accepted) == 2 and c.accepted == []


# ---------------------------------------------------------------------------
# mode allow

@pytest.fixture(scope="class")
def allowenv(fakenet, tmp_path_factory):
    e = AllEnv()
    e.h = NetHutch(tmp_path_factory.mktemp("rt-allow"))
    e.listeners = []
    try:
        e.opened = HostListener(addrs=("127.0.0.1",), reply=b"opened-port\n")
        e.closed = HostListener(addrs=("127.0.0.1",), reply=b"closed-port\n")
        e.host = HostListener(addrs=(HOST_IP,))
        e.listeners += [e.opened, e.closed, e.host]
        e.links_before = hutch_links()
        e.c = net_sandbox(e.h, "--network", "allow:api.test.example,other.test.example:8443",
                          "--host-port", str(e.opened.port))
        e.d = net_sandbox(e.h, "--network", f"allow:{WEB}:8443")
        e.links_after = hutch_links()
        for sb in (e.c, e.d):
            install_ca(sb, fakenet)
        yield e
    finally:
        for lst in e.listeners:
            lst.close()
        e.h.cleanup()


class TestAllow:
    def test_status_and_no_host_link(self, allowenv):
        n = network(allowenv.c)
        assert n["mode"] == "allow"
        assert n["hosts"] == ["api.test.example:443", "other.test.example:8443"]
        assert n["resolver"] == RESOLVER and n["host_ports"] == [allowenv.opened.port]
        assert n["refused"] == [] and n["refused_total"] == 0
        for k in ("address", "gateway", "host_link"):
            assert not n.get(k), n
        assert network(allowenv.d)["hosts"] == [f"{WEB}:8443"]
        # the proxy dials from the supervisor, in the fake internet's host netns
        assert in_host_netns(allowenv.c.status()["supervisor_pid"])
        assert allowenv.links_after == allowenv.links_before
        conf = allowenv.c.sh("cat /etc/resolv.conf")
        assert [l for l in conf.splitlines() if l.startswith("nameserver")] == ["nameserver 127.0.0.1"]

    def test_listed_names_over_tls(self, allowenv, fakenet):
        mark = fakenet.mark()
        r = probe(allowenv.c, resolve("api.test.example"),
                  tls("api.test.example", 443, "api.test.example"),
                  tls("other.test.example", 8443, "other.test.example"))
        assert r[0]["addrs"] == [WEB], r[0]
        assert r[1]["body"] == f"fake-https {WEB}:443 sni=api.test.example\n", r[1]
        assert r[2]["body"] == f"fake-https {WEB}:8443 sni=other.test.example\n", r[2]
        # the supervisor dialled from the host; it asked the fake resolver
        reqs = [e for e in fakenet.since(mark, "https443") if e["event"] == "request"]
        assert len(reqs) == 1 and reqs[0]["peer"].split(":")[0] == HOST_IP, reqs
        assert "api.test.example" in fakenet.dns_names(mark)

    def test_sni_spoof_dials_the_name_not_the_address(self, allowenv, fakenet):
        mark = fakenet.mark()
        r = probe(allowenv.c, tls(UNLISTED, 443, "api.test.example"))
        assert r[0]["body"] == f"fake-https {WEB}:443 sni=api.test.example\n", r[0]
        assert len([e for e in fakenet.since(mark, "https443") if e["event"] == "request"]) == 1
        assert_logs_empty(fakenet, mark, "unlisted443")

    def test_unlisted_names_get_nxdomain_and_are_never_forwarded(self, allowenv, fakenet):
        nonce = secrets.token_hex(4)
        mark = fakenet.mark()
        names = [f"leak-{nonce}.test.example", "unlisted.test.example", f"{nonce}.exfil.example"]
        r = probe(allowenv.c, *[resolve(n) for n in names],
                  {"op": "dns", "server": "127.0.0.1", "names": [f"stub-{nonce}.test.example"]},
                  {"op": "dns", "server": DNS, "names": [f"direct-{nonce}.test.example"]},
                  {"op": "dns", "server": "127.0.0.1", "names": [f"aaaa-{nonce}.test.example"],
                   "qtype": 28})
        for x in r[:3]:
            assert x["err"] in (f"gai:{socket.EAI_NONAME}",), x
            assert x["took"] < FAST, x
        for x in r[3:]:
            reply = x["replies"][0]
            assert x["took"] < FAST, x
            # NXDOMAIN from the stub; a direct query to a real server's
            # address must not get an answer from it either
            assert reply.get("rcode") == 3 or ("err" in reply and x["op"]["server"] == DNS), x
        time.sleep(GRACE)
        seen = fakenet.dns_names(mark)
        assert not [n for n in seen if nonce in n or n == "unlisted.test.example"], seen

    def test_everything_else_fails_fast(self, allowenv, fakenet):
        mark = fakenet.mark()
        hp = allowenv.host.port
        r = probe(allowenv.c,
                  tls(UNLISTED, 443, "unlisted.test.example"),    # unlisted SNI
                  tls(WEB, 443, None),                            # direct IP, not listed
                  tls(WEB, 8443, "api.test.example"),             # listed name, wrong port
                  raw(WEB, 80, "GET / HTTP/1.0\r\n\r\n"),         # plain HTTP
                  raw(WEB, 443, "GET / HTTP/1.1\r\nHost: api.test.example\r\n\r\n"),
                  raw(WEB6, 443), raw(WEB6, 80),                  # IPv6
                  raw(HOST_IP, hp),                               # the host itself
                  *[raw(a, 80) for a in PRIVATE.values()],
                  *[tls(a, 443, None) for a in PRIVATE.values()],  # a ClientHello, no SNI
                  {"op": "udp", "host": WEB, "port": 9999, "data": "allow-udp"},
                  {"op": "udp", "host": WEB6, "port": 9999, "data": "allow-udp6"})
        assert_fast_failure(r[:-2])
        for x in r[-2:]:
            assert x["took"] < FAST, x
        plain = r[3]
        assert plain["err"] == "refused", plain
        assert r[0]["connected"] and r[0]["err"] in ("reset", "eof"), r[0]
        assert_logs_empty(fakenet, mark, "https443", "https8443", "unlisted443", "http80",
                          "udpsink", "v6_80", "v6_443", "v6_9999",
                          *[f"{n}_{p}" for n in PRIVATE for p in (80, 443)])
        assert allowenv.host.accepted == []
        # the proxy looked up no name it was not allowed to
        assert [n for n in fakenet.dns_names(mark) if n != "api.test.example"] == []

    def test_host_port(self, allowenv):
        o, c = allowenv.opened, allowenv.closed
        r = probe(allowenv.c, raw(HOST_INTERNAL, o.port), raw(HOST_INTERNAL, c.port))
        assert r[0]["recv"] == "opened-port\n", r[0]
        assert r[1]["err"] == "refused" and r[1]["took"] < FAST, r[1]
        rd = probe(allowenv.d, raw(HOST_INTERNAL, o.port))
        assert rd[0]["err"] == "refused" and rd[0]["took"] < FAST, rd
        time.sleep(GRACE)
        assert len(o.accepted) == 1 and c.accepted == []

    def test_listed_ip_entry(self, allowenv, fakenet):
        mark = fakenet.mark()
        # (198.51.100.10:443 is not probed: "443 or the listed port" lets it through)
        r = probe(allowenv.d, tls(WEB, 8443, WEB), tls(UNLISTED, 8443, None),
                  resolve("api.test.example"), tls(UNLISTED, 8443, "api.test.example"))
        assert r[0]["body"] == f"fake-https {WEB}:8443 sni=None\n", r[0]
        assert_fast_failure(r[1:])
        assert r[2]["err"] == f"gai:{socket.EAI_NONAME}", r[2]
        reqs = [e for e in fakenet.since(mark, "https8443") if e["event"] == "request"]
        assert len(reqs) == 1, reqs
        assert_logs_empty(fakenet, mark, "https443", "unlisted443")
        assert "api.test.example" not in fakenet.dns_names(mark)

    def test_big_transfers_are_spliced_intact(self, allowenv):
        import hashlib
        n = 8 << 20
        pat = bytes(range(256)) * 16
        want = hashlib.sha256((pat * (n // len(pat) + 1))[:n]).hexdigest()
        r = probe(allowenv.c, {"op": "https", "host": "api.test.example", "port": 443,
                               "sni": "api.test.example", "path": f"/big/{n}"},
                  {"op": "https", "host": "other.test.example", "port": 8443,
                   "sni": "other.test.example", "upload": n}, timeout=120)
        assert r[0]["ok"] and r[0]["len"] == n and r[0]["sha256"] == want, r[0]
        assert r[1]["ok"] and r[1]["text"] == f"{n} {want}\n", r[1]

    def test_client_hello_in_pieces(self, allowenv):
        r = probe(allowenv.c, {"op": "tls_split", "host": "api.test.example", "port": 443,
                               "sni": "api.test.example", "pieces": 5, "gap": 0.05})
        assert r[0]["body"] == f"fake-https {WEB}:443 sni=api.test.example\n", r[0]

    def test_name_matching_is_exact_but_case_blind(self, allowenv, fakenet):
        mark = fakenet.mark()
        r = probe(allowenv.c, resolve("API.Test.Example"),
                  tls(WEB, 443, "API.Test.Example"))
        assert r[0]["addrs"] == [WEB], r[0]
        assert r[1]["ok"] and r[1]["body"].startswith(f"fake-https {WEB}:443 sni="), r[1]
        mark = fakenet.mark()
        tricks = ["xapi.test.example", "sub.api.test.example", "api.test.exampl",
                  "api.test.example.other.test.example", "other.test.example.api.test.example"]
        r = probe(allowenv.c, *[resolve(n) for n in tricks], *[tls(WEB, 443, n) for n in tricks])
        assert_fast_failure(r)
        for x in r[:len(tricks)]:
            assert x["err"] == f"gai:{socket.EAI_NONAME}", x
        assert_logs_empty(fakenet, mark, "https443", "unlisted443")
        assert not set(fakenet.dns_names(mark)) & set(tricks), fakenet.dns_names(mark)

    def test_refused_log_in_status(self, allowenv):
        nonce = secrets.token_hex(4)
        t0 = time.time()
        before = network(allowenv.c)["refused_total"]
        probe(allowenv.c, resolve(f"dns-{nonce}.test.example"),
              tls(UNLISTED, 443, f"tls-{nonce}.test.example"))
        n = network(allowenv.c)
        assert n["refused_total"] >= before + 2
        mine = {e["what"]: e for e in n["refused"] if nonce in (e.get("host") or "")}
        assert set(mine) == {"dns", "tls"}, n["refused"]
        assert mine["dns"]["host"] == f"dns-{nonce}.test.example"
        assert mine["tls"]["host"] == f"tls-{nonce}.test.example"
        assert mine["tls"]["address"].endswith(":443"), mine["tls"]
        for e in mine.values():
            assert isinstance(e["at"], (int, float)) and t0 - 1 <= e["at"] <= time.time() + 1, e
            assert e["reason"], e
        r = allowenv.h("inspect", allowenv.c.id)
        assert json.loads(r.stdout)["network"]["refused_total"] == n["refused_total"]

    def test_refused_log_is_bounded(self, allowenv):
        nonce = secrets.token_hex(4)
        before = network(allowenv.c)["refused_total"]
        names = [f"b{i}-{nonce}.test.example" for i in range(70)]
        r = probe(allowenv.c, {"op": "dns", "server": "127.0.0.1", "names": names})
        assert all(x.get("rcode") == 3 for x in r[0]["replies"]), r
        n = network(allowenv.c)
        assert len(n["refused"]) == 64, len(n["refused"])
        assert n["refused_total"] >= before + 70
        # the newest are kept
        assert n["refused"][-1]["host"] == names[-1] or n["refused"][0]["host"] == names[-1], \
            n["refused"][-1]


def test_allow_listed_name_resolving_to_metadata_or_loopback_is_refused(nh, fakenet):
    """The proxy dials what the name resolves to, but never this machine or
    link-local (docs/network.md): a listed name cannot point it at the
    metadata service or at the host's loopback."""
    lo = HostListener(addrs=("127.0.0.1",))
    try:
        sb = net_sandbox(nh, "--network",
                         "allow:metadata.test.example,loopback.test.example:%d" % lo.port)
        install_ca(sb, fakenet)
        mark = fakenet.mark()
        r = probe(sb, tls("metadata.test.example", 443, "metadata.test.example"),
                  tls("loopback.test.example", lo.port, "loopback.test.example"))
        assert_fast_failure(r)
        assert "metadata.test.example" in fakenet.dns_names(mark)  # it did look it up
        assert_logs_empty(fakenet, mark, "metadata_443")
        assert lo.accepted == []
        whats = {(e["what"], e.get("host")) for e in network(sb)["refused"]}
        assert ("tls", "metadata.test.example") in whats or \
            ("connect", "metadata.test.example") in whats, whats
        sb.rm()
    finally:
        lo.close()


@pytest.mark.parametrize("mode", ["all", "allow:api.test.example"])
def test_run_verb_takes_the_network_option(nh, fakenet, mode):
    """`hutch run` wires the mode like `create` (no CA file here: the check
    is reachability, so verification is off)."""
    code = """import socket, ssl
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
s = ctx.wrap_socket(socket.create_connection(("api.test.example", 443), timeout=8),
                    server_hostname="api.test.example")
s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
data = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    data += b
print(data.split(b"\\r\\n\\r\\n", 1)[1].decode(), end="")
"""
    r = nh("run", "--network", mode, "--", "python3", "-c", code, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip() == f"fake-https {WEB}:443 sni=api.test.example", r.stdout
    assert nh.ids() == []


def test_allow_listed_ip_of_metadata_or_the_host_is_refused(nh, fakenet):
    """A listed IP of this machine, link-local or reserved is not dialled
    either (host services go through --host-port)."""
    host = HostListener(addrs=(HOST_IP, "127.0.0.1"))
    try:
        sb = net_sandbox(nh, "--network",
                         f"allow:169.254.169.254,{HOST_IP}:{host.port},127.0.0.1:{host.port},"
                         f"hostaddr.test.example:{host.port}")
        install_ca(sb, fakenet)
        mark = fakenet.mark()
        r = probe(sb, tls("169.254.169.254", 443, None), tls(HOST_IP, host.port, None),
                  tls("127.0.0.1", host.port, None),
                  tls("hostaddr.test.example", host.port, "hostaddr.test.example"))
        assert_fast_failure(r)
        assert_logs_empty(fakenet, mark, "metadata_443")
        assert host.accepted == []
        sb.rm()
    finally:
        host.close()


def test_allow_upstream_refusing_is_reset_and_recorded(nh, fakenet):
    sb = net_sandbox(nh, "--network", "allow:other.test.example:9443")  # nothing listens there
    install_ca(sb, fakenet)
    r = probe(sb, tls("other.test.example", 9443, "other.test.example"))
    assert_fast_failure(r)
    assert r[0]["connected"] and r[0]["err"] in ("reset", "eof"), r[0]
    refused = [e for e in network(sb)["refused"] if e.get("host") == "other.test.example"]
    assert refused and refused[-1]["what"] in ("connect", "tls") and refused[-1]["reason"], \
        network(sb)["refused"]
    sb.rm()


def sandbox_with_env(h, env, *opts):
    r = h("create", *opts, "--json", env=env)
    assert r.returncode == 0, r.stderr
    sb = Sandbox(h, json.loads(r.stdout))
    with open(os.path.join(HERE, "netprobe.py"), "rb") as f:
        sb.put_file("/workspace/probe.py", f.read(), "644")
    return sb


def test_resolver_without_port(nh, fakenet):
    sb = sandbox_with_env(nh, {"HUTCH_RESOLVER": DNS}, "--network", "allow:api.test.example")
    assert network(sb)["resolver"] == f"{DNS}:53"
    r = probe(sb, resolve("api.test.example"))
    assert r[0]["addrs"] == [WEB], r[0]
    sb.rm()


def test_pool_from_the_environment(nh, fakenet):
    """HUTCH_NET_POOL takes a CIDR from /8 to /16 (docs/network.md): a /30 for
    every uid slot must fit; smaller pools are refused naming the rule."""
    r = nh("create", "--network", "all", env={"HUTCH_NET_POOL": "10.201.8.0/24"})
    assert r.returncode == 64 and "a /16 or larger" in r.stderr.decode(), r.stderr
    sb = sandbox_with_env(nh, {"HUTCH_NET_POOL": "10.201.0.0/16"}, "--network", "all")
    n = network(sb)
    assert n["address"].startswith("10.201.") and n["gateway"].startswith("10.201."), n
    install_ca(sb, fakenet)
    r = probe(sb, tls("api.test.example", 443, "api.test.example"))
    assert r[0]["body"] == f"fake-https {WEB}:443 sni=api.test.example\n", r[0]
    assert sb.rm().returncode == 0
    assert_host_clean(n["host_link"], n["address"])


def test_pool_clashing_with_a_host_route_is_refused(nh, fakenet):
    links = hutch_links()
    r = nh("create", "--network", "all", env={"HUTCH_NET_POOL": "198.51.0.0/16"})
    err = r.stderr.decode()
    assert r.returncode != 0 and "HUTCH_NET_POOL" in err and "198.51.100.0/24" in err, err
    assert nh.ids() == [] and hutch_links() == links


def test_table_stays_until_the_last_sandbox_goes(nh, fakenet):
    x = net_sandbox(nh, "--network", "all")
    y = net_sandbox(nh, "--network", "all")
    install_ca(y, fakenet)
    nx, ny = network(x), network(y)
    assert x.rm().returncode == 0
    assert wait_until(lambda: not link_exists(nx["host_link"]), 5)
    assert link_exists(ny["host_link"])
    assert nft_table_exists()
    r = probe(y, tls("api.test.example", 443, "api.test.example"))
    assert r[0]["body"] == f"fake-https {WEB}:443 sni=api.test.example\n", r[0]
    assert y.rm().returncode == 0
    assert_host_clean(ny["host_link"], ny["address"])


# ---------------------------------------------------------------------------
# mode none still has no network

def test_none_mode_dns_fails_at_once(nh, fakenet):
    links = hutch_links()
    sb = net_sandbox(nh, "--network", "none")
    try:
        mark = fakenet.mark()
        r = probe(sb, resolve("api.test.example"), raw(WEB, 443),
                  {"op": "dns", "server": DNS, "names": ["none.test.example"], "timeout": 1})
        assert_fast_failure(r[:2])
        assert r[2]["took"] < FAST and (not r[2]["ok"] or "err" in r[2]["replies"][0]), r[2]
        assert network(sb)["mode"] == "none"
        assert hutch_links() == links
        assert_logs_empty(fakenet, mark, "dns", "https443")
    finally:
        sb.rm()


# ---------------------------------------------------------------------------
# libnl is loaded where a network is made, never for none (issue 31: the
# CLI's start paid for it, netpolicy/libnl-internal.h); lo comes up without it

# IFF_UP and IFF_RUNNING of lo, read inside with SIOCGIFFLAGS
LO_FLAGS = ("import fcntl, socket, struct; s = socket.socket(); "
            "f = struct.unpack('16sH', fcntl.ioctl(s, 0x8913, struct.pack('16sH', b'lo', 0)))[1]; "
            "print(f & 1, f >> 6 & 1)")


def libnl_mapped(sb):
    st = json.loads(sb.hutch("inspect", sb.id).stdout)
    out = []
    for pid in (st["supervisor_pid"], st["init_pid"]):
        with open("/proc/%d/maps" % pid) as f:
            out.append("/libnl-route-3.so" in f.read())
    return out


def test_libnl_only_where_a_network_is_made(nh, fakenet):
    none = net_sandbox(nh, "--network", "none")
    try:
        assert none.sh("python3 -c %s" % shlex.quote(LO_FLAGS)).split() == ["1", "1"]
        assert libnl_mapped(none) == [False, False], "network none loaded libnl"
    finally:
        none.rm()
    wired = net_sandbox(nh, "--network", "all")
    try:
        assert wired.sh("python3 -c %s" % shlex.quote(LO_FLAGS)).split() == ["1", "1"]
        # loaded by the supervisor before init's clone, inherited by init
        assert libnl_mapped(wired) == [True, True]
    finally:
        wired.rm()


@pytest.mark.parametrize("mode", ["all", "allow:api.test.example"])
def test_missing_libnl_named_with_its_package(nh, fakenet, tmp_path, mode):
    """A host without libnl's shared libraries (the library's name found
    first on LD_LIBRARY_PATH is not one): network none still works, a
    network is refused naming the packages to install."""
    broken = tmp_path / "lib"
    broken.mkdir()
    (broken / "libnl-route-3.so.200").write_bytes(b"")
    env = {"LD_LIBRARY_PATH": str(broken), "HUTCH_LXCFS": "none"}
    r = nh("run", "--network", "none", "--", "true", env=env)
    assert r.returncode == 0, r.stderr.decode()
    links = hutch_links()
    r = nh("run", "--network", mode, "--", "true", env=env)
    err = r.stderr.decode()
    assert r.returncode != 0
    assert "needs libnl" in err and "libnl-route-3-200" in err and "file too short" in err, err
    assert nh.ids() == [] and hutch_links() == links


# ---------------------------------------------------------------------------
# nothing the modes add stays on the host

def host_clean(link, address):
    word = re.compile(rf"\b{link}\b")
    rules = nft_ruleset()
    return (not link_exists(link)
            and not word.search(sh("ip", "route", "show", "table", "all").stdout)
            and not word.search(sh("ip", "-4", "addr", "show").stdout)
            and not word.search(rules) and not re.search(rf"\b{re.escape(address)}\b", rules)
            and (hutch_links() or not nft_table_exists()))


def assert_host_clean(link, address):
    # The supervisor removes its host link right after answering DELETE /.
    wait_until(lambda: host_clean(link, address), 5)
    assert not link_exists(link), f"{link} still exists"
    word = re.compile(rf"\b{link}\b")
    assert not word.search(sh("ip", "route", "show", "table", "all").stdout)
    assert not word.search(sh("ip", "-4", "addr", "show").stdout)
    rules = nft_ruleset()
    assert not word.search(rules) and not re.search(rf"\b{re.escape(address)}\b", rules), rules
    if not hutch_links():
        assert not nft_table_exists(), "table inet hutch left after the last sandbox"


@pytest.mark.parametrize("mode", ["all", "allow:api.test.example"])
def test_rm_leaves_nothing(nh, fakenet, mode):
    links = hutch_links()
    sb = net_sandbox(nh, "--network", mode)
    n = network(sb)
    assert sb.rm().returncode == 0
    if mode == "all":
        assert_host_clean(n["host_link"], n["address"])
    assert set(hutch_links()) <= set(links)


def test_ttl_expiry_leaves_nothing(nh, fakenet):
    sb = net_sandbox(nh, "--network", "all", "--ttl", "2")
    n = network(sb)
    assert link_exists(n["host_link"])
    assert wait_until(lambda: not os.path.exists(os.path.join(nh.rtdir, sb.id)), 20)
    assert wait_until(lambda: not link_exists(n["host_link"]), 5)
    assert_host_clean(n["host_link"], n["address"])


@pytest.mark.parametrize("mode", ["all", "allow:api.test.example"])
def test_kill9_supervisor_then_gc_leaves_nothing(nh, fakenet, mode):
    links = hutch_links()
    sb = net_sandbox(nh, "--network", mode)
    n = network(sb)
    sup = sb.status()["supervisor_pid"]
    os.kill(sup, signal.SIGKILL)
    assert wait_until(lambda: proc_comm(sup) is None, 10)
    r = nh("gc")
    assert r.returncode == 0, r.stderr
    assert nh.ids() == []
    assert cgroups_gone(sb.id)
    if mode == "all":
        assert_host_clean(n["host_link"], n["address"])
    assert set(hutch_links()) <= set(links)


ATTACKS = r"""
import errno, json, socket, subprocess
out = {}
def try_socket(name, *args):
    try:
        socket.socket(*args).close()
        out[name] = "opened"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
try_socket("packet", socket.AF_PACKET, socket.SOCK_RAW, 0)
try_socket("raw_icmp", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
try_socket("raw6", socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_TCP)
try_socket("netfilter", socket.AF_NETLINK, socket.SOCK_RAW, 12)   # NETLINK_NETFILTER
try_socket("xfrm", socket.AF_NETLINK, socket.SOCK_RAW, 6)         # NETLINK_XFRM
for name, cmd in {
    "route_del": "ip route del local 0.0.0.0/0 dev lo table local",
    "route_add": "ip route add 192.0.2.0/24 dev lo",
    "link_down": "ip link set lo down",
    "addr_add": "ip addr add 10.9.9.9/32 dev lo",
    "resolv": "echo nameserver 198.51.100.53 > /etc/resolv.conf",
    "ipv6_on": "echo 0 > /proc/sys/net/ipv6/conf/all/disable_ipv6",
}.items():
    out[name] = subprocess.run(["sh", "-c", cmd], capture_output=True).returncode
print(json.dumps(out))
"""


@pytest.mark.parametrize("mode", ["all", "allow:api.test.example"])
def test_sandbox_cannot_rewire_its_network(nh, fakenet, mode):
    """The mode is enforced from outside appuser's reach: no raw or packet
    sockets, no netfilter/xfrm netlink (seccomp), no route, link, address,
    resolver or IPv6 change (no CAP_NET_ADMIN, read-only /etc and /proc/sys).
    Afterwards the policy still holds."""
    sb = net_sandbox(nh, "--network", mode)
    try:
        r = sb.run(argv=["python3", "-c", ATTACKS], timeout=60)
        assert r["exit_code"] == 0, r
        out = json.loads(r["stdout"])
        for k in ("packet", "raw_icmp", "raw6", "netfilter", "xfrm"):
            assert out[k] in ("EPERM", "EACCES", "EAFNOSUPPORT", "EPROTONOSUPPORT"), (k, out)
        for k in ("route_del", "route_add", "link_down", "addr_add", "resolv", "ipv6_on"):
            assert out[k] != 0, (k, out)
        # the policy is unchanged: an unlisted place is still unreachable
        ops = probe(sb, raw(PRIVATE["lan10"], 80))
        assert not ops[0].get("connected"), ops
    finally:
        sb.rm()


@pytest.mark.parametrize("mode", ["all", "allow:api.test.example"])
def test_host_without_a_nameserver(nh, fakenet, tmp_path, mode):
    """A host whose resolv.conf names no IPv4 nameserver (and no
    HUTCH_RESOLVER): the sandbox is still made, says so in /status and in
    its events log (why and the fix: the supervisor's own log goes nowhere),
    and its DNS fails at once instead of hanging; addresses still work in
    all."""
    empty = tmp_path / "resolv.conf"
    empty.write_text("# no nameserver\n")
    env = {k: v for k, v in nh.env.items() if k != "HUTCH_RESOLVER"}
    # a private mount namespace whose /etc/resolv.conf is empty: the
    # supervisor forked from this create lives on in it
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        f'mount --bind "{empty}" /etc/resolv.conf && exec "$0" create --json --network "$1"',
                        HUTCH, mode], env=env, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    sb = Sandbox(nh, json.loads(r.stdout))
    try:
        assert network(sb)["resolver"] == "none"
        warn = [ln for ln in nh("events", sb.id).stdout.decode().splitlines() if "warning:" in ln]
        assert len(warn) == 1 and "warning: DNS: the sandbox's names fail (SERVFAIL): " \
            "/etc/resolv.conf names no IPv4 nameserver: set HUTCH_RESOLVER=IP" in warn[0], warn
        with open(os.path.join(HERE, "netprobe.py"), "rb") as f:
            sb.put_file("/workspace/probe.py", f.read(), "644")
        t = time.monotonic()
        res = sb.run(argv=["getent", "hosts", "api.test.example"], timeout=30)
        assert res["exit_code"] != 0 and time.monotonic() - t < 5, res
        if mode == "all":
            ops = probe(sb, raw(WEB, 80, "GET / HTTP/1.0\r\n\r\n"))
            assert ops[0].get("connected"), ops
    finally:
        sb.rm()
