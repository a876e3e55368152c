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
    data = b""
    while len(data) < limit:
        b = s.recv(4096)
        if not b:
            break
        data += b
    return data


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


OPS = {"resolve": op_resolve, "tls": op_tls, "raw": op_raw, "udp": op_udp, "dns": op_dns}


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
