# SPDX-License-Identifier: Apache-2.0
"""A fake internet for the network-mode tests, wholly in network namespaces
the test makes: nothing of it is on the host's side (no address, route,
link or nftables table in the machine's own namespace).

    netns hnt-host-<pid>: the "host" hutch runs in (the tests enter it, see
      |   below): lo (its 127.0.0.1 is the host's loopback of these tests),
      |   hnt<pid>h 198.51.100.1/24, 2001:db8:213::1/64, default routes
      |   into the fake internet (so 169.254.169.254, 10.99.0.0/24,
      |   192.168.213.0/24, 172.31.213.0/24 and 100.64.213.0/24 reach a
      |   fake logger there: a broken block rule shows as a logged
      |   connection, never as real traffic); hntlan, a link of its own with
      |   10.98.213.1/24, the host's address on a LAN of its own
      |   veth
    netns hnt-inet-<pid>: hnt<pid>n 198.51.100.10 (+ .11 .12 .53),
          2001:db8:213::10; default route via 198.51.100.1; the private
          addresses on its lo

The tests run hutch (the CLI, hence its supervisors, their veths, the
nftables table `inet hutch`, pasta and -p listeners) inside hnt-host-<pid>:
the `fakenet` fixture moves the test's own thread into it with setns(2) for
the module (`fakenet_here`: for one test), so every process the test starts
and every socket it opens is there, and moves it back after. The machine's
namespace sees only two named namespaces (/run/netns) while they exist.

Servers in the netns (one python3 process, netfake_server.py, killed by
pid): HTTPS on 198.51.100.10:443 and :8443 and 198.51.100.11:443 (a cert from
a test CA made with the openssl CLI, SANs for every test name and both
IPs), plain HTTP on 198.51.100.10:80, DNS on 198.51.100.53:53 (A for
*.test.example -> 198.51.100.10, unlisted.test.example -> 198.51.100.11,
metadata.test.example -> 169.254.169.254, loopback.test.example -> 127.0.0.1,
hostaddr.test.example -> 198.51.100.1 (the host's end of the veth),
api.github.com -> 198.51.100.12 (the bound server under the name a user
binds), NXDOMAIN elsewhere), a UDP sink on 198.51.100.10:9999, TCP loggers on the
metadata / private / IPv6 addresses. Each logs JSON lines; `FakeNet.log()`
reads them.

The session fixture runs `hutch gc` in the host netns at the end and fails
loudly if the nftables table `inet hutch` is still there, or if anything of
the fake internet reached the machine's own namespace.
"""
import contextlib
import ctypes
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

PID = os.getpid()
NS = f"hnt-inet-{PID}"            # the fake internet
HOST_NS = f"hnt-host-{PID}"       # the "host" hutch runs in
VETH_HOST = f"hnt{PID}h"
VETH_NS = f"hnt{PID}n"

HOST_IP = "198.51.100.1"          # the host's own end of the fake uplink
HOST_LAN = "10.98.213.1"          # the host's address on a LAN of its own
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
         "direct.test.example", "api.github.com"]

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"


def sh(*argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def nsexec(*argv, check=True):
    return sh("ip", "netns", "exec", NS, *argv, check=check)


def hostexec(*argv, check=True):
    """In the tests' host netns, from wherever the caller is."""
    return sh("nsenter", f"--net=/run/netns/{HOST_NS}", "--", *argv, check=check)


# ---- entering a network namespace: this thread only (setns(2)) ----

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


@contextlib.contextmanager
def in_netns(path):
    """This thread, the processes it starts and the sockets and threads it
    makes are in the network namespace at path until the block ends."""
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(fd)
        finally:
            os.close(fd)
        try:
            yield
        finally:
            _setns(back)
    finally:
        os.close(back)


@contextlib.contextmanager
def own_netns():
    """This thread in a new, anonymous network namespace with only lo (up)
    until the block ends: what hutch wires there for mode all (its veth
    hutch<slot>, the 10.200.0.0/16 route, the table inet hutch,
    forwarding) never exists in the machine's namespace, and goes with the
    namespace once the last process in it (a supervisor) has exited.
    Nothing to delete: no name in /run/netns."""
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.unshare(CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"unshare(CLONE_NEWNET): {os.strerror(e)}")
        try:
            sh("ip", "link", "set", "lo", "up")
            yield OwnNet(back)
        finally:
            _setns(back)
    finally:
        os.close(back)


class OwnNet:
    def __init__(self, outer):
        self.outer = outer

    def outside(self):
        """The machine's own netns (to check nothing of the test is there)."""
        return in_netns(f"/proc/self/fd/{self.outer}")

    def on_host(self, link):
        """Is a link of this name in the machine's own namespace?"""
        with self.outside():
            return link_index(link) is not None


def link_index(name):
    """A link's index in this thread's netns, or None (not /sys/class/net:
    sysfs shows the namespace it was mounted in, the machine's)."""
    try:
        return socket.if_nametoindex(name)
    except OSError:
        return None


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


def in_host_netns(pid):
    """Is process pid in the tests' host netns (not the machine's own)?"""
    a, b = os.stat(f"/proc/{pid}/ns/net"), os.stat(f"/run/netns/{HOST_NS}")
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


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
        self.made = []  # named netns made, for stop()
        # the machine's own netns, for the checks that nothing reached it
        self.outer = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)

    def inside(self):
        """The tests' host netns: run hutch and the host's listeners here."""
        return in_netns(f"/run/netns/{HOST_NS}")

    def outside(self):
        """The machine's own netns (to check nothing of ours is there)."""
        return in_netns(f"/proc/self/fd/{self.outer}")

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
        for ns in (HOST_NS, NS):
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
        # made in place: the veth never exists in the machine's namespace
        sh("ip", "link", "add", VETH_HOST, "netns", HOST_NS, "type", "veth",
           "peer", "name", VETH_NS, "netns", NS)
        hostexec("ip", "link", "set", "lo", "up")
        hostexec("ip", "addr", "add", f"{HOST_IP}/24", "dev", VETH_HOST)
        hostexec("ip", "-6", "addr", "add", f"{HOST6}/64", "dev", VETH_HOST, "nodad")
        hostexec("ip", "link", "set", VETH_HOST, "up")
        # (a veth pair, both ends here: this kernel may have no dummy links)
        hostexec("ip", "link", "add", "hntlan", "type", "veth", "peer", "name", "hntlan-p")
        hostexec("ip", "addr", "add", f"{HOST_LAN}/24", "dev", "hntlan")
        hostexec("ip", "link", "set", "hntlan-p", "up")
        hostexec("ip", "link", "set", "hntlan", "up")
        nsexec("ip", "link", "set", "lo", "up")
        for a in (WEB, UNLISTED, DNS, BOUND):
            nsexec("ip", "addr", "add", f"{a}/24", "dev", VETH_NS)
        nsexec("ip", "-6", "addr", "add", f"{WEB6}/64", "dev", VETH_NS, "nodad")
        for a in PRIVATE.values():
            nsexec("ip", "addr", "add", f"{a}/32", "dev", "lo")
        nsexec("ip", "link", "set", VETH_NS, "up")
        nsexec("ip", "route", "add", "default", "via", HOST_IP)
        nsexec("ip", "-6", "route", "add", "default", "via", HOST6)
        # the host netns's way out is the fake internet, and nothing else
        hostexec("ip", "route", "add", "default", "via", WEB, "dev", VETH_HOST)
        hostexec("ip", "-6", "route", "add", "default", "via", WEB6, "dev", VETH_HOST)

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
        # deleting a netns removes its links (the veth, hutch's), routes
        # and nftables tables with it
        for ns in reversed(self.made):
            r = sh("ip", "netns", "del", ns, check=False)
            if r.returncode != 0:
                errors.append(r.stderr)
        self.made = []
        listed = sh("ip", "netns", "list").stdout
        errors += [f"netns {ns} still there" for ns in (NS, HOST_NS) if ns in listed]
        errors += self.host_side_problems()
        os.close(self.outer)
        return errors

    def host_side_problems(self):
        """What of the fake internet is in the machine's own namespace
        (nothing ever should be): its links, addresses of the documentation
        ranges this file uses, routes into its ranges."""
        with self.outside():
            links = sh("ip", "-o", "link", "show").stdout
            addrs = sh("ip", "-o", "addr", "show").stdout
            routes = sh("ip", "route", "show", "table", "all").stdout
        out = [f"link {v} on the host" for v in (VETH_HOST, VETH_NS) if v in links]
        out += [f"address of 198.51.100.0/24 on the host: {ln}" for ln in addrs.splitlines()
                if " 198.51.100." in ln or " 2001:db8:213:" in ln]
        for ln in routes.splitlines():
            dst = ln.split()[0] if ln.split() else ""
            if dst.startswith(("198.51.100.", "2001:db8:213:")) or \
                    any(dst == n or dst == n.replace("/32", "") for n in ROUTED_INTO_NS) or \
                    "hnt" in ln:
                out.append(f"route on the host: {ln}")
        return out


def _gc_session(tmpdir):
    from conftest import HUTCH
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HUTCH_RUNTIME_DIR": str(tmpdir),
           "HUTCH_IMAGE_STORE": f"{tmpdir}-store"}
    return subprocess.run([HUTCH, "gc"], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="session")
def fakenet_world(tmp_path_factory):
    """The namespaces and servers, once a session; use `fakenet` (a module
    inside the host netns) or `fakenet_here` (one test inside it)."""
    real_forward = read_sysctl("net.ipv4.ip_forward")
    net = FakeNet(tmp_path_factory.mktemp("netfake"))
    problems = []
    try:
        net.start()
        problems += [f"before any test: {p}" for p in net.host_side_problems()]
        if problems:
            pytest.fail("; ".join(problems), pytrace=False)
        yield net
    finally:
        if net.made:
            with net.inside():
                problems += _hutch_left_in_host_netns(tmp_path_factory)
        problems += net.stop()
        if read_sysctl("net.ipv4.ip_forward") != real_forward:
            problems.append(f"the machine's net.ipv4.ip_forward was {real_forward} at start, "
                            f"{read_sysctl('net.ipv4.ip_forward')} at the end (restored)")
            write_sysctl("net.ipv4.ip_forward", real_forward)
        if problems:
            print("\n".join(["", "NETFAKE TEARDOWN PROBLEMS:"] + problems), file=sys.stderr)
            pytest.fail("; ".join(problems), pytrace=False)


def _hutch_left_in_host_netns(tmp_path_factory):
    """hutch gc, then nothing of hutch's may be left in the host netns (the
    netns goes next, which would hide a leak)."""
    problems = []
    r = _gc_session(tmp_path_factory.mktemp("gc-rt"))
    if r.returncode != 0:
        problems.append(f"hutch gc failed: {r.stderr}")
    if nft_table_exists():
        problems.append("nftables table 'inet hutch' still exists after every sandbox was "
                        f"removed and hutch gc ran (links left: {hutch_links()})")
    elif hutch_links():
        problems.append(f"hutch links left: {hutch_links()}")
    return problems


@pytest.fixture(scope="module")
def fakenet(fakenet_world):
    """The fake internet, with this module's tests inside its host netns
    (from the first test that asks for it to the module's end; a module
    whose every test is a network test says `pytestmark =
    pytest.mark.usefixtures("fakenet")`)."""
    with fakenet_world.inside():
        yield fakenet_world


@pytest.fixture
def own_net():
    """For a test that makes sandboxes of network all (or a -p port) and
    needs no fake internet: the test runs in a network namespace of its
    own (own_netns()), so nothing of it reaches the machine's links,
    routes or tables and the machine's routes cannot change its outcome.
    Ask for it before the fixtures that create sandboxes."""
    with own_netns() as net:
        yield net


@pytest.fixture
def fakenet_here(fakenet_world):
    """The fake internet, with this one test inside its host netns."""
    with fakenet_world.inside():
        yield fakenet_world
