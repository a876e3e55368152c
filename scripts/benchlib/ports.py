"""Ports (--ports): throughput and connection rate through a create -p forward next to socat."""

import functools
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

from .common import HutchError, interleave, log, PeerError

# --------------------------------------------------------------------------
# --ports: a forward out of a sandbox vs socat

# One server for both sides: per connection, the first byte says what to
# do. U: read to the end, answer the count (8 bytes); D<8-byte N>: send N
# bytes, close; P: answer one byte, close.
PORT_SERVER = r"""
import socket, socketserver, struct, sys
CHUNK = bytes(1 << 20)
class H(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        op = s.recv(1)
        if op == b"P":
            s.sendall(b"p")
        elif op == b"U":
            n, buf = 0, bytearray(1 << 20)
            while True:
                k = s.recv_into(buf)
                if not k:
                    break
                n += k
            s.sendall(struct.pack(">Q", n))
        elif op == b"D":
            hdr = b""
            while len(hdr) < 8:
                hdr += s.recv(8 - len(hdr))
            left = struct.unpack(">Q", hdr)[0]
            view = memoryview(CHUNK)
            while left:
                k = s.send(view[:min(left, len(CHUNK))])
                left -= k
            s.shutdown(socket.SHUT_WR)
class S(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 1024
S((sys.argv[1], int(sys.argv[2])), H).serve_forever()
"""
PORT_SERVER_PORT = 9000
# the socat peer's netns: a /30 of its own, far from hutch's pool and the
# test ranges
SOCAT_NET = ("10.252.213.1", "10.252.213.2")


def _wait_listening(host, port, timeout=20):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            socket.create_connection((host, port), 1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def port_upload(port, size):
    """Seconds to send size bytes through the forward (until the server has
    counted them all)."""
    buf = bytes(1 << 20)
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), 30) as s:
        s.sendall(b"U")
        left = size
        while left:
            n = min(left, len(buf))
            s.sendall(memoryview(buf)[:n])
            left -= n
        s.shutdown(socket.SHUT_WR)
        got = b""
        while len(got) < 8:
            b = s.recv(8 - len(got))
            if not b:
                break
            got += b
    dt = time.perf_counter() - t0
    if len(got) != 8 or int.from_bytes(got, "big") != size:
        raise PeerError("upload through port %d: the server counted %r of %d bytes"
                        % (port, got, size))
    return dt


def port_download(port, size):
    buf = bytearray(1 << 20)
    t0 = time.perf_counter()
    n = 0
    with socket.create_connection(("127.0.0.1", port), 30) as s:
        s.sendall(b"D" + size.to_bytes(8, "big"))
        while True:
            k = s.recv_into(buf)
            if not k:
                break
            n += k
    dt = time.perf_counter() - t0
    if n != size:
        raise PeerError("download through port %d: %d of %d bytes" % (port, n, size))
    return dt


def port_connections(port, count):
    """Seconds for count connections one after another (connect, one byte
    each way, close)."""
    t0 = time.perf_counter()
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port), 30) as s:
            s.sendall(b"P")
            if s.recv(1) != b"p":
                raise PeerError("ping through port %d: no answer" % port)
    return time.perf_counter() - t0


def port_connections_parallel(port, count, clients=10):
    t0 = time.perf_counter()
    errs = []

    def worker(n):
        try:
            port_connections(port, n)
        except (OSError, PeerError) as e:
            errs.append(e)
    ts = [threading.Thread(target=worker, args=(count // clients,)) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise PeerError("parallel connections through port %d: %s" % (port, errs[0]))
    return time.perf_counter() - t0


class SocatPeer:
    """socat TCP-LISTEN on the host's 127.0.0.1 relaying (fork per
    connection, socat's usual form) to the same server in a netns of ours,
    reached over a veth pair: what one would do by hand without hutch."""

    def __init__(self, tmpdir):
        self.ns = "hbench-%d" % os.getpid()
        self.veth = "hbp%dh" % os.getpid()
        self.procs = []
        self.ports = {}  # variant name: host port
        host_ip, ns_ip = SOCAT_NET
        self._sh("ip", "netns", "add", self.ns)
        self._sh("ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0",
                 "netns", self.ns)
        self._sh("ip", "addr", "add", host_ip + "/30", "dev", self.veth)
        self._sh("ip", "link", "set", self.veth, "up")
        for cmd in (["ip", "link", "set", "lo", "up"],
                    ["ip", "addr", "add", ns_ip + "/30", "dev", "eth0"],
                    ["ip", "link", "set", "eth0", "up"]):
            self._sh("ip", "netns", "exec", self.ns, *cmd)
        srv = os.path.join(tmpdir, "port-server.py")
        with open(srv, "w") as f:
            f.write(PORT_SERVER)
        self.procs.append(subprocess.Popen(
            ["ip", "netns", "exec", self.ns, sys.executable, srv, ns_ip, str(PORT_SERVER_PORT)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # socat as usually run (8 KiB buffer), and with hutch's 256 KiB
        for name, opts in (("socat TCP-LISTEN,fork -> netns", []),
                           ("socat -b 262144 (256 KiB buffer)", ["-b", "262144"])):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            self.procs.append(subprocess.Popen(
                ["socat", *opts, "TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork,backlog=1024" % port,
                 "TCP:%s:%d" % (ns_ip, PORT_SERVER_PORT)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.ports[name] = port
        if not (_wait_listening(ns_ip, PORT_SERVER_PORT) and
                all(_wait_listening("127.0.0.1", p) for p in self.ports.values())):
            raise PeerError("socat relay or its server did not start")

    @staticmethod
    def _sh(*argv):
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            raise PeerError("%s: %s" % (" ".join(argv), p.stderr.strip()))

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)


def measure_ports(args, res, hutch, tmpdir):
    """Throughput both ways and connection rates through one forward: hutch
    (create -p, init connects inside, splice relay in the supervisor) vs
    socat (fork per connection, read/write). The same Python server and
    client on both sides; samples interleaved."""
    size = (32 if args.quick else 256) << 20
    conns = 50 if args.quick else 500
    srv = os.path.join(tmpdir, "port-server.py")
    with open(srv, "w") as f:
        f.write(PORT_SERVER)
    _, sid = hutch.create("-p", "0:%d" % PORT_SERVER_PORT)
    hutch.r.timed([hutch.bin, "cp", srv, sid + ":/workspace/port-server.py"], HutchError)
    hutch.r.timed([hutch.bin, "exec", "-d", sid, "--", "python3", "/workspace/port-server.py",
                   "127.0.0.1", str(PORT_SERVER_PORT)], HutchError)
    _, out = hutch.r.timed([hutch.bin, "port", sid, str(PORT_SERVER_PORT)], HutchError,
                           capture=True)
    hport = int(out.strip().rsplit(":", 1)[1])
    if not _wait_listening("127.0.0.1", hport):
        raise HutchError("the forward's server did not start")
    # a connection that the sandbox refuses resets: wait until one answers
    t0 = time.monotonic()
    while True:
        try:
            port_connections(hport, 1)
            break
        except (OSError, PeerError):
            if time.monotonic() - t0 > 20:
                raise HutchError("no answer through the forward on port %d" % hport)
            time.sleep(0.1)
    peer = None
    try:
        peer = SocatPeer(tmpdir)
    except PeerError as e:
        res.notes.append("socat peer not measured: %s" % e)
    rate_items = [("%d sequential connections" % conns,
                   lambda p: port_connections(p, conns)),
                  ("%d connections, 10 parallel clients" % conns,
                   lambda p: port_connections_parallel(p, conns))]
    items = [("upload %d MiB through the forward" % (size >> 20),
              lambda p: port_upload(p, size)),
             ("download %d MiB through the forward" % (size >> 20),
              lambda p: port_download(p, size))] + rate_items
    try:
        for item, fn in items:
            g = res.group("ports: " + item)
            variants = [("hutch -p (splice relay)", functools.partial(fn, hport))]
            for name, port in (peer.ports.items() if peer else ()):
                if "MiB" in item or "-b" not in name:  # the buffer matters for bytes only
                    variants.append((name, functools.partial(fn, port)))
            log("ports: " + item)
            interleave(g, variants, args.iterations)
            for other in variants[1:]:
                g["pairs"].append((variants[0][0], other[0], "1.2"))
            for name, samples in g["variants"].items():
                if not samples:
                    continue
                med = statistics.median(samples)
                if "MiB" in item:
                    res.notes.append("%s, %s: %.0f MiB/s (median)"
                                     % (item, name.split(" (")[0], (size >> 20) / med))
                else:
                    res.notes.append("%s, %s: %.0f connections/s (median)"
                                     % (item, name.split(" (")[0], conns / med))
    finally:
        if peer:
            peer.close()
        hutch.rm(sid)
