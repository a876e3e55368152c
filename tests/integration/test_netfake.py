# SPDX-License-Identifier: Apache-2.0
"""Self-check of the fake internet (netfake.py) from its host netns alone:
each fake server answers and logs, so a test that finds a log empty proves
something about hutch, not about the fixture; and nothing of it is in the
machine's own network namespace."""
import os
import socket
import ssl
import struct
import subprocess

import pytest

from netfake import (DNS, HOST_IP, HOST_NS, NS, PRIVATE, UNLISTED, WEB, WEB6, HostListener,
                     in_host_netns, read_sysctl)

# hutch, the host's listeners and every client here run in the fake
# internet's host netns (netfake.py), never in the machine's own.
pytestmark = pytest.mark.usefixtures("fakenet")


def dns_query(server, name, qtype=1, timeout=3):
    """One UDP query; returns (rcode, [A addresses])."""
    q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    q += struct.pack("!HH", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(q, (server, 53))
        msg = s.recv(4096)
    finally:
        s.close()
    rcode = msg[3] & 0xF
    an = struct.unpack("!H", msg[6:8])[0]
    addrs, off = [], len(q)
    for _ in range(an):
        off += 2  # name pointer
        typ, _cls, _ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        if typ == 1:
            addrs.append(socket.inet_ntoa(msg[off:off + rdlen]))
        off += rdlen
    return rcode, addrs


def test_https_servers_with_test_ca(fakenet):
    for ip, port, name in [(WEB, 443, "api.test.example"), (WEB, 8443, "other.test.example"),
                           (UNLISTED, 443, "unlisted.test.example")]:
        r = subprocess.run(["curl", "-sS", "--max-time", "5", "--noproxy", "*",
                            "--cacert", fakenet.ca, "--resolve", f"{name}:{port}:{ip}",
                            f"https://{name}:{port}/x"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"fake-https {ip}:{port} sni={name}\n"
    # an IP SAN too
    ctx = ssl.create_default_context(cafile=fakenet.ca)
    with socket.create_connection((WEB, 443), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname=WEB) as t:
            t.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert b"fake-https 198.51.100.10:443 sni=None" in t.recv(4096)
    reqs = [e for e in fakenet.log("https443") if e["event"] == "request"]
    assert reqs[-2]["sni"] == "api.test.example" and reqs[-2]["peer"].startswith(HOST_IP)


def test_plain_http(fakenet):
    r = subprocess.run(["curl", "-sS", "--max-time", "5", "--noproxy", "*", f"http://{WEB}/"],
                       capture_output=True, text=True)
    assert r.stdout == f"fake-http {WEB}:80\n", r.stderr
    assert fakenet.log("http80")[-1]["event"] == "request"


def test_dns(fakenet):
    mark = fakenet.mark()
    assert dns_query(DNS, "api.test.example") == (0, [WEB])
    assert dns_query(DNS, "unlisted.test.example") == (0, [UNLISTED])
    assert dns_query(DNS, "api.test.example", qtype=28) == (0, [])
    assert dns_query(DNS, "example.com")[0] == 3
    assert dns_query(DNS, "metadata.test.example") == (0, ["169.254.169.254"])
    assert fakenet.dns_names(mark) == ["api.test.example", "unlisted.test.example",
                                       "api.test.example", "example.com", "metadata.test.example"]


def test_udp_sink(fakenet):
    mark = fakenet.mark()
    for addr in (WEB, WEB6):
        s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"hello-sink", (addr, 9999))
        s.close()
    from conftest import wait_until
    assert wait_until(lambda: [e["data"] for e in fakenet.since(mark, "udpsink")] == ["hello-sink"], 5)
    assert wait_until(lambda: [e["data"] for e in fakenet.since(mark, "v6_9999")] == ["hello-sink"], 5)


def test_private_and_metadata_listeners_are_routed_into_the_netns(fakenet):
    mark = fakenet.mark()
    for name, addr in PRIVATE.items():
        for port in (80, 443):
            with socket.create_connection((addr, port), timeout=3) as s:
                assert s.recv(100) == f"fake-tcp {addr}:{port}\n".encode()
            assert len(fakenet.since(mark, f"{name}_{port}")) == 1
    with socket.create_connection((WEB6, 443), timeout=3) as s:
        assert s.recv(100) == f"fake-tcp {WEB6}:443\n".encode()
    # and the kernel really routes them through our veth, not eth0
    for addr in list(PRIVATE.values()) + [WEB, DNS, WEB6]:
        out = subprocess.run(["ip", "route", "get", addr], capture_output=True, text=True).stdout
        assert "hnt" in out and "eth0" not in out, out


def test_host_listener():
    h = HostListener()
    try:
        for a in ("127.0.0.1", HOST_IP):
            with socket.create_connection((a, h.port), timeout=3) as s:
                assert s.recv(100) == b"host-listener\n"
        from conftest import wait_until
        assert wait_until(lambda: len(h.accepted) == 2, 3)
    finally:
        h.close()


def test_forwarding_untouched(fakenet):
    assert read_sysctl("net.ipv4.ip_forward") in ("0", "1")


def test_nothing_of_it_on_the_machines_side(fakenet):
    """The tests run in the fake internet's host netns; the machine's own
    has no link, address or route of it (netfake.py's docstring)."""
    assert in_host_netns(os.getpid())  # this thread, the one that forks
    assert fakenet.host_side_problems() == []
    with fakenet.outside():
        assert not in_host_netns(os.getpid())
        out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True).stdout
        assert HOST_IP not in out
    for ns in (HOST_NS, NS):
        assert os.path.exists(f"/run/netns/{ns}")
