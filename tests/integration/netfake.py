# SPDX-License-Identifier: Apache-2.0
"""A fake internet for the network-mode tests, built from our own network
namespace so that no test packet can ever reach the real network.

    host  hnt<pid>h 198.51.100.1/24, 2001:db8:213::1/64
      |   veth       (+ host routes into the netns for 169.254.169.254/32,
      |               10.99.0.0/24, 192.168.213.0/24, 172.31.213.0/24,
      |               100.64.213.0/24: a broken block rule reaches a fake
      |               server there instead of a real network)
    netns hnt-inet-<pid>: hnt<pid>n 198.51.100.10 (+ .11 .53), 2001:db8:213::10;
      default route via 198.51.100.1; the private addresses on its lo

Servers in the netns (one python3 process, netfake_server.py, killed by
pid): HTTPS on 198.51.100.10:443 and :8443 and 198.51.100.11:443 (a cert from
a test CA made with the openssl CLI, SANs for every test name and both
IPs), plain HTTP on 198.51.100.10:80, DNS on 198.51.100.53:53 (A for
*.test.example -> 198.51.100.10, unlisted.test.example -> 198.51.100.11,
metadata.test.example -> 169.254.169.254, loopback.test.example -> 127.0.0.1,
hostaddr.test.example -> 198.51.100.1 (the host's end of the veth),
NXDOMAIN elsewhere), a UDP sink on 198.51.100.10:9999, TCP loggers on the
metadata / private / IPv6 addresses. Each logs JSON lines; `FakeNet.log()`
reads them.

The session fixture also records net.ipv4.ip_forward and restores it, runs
`hutch gc` at the end and fails loudly if the nftables table `inet hutch`
is still there (then deletes it).
"""
import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

PID = os.getpid()
NS = f"hnt-inet-{PID}"
VETH_HOST = f"hnt{PID}h"
VETH_NS = f"hnt{PID}n"

HOST_IP = "198.51.100.1"          # the host's own end of the fake uplink
WEB = "198.51.100.10"             # api/other.test.example
UNLISTED = "198.51.100.11"        # unlisted.test.example
BOUND = "198.51.100.12"           # bound.test.example: keep-alive HTTPS that logs headers
DNS = "198.51.100.53"
HOST6 = "2001:db8:213::1"
WEB6 = "2001:db8:213::10"
RESOLVER = f"{DNS}:53"

# name -> address of the "must never be reached" listeners
PRIVATE = {
    "metadata": "169.254.169.254",
    "lan10": "10.99.0.10",
    "lan192": "192.168.213.10",
    "lan172": "172.31.213.10",
    "cgnat": "100.64.213.10",
}
ROUTED_INTO_NS = ["169.254.169.254/32", "10.99.0.0/24", "192.168.213.0/24",
                  "172.31.213.0/24", "100.64.213.0/24"]
NAMES = ["api.test.example", "other.test.example", "unlisted.test.example", "bound.test.example",
         "direct.test.example"]

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"


def sh(*argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def nsexec(*argv, check=True):
    return sh("ip", "netns", "exec", NS, *argv, check=check)


def read_sysctl(name):
    with open("/proc/sys/" + name.replace(".", "/")) as f:
        return f.read().strip()


def write_sysctl(name, value):
    with open("/proc/sys/" + name.replace(".", "/"), "w") as f:
        f.write(value)


def nft_table_exists():
    return sh("nft", "list", "table", "inet", "hutch", check=False).returncode == 0


def hutch_links():
    """Names of the host links hutch made (hutch<slot>)."""
    out = sh("ip", "-o", "link", "show").stdout
    names = [ln.split(":")[1].strip().split("@")[0] for ln in out.splitlines()]
    return sorted(n for n in names if n.startswith("hutch") and n[5:].isdigit())


# ---- listening-socket readiness, read from /proc/PID/net (no traffic) ----

def _hex_addr(addr):
    if ":" in addr:
        raw = socket.inet_pton(socket.AF_INET6, addr)
        return "".join(raw[i:i + 4][::-1].hex() for i in range(0, 16, 4)).upper()
    return socket.inet_aton(addr)[::-1].hex().upper()


def listening(pid, proto, addr, port):
    fam6 = ":" in addr
    path = f"/proc/{pid}/net/{proto}{'6' if fam6 else ''}"
    want = f"{_hex_addr(addr)}:{port:04X}"
    try:
        with open(path) as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return False
    for ln in lines:
        fields = ln.split()
        if fields[1] == want and (proto == "udp" or fields[3] == "0A"):
            return True
    return False


# ---- a listener on the host itself ----

class HostListener:
    """TCP listener in the host netns on one port of several addresses
    (127.0.0.1, 198.51.100.1, ...). Logs each accepted connection."""

    def __init__(self, addrs=("127.0.0.1", HOST_IP), reply=b"host-listener\n"):
        self.reply = reply
        self.accepted = []
        self.socks = []
        for _ in range(20):
            try:
                self._bind(addrs)
                break
            except OSError:
                self._close_socks()
        else:
            raise RuntimeError(f"no free common port on {addrs}")
        self.stop = False
        self.threads = [threading.Thread(target=self._run, args=(s,), daemon=True)
                        for s in self.socks]
        for t in self.threads:
            t.start()

    def _bind(self, addrs):
        port = 0
        for a in addrs:
            s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET)
            self.socks.append(s)
            s.bind((a, port))
            s.listen(16)
            s.settimeout(0.1)
            port = s.getsockname()[1]
        self.port = port

    def _close_socks(self):
        for s in self.socks:
            s.close()
        self.socks = []

    def _run(self, s):
        while not self.stop:
            try:
                c, peer = s.accept()
            except OSError:
                continue
            self.accepted.append((s.getsockname()[0], peer[0], time.time()))
            try:
                c.sendall(self.reply)
            except OSError:
                pass
            c.close()

    def close(self):
        self.stop = True
        for t in self.threads:
            t.join()
        self._close_socks()


# ---- the fake internet ----

class FakeNet:
    def __init__(self, tmpdir):
        self.dir = str(tmpdir)
        self.proc = None
        self.servers = []
        self.made_ns = False
        self.made_veth = False

    # -- logs --
    def logpath(self, name):
        return os.path.join(self.dir, f"{name}.log")

    def log(self, name):
        try:
            with open(self.logpath(name)) as f:
                return [json.loads(ln) for ln in f if ln.endswith("\n")]
        except FileNotFoundError:
            return []

    def mark(self):
        """A snapshot of every log's length: `since(mark, name)` gives what
        came after it."""
        return {s["name"]: len(self.log(s["name"])) for s in self.servers}

    def since(self, mark, name):
        return self.log(name)[mark.get(name, 0):]

    def dns_names(self, mark=None):
        entries = self.since(mark, "dns") if mark else self.log("dns")
        return [e["name"] for e in entries if e.get("event") == "query"]

    def git_dir(self):
        """A bare git repository served by dumb HTTP at
        https://bound.test.example/git/repo.git (one commit: README)."""
        d = os.path.join(self.dir, "git")
        if not os.path.isdir(d):
            work = os.path.join(self.dir, "git-work")
            os.makedirs(work)
            env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                       GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t", HOME=self.dir)
            run = lambda *a, cwd=work: subprocess.run(a, cwd=cwd, env=env, check=True,
                                                      capture_output=True, timeout=30)
            run("git", "init", "-q", "-b", "main")
            with open(os.path.join(work, "README"), "w") as f:
                f.write("hello from the bound host\n")
            run("git", "add", "README")
            run("git", "commit", "-q", "-m", "one")
            os.makedirs(d)
            run("git", "clone", "-q", "--bare", work, os.path.join(d, "repo.git"), cwd=self.dir)
            run("git", "update-server-info", cwd=os.path.join(d, "repo.git"))
        return d

    @property
    def ca(self):
        return os.path.join(self.dir, "ca.pem")

    def ca_pem(self):
        with open(self.ca, "rb") as f:
            return f.read()

    # -- setup --
    def _certs(self):
        d = self.dir
        ext = os.path.join(d, "server.ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                    "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\n"
                    "authorityKeyIdentifier=keyid\nsubjectAltName="
                    + ",".join([f"DNS:{n}" for n in NAMES] + [f"IP:{WEB}", f"IP:{UNLISTED}", f"IP:{BOUND}"]) + "\n")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        sh("openssl", "req", "-x509", *ec, "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem",
           "-days", "2", "-subj", "/CN=hutch nettests CA",
           "-addext", "basicConstraints=critical,CA:TRUE",
           "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        sh("openssl", "req", *ec, "-keyout", f"{d}/server.key", "-out", f"{d}/server.csr",
           "-subj", "/CN=api.test.example")
        sh("openssl", "x509", "-req", "-in", f"{d}/server.csr", "-CA", f"{d}/ca.pem",
           "-CAkey", f"{d}/ca.key", "-CAcreateserial", "-out", f"{d}/server.pem", "-days", "2",
           "-extfile", ext)

    def _wire(self):
        sh("ip", "netns", "add", NS)
        self.made_ns = True
        sh("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS)
        self.made_veth = True
        sh("ip", "link", "set", VETH_NS, "netns", NS)
        sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", VETH_HOST)
        sh("ip", "-6", "addr", "add", f"{HOST6}/64", "dev", VETH_HOST, "nodad")
        sh("ip", "link", "set", VETH_HOST, "up")
        nsexec("ip", "link", "set", "lo", "up")
        for a in (WEB, UNLISTED, DNS, BOUND):
            nsexec("ip", "addr", "add", f"{a}/24", "dev", VETH_NS)
        nsexec("ip", "-6", "addr", "add", f"{WEB6}/64", "dev", VETH_NS, "nodad")
        for a in PRIVATE.values():
            nsexec("ip", "addr", "add", f"{a}/32", "dev", "lo")
        nsexec("ip", "link", "set", VETH_NS, "up")
        nsexec("ip", "route", "add", "default", "via", HOST_IP)
        nsexec("ip", "-6", "route", "add", "default", "via", HOST6)
        for net in ROUTED_INTO_NS:
            sh("ip", "route", "add", net, "via", WEB, "dev", VETH_HOST)

    def _start_servers(self):
        srv = []

        def add(name, kind, addr, port, proto="tcp"):
            srv.append({"name": name, "kind": kind, "addr": addr, "port": port, "proto": proto,
                        "log": self.logpath(name)})
        add("https443", "https", WEB, 443)
        add("https8443", "https", WEB, 8443)
        add("unlisted443", "https", UNLISTED, 443)
        add("http80", "http", WEB, 80)
        add("bound443", "https-ka", BOUND, 443)
        srv[-1]["git"] = self.git_dir()
        add("dns", "dns", DNS, 53, "udp")
        add("udpsink", "udpsink", WEB, 9999, "udp")
        for name, a in PRIVATE.items():
            for port in (80, 443):
                add(f"{name}_{port}", "tcplog", a, port)
        for port in (80, 443):
            add(f"v6_{port}", "tcplog", WEB6, port)
        add("v6_9999", "udpsink", WEB6, 9999, "udp")
        self.servers = srv
        conf = os.path.join(self.dir, "servers.json")
        with open(conf, "w") as f:
            json.dump({"cert": f"{self.dir}/server.pem", "key": f"{self.dir}/server.key",
                       "servers": srv}, f)
        out = open(os.path.join(self.dir, "servers.out"), "w")
        # `ip netns exec` execs python3 in place: self.proc.pid is the server.
        self.proc = subprocess.Popen(["ip", "netns", "exec", NS, PYTHON,
                                      os.path.join(HERE, "netfake_server.py"), conf],
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        out.close()

        def ready():
            if self.proc.poll() is not None:
                return True
            return all(listening(self.proc.pid, s["proto"], s["addr"], s["port"]) for s in srv)
        from conftest import wait_until  # conftest imports this module
        wait_until(ready, timeout=15)
        if self.proc.poll() is not None or not ready():
            with open(os.path.join(self.dir, "servers.out")) as f:
                raise RuntimeError("fake servers did not come up: " + f.read())

    def start(self):
        self._certs()
        self._wire()
        self._start_servers()

    def stop(self):
        errors = []
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        if self.made_veth:
            # removes the peer and every route through it too
            r = sh("ip", "link", "del", VETH_HOST, check=False)
            if r.returncode != 0 and "Cannot find" not in r.stderr:
                errors.append(r.stderr)
        if self.made_ns:
            r = sh("ip", "netns", "del", NS, check=False)
            if r.returncode != 0:
                errors.append(r.stderr)
        left = sh("ip", "-o", "link", "show").stdout
        if VETH_HOST in left:
            errors.append(f"{VETH_HOST} still exists")
        routes = sh("ip", "route", "show").stdout
        for net in ROUTED_INTO_NS + ["198.51.100.0/24"]:
            if net.replace("/32", "") + " " in routes + " ":
                errors.append(f"route {net} still there")
        if NS in sh("ip", "netns", "list").stdout:
            errors.append(f"netns {NS} still there")
        return errors


def _gc_session(tmpdir):
    from conftest import HUTCH
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HUTCH_RUNTIME_DIR": str(tmpdir)}
    return subprocess.run([HUTCH, "gc"], env=env, capture_output=True, text=True, timeout=60)


# The fake internet's host routes (metadata, private ranges), the shared
# nftables table and the forwarding switch are the host's, one of each: two
# suites on one machine (two worktrees, a developer and a CI job) would
# collide ("RTNETLINK answers: File exists"). Each session takes this lock
# for as long as it holds its fake internet.
LOCK = "/run/lock/hutch-netfake.lock"


def _lock_host_network():
    os.makedirs(os.path.dirname(LOCK), exist_ok=True)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"\nnetfake: waiting for {LOCK} (another test session holds the host's "
              "fake internet)", file=sys.stderr)
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@pytest.fixture(scope="session")
def fakenet(tmp_path_factory):
    lock = _lock_host_network()
    try:
        yield from _fakenet(tmp_path_factory)
    finally:
        os.close(lock)


def _fakenet(tmp_path_factory):
    forward = read_sysctl("net.ipv4.ip_forward")
    table_before = nft_table_exists()
    net = FakeNet(tmp_path_factory.mktemp("netfake"))
    problems = []
    try:
        net.start()
        yield net
    finally:
        problems += net.stop()
        r = _gc_session(tmp_path_factory.mktemp("gc-rt"))
        if r.returncode != 0:
            problems.append(f"hutch gc failed: {r.stderr}")
        if nft_table_exists():
            links = hutch_links()
            problems.append("nftables table 'inet hutch' still exists after every sandbox was "
                            f"removed and hutch gc ran (links left: {links}; existed at "
                            f"session start: {table_before})")
            # Deleting it under a live sandbox (another user's, on this shared
            # machine) would lift that sandbox's blocks: only when none is left.
            if not links:
                sh("nft", "delete", "table", "inet", "hutch", check=False)
            else:
                problems.append("table NOT deleted: hutch links still exist")
        if read_sysctl("net.ipv4.ip_forward") != forward:
            problems.append(f"net.ipv4.ip_forward was {forward} at start, "
                            f"{read_sysctl('net.ipv4.ip_forward')} at the end (restored)")
            write_sysctl("net.ipv4.ip_forward", forward)
        if problems:
            print("\n".join(["", "NETFAKE TEARDOWN PROBLEMS:"] + problems), file=sys.stderr)
            pytest.fail("; ".join(problems), pytrace=False)
