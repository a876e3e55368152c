"""The executor contract's POST /run next to the native /v1/run (--executor)."""

import http.client
import json
import time

from .common import HutchError, interleave, UnixHTTPConnection


class KeptOpen:
    """One kept-open HTTP/1.1 connection (unix socket or TCP) posting one
    fixed request; run() times a round trip and checks the answer."""

    def __init__(self, conn, path, body, headers, check):
        self.conn, self.path, self.check = conn, path, check
        self.body = json.dumps(body).encode()
        self.headers = dict(headers, **{"Content-Type": "application/json"})

    def run(self):
        t0 = time.perf_counter()
        self.conn.request("POST", self.path, body=self.body, headers=self.headers)
        resp = self.conn.getresponse()
        data = resp.read()
        dt = time.perf_counter() - t0
        if resp.status != 200 or not self.check(json.loads(data)):
            raise HutchError("POST %s: HTTP %d: %s" % (self.path, resp.status, data[:500]))
        if resp.will_close:
            self.conn.close()
        return dt


def measure_executor(args, res, hutch):
    """The cloud executor's contract against hutch's native API: POST /run
    of `true` ({"cmd": "true"}, so both run sh -c true) on one kept-open
    connection each, interleaved; the contract also over its TCP listener
    (--executor-port, bearer secret)."""
    g = res.group("POST /run of `true`: the executor's contract vs the native API "
                  "(target: contract <= native)")
    _, out = hutch.r.timed([hutch.bin, "create", "--executor-port", "0", "--json"], HutchError,
                           capture=True)
    info = json.loads(out)
    sid, e = info["id"], info["executor"]
    hutch.ids.append(sid)
    auth = {"Authorization": "Bearer " + e["secret"]}
    clients = [
        ("native /v1/run, unix socket",
         KeptOpen(UnixHTTPConnection(info["socket"]), "/v1/run", {"cmd": "true"}, {},
                  lambda d: d.get("exit_code") == 0)),
        ("executor /run, unix socket",
         KeptOpen(UnixHTTPConnection(info["socket"]), "/run", {"cmd": "true"}, {},
                  lambda d: d.get("code") == 0)),
        ("executor /run, TCP 127.0.0.1 + bearer secret",
         KeptOpen(http.client.HTTPConnection("127.0.0.1", e["port"], timeout=30), "/run",
                  {"cmd": "true"}, auth, lambda d: d.get("code") == 0)),
    ]
    try:
        interleave(g, [(name, c.run) for name, c in clients], args.iterations, warmup=3)
        g["pairs"] = [("executor /run, unix socket", "native /v1/run, unix socket",
                       "<= 1.0"),
                      ("executor /run, TCP 127.0.0.1 + bearer secret",
                       "native /v1/run, unix socket", None)]
    finally:
        for _, c in clients:
            c.conn.close()
        hutch.rm(sid)
