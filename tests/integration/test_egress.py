# SPDX-License-Identifier: Apache-2.0
"""egress= (the cloud's MistralSandbox option, issue 27): the IP/CIDR
destinations a sandbox may reach. With it the sandbox reaches those and
nothing else beyond its loopback, with network none or all (the cloud's
deny-all egress policy with an allow list, koyeb's outbound_allowlist); an
empty list blocks everything; names are not resolved (egress is
addresses). Enforced by nftables in the sandbox's own network namespace
(netpolicy/nft.c, table inet hutch_egress); mode all's floor (this
machine, private and link-local ranges) still holds on the host side.

In the fake internet (netfake.py): run only under flock /work/locks/net.lock
(docs/history.md, "Hermetic tests")."""
import json

import pytest

from netfake import BOUND, DNS, PRIVATE, UNLISTED, WEB
from conftest import wait_until
from test_network import (assert_fast_failure, assert_logs_empty, net_sandbox, nh,  # noqa: F401
                          probe, raw, resolve)

pytestmark = pytest.mark.usefixtures("fakenet")


def http(host):
    return raw(host, 80, "GET / HTTP/1.0\r\n\r\n")


def udp(host, data):
    return {"op": "udp", "host": host, "port": 9999, "data": data}


def test_none_with_egress_reaches_the_listed_address_only(nh, fakenet):
    sb = net_sandbox(nh, "--egress", f" {WEB} ", "--egress", "10.99.0.0/24")
    mark = fakenet.mark()
    r = probe(sb, http(WEB), raw(WEB, 443, "not tls\r\n\r\n"), udp(WEB, "egress-udp"), raw(UNLISTED, 443),
              raw(BOUND, 443), raw(DNS, 53), resolve("api.test.example"),
              raw(PRIVATE["lan10"], 80), raw(PRIVATE["metadata"], 80))
    assert r[0]["recv"].endswith(f"fake-http {WEB}:80\n"), r[0]
    assert r[1]["connected"], r[1]  # any port and protocol of a listed address
    # not listed, a name, and a listed private range (the host's floor):
    # refused at once, and nothing arrived
    assert_fast_failure(r[3:])
    assert r[6]["err"].startswith("gai:"), r[6]
    assert_logs_empty(fakenet, mark, "unlisted443", "bound443", "dns", "lan10_80",
                      "metadata_80")
    assert wait_until(lambda: [e["data"] for e in fakenet.since(mark, "udpsink")]
                      == ["egress-udp"], 10), fakenet.since(mark, "udpsink")
    # what is enforced, normalized as the cloud's client does
    st = sb.status()
    assert st["config"]["network"] == "none"
    assert st["network"]["mode"] == "all"  # as enforced: all, narrowed by the table
    assert st["config"]["egress"] == [f"{WEB}/32", "10.99.0.0/24"]
    assert st["network"]["egress"] == [f"{WEB}/32", "10.99.0.0/24"]
    assert "nameserver" not in sb.sh("cat /etc/resolv.conf")
    info = json.loads(nh("inspect", sb.id).stdout)
    assert info["config"]["egress"] == [f"{WEB}/32", "10.99.0.0/24"]


def test_all_with_egress_narrows_to_the_cidr(nh, fakenet):
    # 198.51.100.10/31: WEB (.10) and UNLISTED (.11), not BOUND (.12)
    sb = net_sandbox(nh, "--network", "all", "--egress", "198.51.100.11/31")
    mark = fakenet.mark()
    r = probe(sb, http(WEB), raw(UNLISTED, 443, "not tls\r\n\r\n"), raw(BOUND, 443),
              raw(DNS, 53), resolve("api.test.example"))
    assert r[0]["recv"].endswith(f"fake-http {WEB}:80\n"), r[0]
    assert r[1]["connected"], r[1]
    assert_fast_failure(r[2:])
    assert_logs_empty(fakenet, mark, "bound443", "dns")
    assert fakenet.dns_names(mark) == []  # no name left the sandbox
    assert sb.status()["config"]["egress"] == ["198.51.100.10/31"]


def test_empty_egress_blocks_everything(nh, fakenet):
    sb = net_sandbox(nh, "--network", "all", "--egress", "")
    mark = fakenet.mark()
    r = probe(sb, http(WEB), raw(UNLISTED, 443), resolve("api.test.example"))
    assert_fast_failure(r)
    assert_logs_empty(fakenet, mark, "http80", "unlisted443")
    st = sb.status()
    assert st["config"]["egress"] == [] and st["network"]["egress"] == []
    assert st["config"]["network"] == "all" and st["network"]["mode"] == "none"
    assert "address" not in st["network"]  # wired as none: no link at all


@pytest.mark.parametrize("entry,why", [
    ("10.0.0.1%eth0", "expected an IP address or CIDR (scoped/zone-ID addresses are not "
                      "allowed)"),
    ("fe80::1%lo", "expected an IP address or CIDR (scoped/zone-ID addresses are not allowed)"),
    ("api.test.example", "expected an IP address or CIDR"),
    ("10.0.0.1/33", "expected an IP address or CIDR"),
    ("010.0.0.1", "expected an IP address or CIDR"),
])
def test_bad_entries_are_refused_naming_them(nh, entry, why):
    r = nh("create", "--egress", entry)
    assert r.returncode == 64, r.stderr
    assert f"invalid egress entry '{entry}': {why}".encode() in r.stderr, r.stderr
    assert nh.ids() == []


@pytest.mark.parametrize("opts,why", [
    (("--network", "allow:api.test.example"), "egress with network allow"),
    (("--network", "all", "--header-binding", "api.test.example:X-K=v"),
     "header bindings with egress"),
    (("--network", "all", "--region", "fr-par"), "network all and no egress"),
])
def test_combinations_refused_with_the_fix(nh, opts, why):
    r = nh("create", "--egress", WEB, *opts)
    assert r.returncode == 64 and why.encode() in r.stderr, r.stderr
