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
import os
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


def read_head(f):
    """One request head from a buffered reader: (request line, [(name,
    value)...]) or None at the end of the connection."""
    line = f.readline(65537)
    while line in (b"\r\n", b"\n"):
        line = f.readline(65537)
    if not line:
        return None
    headers = []
    while True:
        h = f.readline(65537)
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers.append([name, value.strip()])
    return line.decode("latin-1").rstrip("\r\n"), headers


def read_body(f, headers):
    hd = {n.lower(): v for n, v in headers}
    if hd.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(f.readline(1024).split(b";")[0], 16)
            if size == 0:
                while f.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return body
            body += f.read(size)
            f.readline(3)
    return f.read(int(hd.get("content-length", "0")))


def serve_https_ka(cfg, cert, key):
    """HTTPS/1.1 with keep-alive that logs every request's headers (the
    header bindings' tests). GET /big/N: N bytes; POST /sha256: the body's
    digest; GET /git/PATH: a file of the dumb-HTTP git repository in
    cfg["git"]; anything else: a short text. ALPN http/1.1."""
    log = logger(cfg["log"])
    lsock = tcp_listener(cfg["addr"], cfg["port"])
    label = f'{cfg["addr"]}:{cfg["port"]}'
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])

    def answer(line, headers, body):
        parts = line.split()
        path = parts[1] if len(parts) > 1 else "/"
        if path.startswith("/big/"):
            n = int(path[5:])
            return 200, (PATTERN * (n // len(PATTERN) + 1))[:n]
        if path == "/sha256":
            return 200, f"{len(body)} {hashlib.sha256(body).hexdigest()}\n".encode()
        if path.startswith("/git/") and cfg.get("git"):
            rel = path[5:].split("?", 1)[0]
            full = os.path.realpath(os.path.join(cfg["git"], rel))
            if full.startswith(os.path.realpath(cfg["git"]) + "/") and os.path.isfile(full):
                with open(full, "rb") as fh:
                    return 200, fh.read()
            return 404, b"not found\n"
        return 200, f"fake-https-ka {label} {path}\n".encode()

    def handle(conn, peer):
        conn.settimeout(10)
        try:
            tls = ctx.wrap_socket(conn, server_side=True)
        except (OSError, ssl.SSLError) as e:
            log(event="tls-fail", peer=f"{peer[0]}:{peer[1]}", local=label, error=str(e))
            conn.close()
            return
        f = tls.makefile("rb")
        n = 0
        try:
            while True:
                req = read_head(f)
                if req is None:
                    break
                line, headers = req
                body = read_body(f, headers)
                n += 1
                log(event="request", peer=f"{peer[0]}:{peer[1]}", local=label, request=line,
                    headers=headers, n_on_conn=n, body_len=len(body),
                    alpn=tls.selected_alpn_protocol())
                status, out = answer(line, headers, body)
                close = any(h[0].lower() == "connection" and h[1].lower() == "close"
                            for h in headers) or line.endswith("HTTP/1.0")
                tls.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: application/octet-stream\r\n"
                            f"Content-Length: {len(out)}\r\n"
                            f"{'Connection: close' if close else 'Connection: keep-alive'}"
                            "\r\n\r\n".encode() + out)
                if close:
                    break
            tls.close()
        except (OSError, ssl.SSLError, ValueError) as e:
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
    """The fake zone: A for test.example and below, and api.github.com;
    NXDOMAIN elsewhere."""
    lname = name.lower().rstrip(".")
    if lname in POINTS_INSIDE:
        return 0, POINTS_INSIDE[lname]
    if lname == "api.github.com":  # the bound server under a real name (test_roots_net)
        return 0, "198.51.100.12"
    if lname == "test.example" or lname.endswith(".test.example"):
        if lname in ("bound.test.example", "direct.test.example"):
            return 0, "198.51.100.12"
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
        elif kind == "https-ka":
            target, args = serve_https_ka, (cfg, conf["cert"], conf["key"])
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
