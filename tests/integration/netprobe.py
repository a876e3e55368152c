# SPDX-License-Identifier: Apache-2.0
"""Network probes run inside a sandbox (as appuser, with the sandbox's
python3): reads a JSON list of operations on stdin, prints a JSON list of
results. Every operation is timed, so the tests can tell "failed at once"
from "hung until the timeout"."""
import errno
import json
import socket
import ssl
import struct
import sys
import time

TIMEOUT = 8.0  # longer than any "fails fast" bound the tests assert


def classify(e):
    if isinstance(e, socket.gaierror):
        return f"gai:{e.errno}"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, ConnectionResetError):
        return "reset"
    if isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        return "eof"
    if isinstance(e, ssl.SSLCertVerificationError):
        return "cert"
    if isinstance(e, ssl.SSLError):
        return "ssl:" + (e.reason or str(e))
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return type(e).__name__


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def connect(host, port):
    s = socket.socket(family(host), socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    try:
        s.connect((host, port))
    except BaseException:
        s.close()
        raise
    return s


def read_all(s, limit=65536):
    data = bytearray()
    while len(data) < limit:
        b = s.recv(65536)
        if not b:
            break
        data += b
    return bytes(data)


def op_resolve(o):
    infos = socket.getaddrinfo(o["name"], 443, socket.AF_INET, socket.SOCK_STREAM)
    return {"addrs": sorted({i[4][0] for i in infos})}


def op_tls(o):
    ctx = ssl.create_default_context(cafile=o.get("ca", "/workspace/ca.pem"))
    sni = o.get("sni")
    if sni is None:
        ctx.check_hostname = False
    s = connect(o["host"], o["port"])
    r = {"connected": True}
    try:
        t = ctx.wrap_socket(s, server_hostname=sni)
        r["handshake"] = True
        t.sendall(b"GET /probe HTTP/1.0\r\nHost: x\r\n\r\n")
        data = read_all(t)
        r["body"] = data.split(b"\r\n\r\n", 1)[-1].decode("latin-1")
        t.close()
    except BaseException as e:
        s.close()
        r["err"] = classify(e)
    return r


def op_https(o):
    """One HTTPS request (GET, or POST of `upload` pattern bytes) through
    whatever path the sandbox has; returns the body's length and sha256."""
    import hashlib
    ctx = ssl.create_default_context(cafile=o.get("ca", "/workspace/ca.pem"))
    s = connect(o["host"], o["port"])
    t = ctx.wrap_socket(s, server_hostname=o["sni"])
    n = o.get("upload", 0)
    if n:
        pat = bytes(range(256)) * 16
        data = (pat * (n // len(pat) + 1))[:n]
        t.sendall(f"POST /sha256 HTTP/1.0\r\nContent-Length: {n}\r\n\r\n".encode() + data)
    else:
        t.sendall(f"GET {o['path']} HTTP/1.0\r\n\r\n".encode())
    resp = read_all(t, limit=1 << 30)
    t.close()
    body = resp.split(b"\r\n\r\n", 1)[1]
    return {"len": len(body), "sha256": hashlib.sha256(body).hexdigest(),
            "text": body[:200].decode("latin-1")}


def op_tls_split(o):
    """A TLS handshake whose ClientHello is sent in `pieces` writes, `gap`
    seconds apart (a proxy must reassemble it)."""
    ctx = ssl.create_default_context(cafile=o.get("ca", "/workspace/ca.pem"))
    s = connect(o["host"], o["port"])
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=o["sni"])
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    step = max(1, len(hello) // o.get("pieces", 3))
    for i in range(0, len(hello), step):
        s.sendall(hello[i:i + step])
        time.sleep(o.get("gap", 0.05))
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            s.sendall(out.read())
            data = s.recv(65536)
            if not data:
                raise ConnectionResetError("closed during handshake")
            inc.write(data)
    s.sendall(out.read())
    obj.write(b"GET /split HTTP/1.0\r\n\r\n")
    s.sendall(out.read())
    resp = b""
    while True:
        try:
            resp += obj.read(65536)
            continue
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
        data = s.recv(65536)
        if not data:
            break
        inc.write(data)
    s.close()
    return {"body": resp.split(b"\r\n\r\n", 1)[-1].decode("latin-1")}


def op_raw(o):
    """Connect, send bytes, read until the peer closes."""
    s = connect(o["host"], o["port"])
    r = {"connected": True}
    try:
        if o.get("send"):
            s.sendall(o["send"].encode("latin-1"))
        r["recv"] = read_all(s).decode("latin-1")
    except BaseException as e:
        r["err"] = classify(e)
    finally:
        s.close()
    return r


def op_udp(o):
    s = socket.socket(family(o["host"]), socket.SOCK_DGRAM)
    try:
        s.sendto(o["data"].encode(), (o["host"], o["port"]))
    finally:
        s.close()
    return {"sent": True}


def dns_query_bytes(qid, name, qtype):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return q + struct.pack("!HH", qtype, 1)


def op_dns(o):
    """Raw UDP DNS queries to a server; rcode and A answers of each."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(o.get("timeout", 3))
    out = []
    try:
        for i, name in enumerate(o["names"]):
            q = dns_query_bytes(0x4000 + i, name, o.get("qtype", 1))
            s.sendto(q, (o["server"], o.get("port", 53)))
            try:
                msg = s.recv(4096)
            except BaseException as e:
                out.append({"name": name, "err": classify(e)})
                continue
            an = struct.unpack("!H", msg[6:8])[0]
            out.append({"name": name, "rcode": msg[3] & 0xF, "answers": an})
    finally:
        s.close()
    return {"replies": out}


OPS = {"resolve": op_resolve, "tls": op_tls, "https": op_https, "tls_split": op_tls_split, "raw": op_raw, "udp": op_udp, "dns": op_dns}


def main():
    ops = json.load(sys.stdin)
    results = []
    for o in ops:
        t = time.monotonic()
        try:
            r = OPS[o["op"]](o)
            r["ok"] = "err" not in r
        except BaseException as e:
            r = {"ok": False, "err": classify(e), "connected": False}
        r["took"] = round(time.monotonic() - t, 3)
        r["op"] = o
        results.append(r)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
