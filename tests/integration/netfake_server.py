# SPDX-License-Identifier: Apache-2.0
"""The servers of the fake internet (netfake.py), run with
`ip netns exec NS python3 netfake_server.py CONFIG.json` inside the fake
netns. Standard library only. Every server appends one JSON line per event
to its own log file (flushed at once) so the tests can prove what reached
it and what did not.

CONFIG: {"cert": PEM, "key": PEM, "servers": [{"kind": ..., "addr": ...,
"port": ..., "log": PATH, "label": ...}, ...]}. kinds: https, http, dns,
udpsink, tcplog.
"""
import hashlib
import json
import re
import socket
import ssl
import struct
import sys
import threading
import time


PATTERN = bytes(range(256)) * 16


def logger(path):
    f = open(path, "a", buffering=1)
    lock = threading.Lock()

    def log(**kw):
        kw.setdefault("t", time.time())
        with lock:
            f.write(json.dumps(kw) + "\n")
            f.flush()
    return log


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def tcp_listener(addr, port):
    s = socket.socket(family(addr), socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)
    return s


def read_request(conn, limit=8192):
    data = b""
    while b"\r\n\r\n" not in data and len(data) < limit:
        b = conn.recv(4096)
        if not b:
            break
        data += b
    return data


def serve_https(cfg, cert, key):
    log = logger(cfg["log"])
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)  # fail at start
    lsock = tcp_listener(cfg["addr"], cfg["port"])
    label = f'{cfg["addr"]}:{cfg["port"]}'

    def handle(conn, peer):
        seen = {}

        def sni_cb(sslobj, name, _ctx):
            seen["sni"] = name
        conn.settimeout(10)
        log(event="accept", peer=f"{peer[0]}:{peer[1]}", local=label)
        try:
            c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            c.load_cert_chain(cert, key)
            c.sni_callback = sni_cb
            tls = c.wrap_socket(conn, server_side=True)
        except (OSError, ssl.SSLError) as e:
            log(event="tls-fail", peer=f"{peer[0]}:{peer[1]}", local=label, sni=seen.get("sni"),
                error=str(e))
            conn.close()
            return
        try:
            req = read_request(tls)
            line = req.split(b"\r\n", 1)[0].decode("latin-1")
            body = f"fake-https {label} sni={seen.get('sni')}\n".encode()
            parts = line.split()
            if len(parts) > 1 and parts[1].startswith("/big/"):
                # GET /big/N: N bytes of a known pattern (splice test)
                n = int(parts[1][5:])
                body = (PATTERN * (n // len(PATTERN) + 1))[:n]
            elif len(parts) > 1 and parts[1] == "/sha256":
                # POST /sha256: the digest of the request body
                head, _, rest = req.partition(b"\r\n\r\n")
                clen = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                h = hashlib.sha256(rest)
                got = len(rest)
                while got < clen:
                    chunk = tls.recv(min(65536, clen - got))
                    if not chunk:
                        break
                    h.update(chunk)
                    got += len(chunk)
                body = f"{got} {h.hexdigest()}\n".encode()
            log(event="request", peer=f"{peer[0]}:{peer[1]}", local=label, sni=seen.get("sni"),
                request=line)
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            tls.close()
        except (OSError, ssl.SSLError) as e:
            log(event="error", local=label, error=str(e))
            conn.close()

    while True:
        conn, peer = lsock.accept()
        threading.Thread(target=handle, args=(conn, peer), daemon=True).start()


def serve_http(cfg):
    log = logger(cfg["log"])
    lsock = tcp_listener(cfg["addr"], cfg["port"])
    label = f'{cfg["addr"]}:{cfg["port"]}'

    def handle(conn, peer):
        conn.settimeout(10)
        log(event="accept", peer=f"{peer[0]}:{peer[1]}", local=label)
        try:
            req = read_request(conn)
            log(event="request", peer=f"{peer[0]}:{peer[1]}", local=label,
                request=req.split(b"\r\n", 1)[0].decode("latin-1"))
            body = f"fake-http {label}\n".encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
        except OSError:
            pass
        conn.close()

    while True:
        conn, peer = lsock.accept()
        threading.Thread(target=handle, args=(conn, peer), daemon=True).start()


def serve_tcplog(cfg):
    """Accept, log, answer one line, close: a "private LAN" or metadata host."""
    log = logger(cfg["log"])
    lsock = tcp_listener(cfg["addr"], cfg["port"])
    label = f'{cfg["addr"]}:{cfg["port"]}'
    while True:
        conn, peer = lsock.accept()
        log(event="accept", peer=f"{peer[0]}:{peer[1]}", local=label)
        try:
            conn.sendall(f"fake-tcp {label}\n".encode())
        except OSError:
            pass
        conn.close()


def dns_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        off += 1
        if n == 0:
            return ".".join(labels), off
        if n & 0xC0:
            raise ValueError("compression in a query")
        labels.append(msg[off:off + n].decode("ascii", "replace"))
        off += n


# names whose A record points at a "must never be reached" listener: a proxy
# that dials whatever a listed name resolves to would reach them
POINTS_INSIDE = {"metadata.test.example": "169.254.169.254", "loopback.test.example": "127.0.0.1",
                 "hostaddr.test.example": "198.51.100.1"}


def dns_answer(name):
    """The fake zone: A for test.example and below; NXDOMAIN elsewhere."""
    lname = name.lower().rstrip(".")
    if lname in POINTS_INSIDE:
        return 0, POINTS_INSIDE[lname]
    if lname == "test.example" or lname.endswith(".test.example"):
        return 0, ("198.51.100.11" if lname == "unlisted.test.example" else "198.51.100.10")
    return 3, None


def serve_dns(cfg):
    log = logger(cfg["log"])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((cfg["addr"], cfg["port"]))
    while True:
        msg, peer = s.recvfrom(4096)
        try:
            qid, flags, qd = struct.unpack("!HHH", msg[:6])
            name, off = dns_name(msg, 12)
            qtype, qclass = struct.unpack("!HH", msg[off:off + 4])
            qend = off + 4
        except (ValueError, struct.error, IndexError) as e:
            log(event="malformed", peer=f"{peer[0]}:{peer[1]}", error=str(e))
            continue
        log(event="query", peer=f"{peer[0]}:{peer[1]}", name=name.lower(), qtype=qtype)
        rcode, addr = dns_answer(name)
        answers = b""
        an = 0
        if addr and qtype == 1:
            answers = struct.pack("!HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton(addr)
            an = 1
        rflags = 0x8000 | 0x0400 | (flags & 0x0100) | 0x0080 | rcode
        reply = struct.pack("!HHHHHH", qid, rflags, 1, an, 0, 0) + msg[12:qend] + answers
        s.sendto(reply, peer)


def serve_udpsink(cfg):
    log = logger(cfg["log"])
    s = socket.socket(family(cfg["addr"]), socket.SOCK_DGRAM)
    s.bind((cfg["addr"], cfg["port"]))
    while True:
        data, peer = s.recvfrom(65536)
        log(event="datagram", peer=f"{peer[0]}:{peer[1]}", data=data.decode("latin-1"))


def main():
    with open(sys.argv[1]) as f:
        conf = json.load(f)
    threads = []
    for cfg in conf["servers"]:
        kind = cfg["kind"]
        if kind == "https":
            target, args = serve_https, (cfg, conf["cert"], conf["key"])
        else:
            target, args = {"http": serve_http, "dns": serve_dns, "udpsink": serve_udpsink,
                            "tcplog": serve_tcplog}[kind], (cfg,)
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        threads.append(t)
    # A server thread that dies (bind failure...) ends the process, so the
    # fixture's readiness poll fails loudly instead of waiting.
    while all(t.is_alive() for t in threads):
        time.sleep(0.2)
    sys.exit(1)


if __name__ == "__main__":
    main()
