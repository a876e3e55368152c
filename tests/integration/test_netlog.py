# SPDX-License-Identifier: Apache-2.0
"""The egress log per command (issue 29): every connection the allow mode's
proxy decides is a record of hutch net-log / GET /v1/net_log / net.jsonl,
with its rule, bytes each way and the command that made it; two commands
at once each get their own connection (the exact owner); no header
binding's value anywhere in it. Against the fake internet (netfake.py),
run under flock /work/locks/net.lock."""
import json
import os
import secrets
import stat

import pytest

from conftest import Sandbox, wait_until
from netfake import WEB
from test_network import NetHutch, install_ca

pytestmark = pytest.mark.usefixtures("fakenet")

API = "api.test.example"
UNLISTED = "unlisted.test.example"
BOUND = "bound.test.example"

# Waits for its gate (a FIFO) to open, makes one TLS connection to ADDR
# with the server name HOST (its answer or its error printed), then waits
# for its end gate.
CLIENT = r'''
import socket, ssl, sys
addr, host, gate, end = sys.argv[1:5]
open(gate).read()  # until the writer closes: its echo never meets a closed FIFO
ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
try:
    with socket.create_connection((addr, 443), timeout=20) as s:
        with ctx.wrap_socket(s, server_hostname=host) as t:
            t.sendall(b"GET / HTTP/1.0\r\nHost: " + host.encode() + b"\r\n\r\n")
            print("answer", t.recv(4096).decode(errors="replace").splitlines()[0], flush=True)
except Exception as e:
    print("error", type(e).__name__, flush=True)
open(end).read()
'''


@pytest.fixture
def nh(tmp_path):
    h = NetHutch(tmp_path / "rt")
    yield h
    h.cleanup()


def net_log(sb, query=""):
    status, res = sb.api("GET", "/v1/net_log" + query)
    assert status == 200, res
    return res


def tls(log):
    """The proxy's records (not the DNS stub's answers)."""
    return [r for r in log["records"] if r["kind"] != "dns"]


def create(nh, *opts, env=None):
    r = nh("create", "--json", *opts, env=env)
    assert r.returncode == 0, r.stderr.decode()
    return Sandbox(nh, json.loads(r.stdout))


def start(sb, cmd):
    status, res = sb.api("POST", "/v1/start_process", {"cmd": cmd})
    assert status == 200, res
    return res["id"]


def output(sb, pid):
    status, res = sb.api("GET", f"/process_output?id={pid}")
    assert status == 200, res
    return res.get("data", "")


def test_two_commands_at_once_each_get_their_own(nh, fakenet):
    sb = create(nh, "--network", f"allow:{API}")
    install_ca(sb, fakenet)
    sb.put_file("/workspace/client.py", CLIENT.encode(), "644")
    sb.sh("mkfifo /tmp/ga /tmp/gb /tmp/ea /tmp/eb")
    a = start(sb, f"python3 /workspace/client.py {API} {API} /tmp/ga /tmp/ea # cmd-A")
    b = start(sb, f"python3 /workspace/client.py {WEB} {UNLISTED} /tmp/gb /tmp/eb # cmd-B")
    # A connects while B runs too (and the releasing command): neither
    # time nor order can tell them apart, only the socket's holder.
    sb.sh("echo > /tmp/ga")
    assert wait_until(lambda: "answer" in output(sb, a) or "error" in output(sb, a), timeout=30)
    sb.sh("echo > /tmp/gb")
    assert wait_until(lambda: "error" in output(sb, b) or "answer" in output(sb, b), timeout=30)
    assert output(sb, a).startswith("answer HTTP/1."), output(sb, a)
    assert output(sb, b).startswith("error"), output(sb, b)
    # A record is made at the connection's close, which the proxy sees
    # after the client has printed: bounded wait for both.
    assert wait_until(lambda: len(tls(net_log(sb))) >= 2, timeout=30), net_log(sb)
    log = net_log(sb)
    assert log["mode"] == "allow" and log["dropped"] == 0, log
    allowed = [r for r in tls(log) if r["host"] == API]
    refused = [r for r in tls(log) if r["host"] == UNLISTED]
    assert len(allowed) == 1 and len(refused) == 1, log
    ok, no = allowed[0], refused[0]
    assert ok["verdict"] == "allowed" and ok["rule"] == f"{API}:443", ok
    assert ok["upstream"] == f"{WEB}:443" and ok["port"] == 443, ok
    assert ok["bytes_up"] > 0 and ok["bytes_down"] > 0, ok
    assert no["verdict"] == "refused" and no["rule"] == "unlisted", no
    assert UNLISTED in no["reason"] and no["bytes_down"] == 0, no
    for rec, mark in ((ok, "cmd-A"), (no, "cmd-B")):
        assert rec["owner"] == "exact" and len(rec["commands"]) == 1, rec
        assert mark in rec["commands"][0]["command"], rec
        assert rec["commands"][0]["process"] > 0, rec
    # The same records in net.jsonl, private to the sandbox's owner.
    path = os.path.join(nh.rtdir, sb.id, "net.jsonl")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid(), oct(st.st_mode)
    with open(path) as f:
        lines = [json.loads(x) for x in f]
    assert [x["seq"] for x in lines] == [r["seq"] for r in log["records"]], lines
    # since/limit page through the records.
    assert net_log(sb, f"?since={log['next']}")["records"] == []
    one = net_log(sb, "?since=0&limit=1")
    assert len(one["records"]) == 1 and one["next"] == 1, one
    # The CLI's lines name the verdict, rule and command.
    r = nh("net-log", sb.id)
    text = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert f"allowed {API}" in text and f"refused {UNLISTED}" in text, text
    assert f"cmd {no['commands'][0]['id']} (python3" in text, text
    r = nh("net-log", sb.id, "--json")
    assert json.loads(r.stdout)["records"] == log["records"]
    sb.sh("echo > /tmp/ea; echo > /tmp/eb")
    sb.rm()
    # Kept beside the tombstone after rm, as the journal is (moved at the
    # teardown's end, which rm's answer does not wait for).
    assert wait_until(lambda: os.path.exists(os.path.join(nh.rtdir, ".gone", sb.id + ".net")),
               timeout=30)


def assert_no_secret(nh, sb, log, secret):
    """Not in the answer, net.jsonl or the CLI's JSON."""
    with open(os.path.join(nh.rtdir, sb.id, "net.jsonl"), "rb") as f:
        on_disk = f.read()
    r = nh("net-log", sb.id, "--json")
    for where in (json.dumps(log).encode(), on_disk, r.stdout):
        assert secret.encode() not in where


def test_no_secret_of_a_binding_in_the_log(nh, fakenet):
    secret = "s3cr3t-" + secrets.token_hex(16)
    sb = create(nh, "--network", f"allow:{BOUND}", "--header-binding",
                f"{BOUND}:Authorization=Bearer {{secret}}@env:HB_SECRET",
                env={"HB_SECRET": secret, "HUTCH_UPSTREAM_CA": fakenet.ca})
    sb.sh(f"curl -sS --fail https://{BOUND}/a -o /dev/null")
    assert wait_until(lambda: tls(net_log(sb)), timeout=30)
    log = net_log(sb)
    rec = [r for r in tls(log) if r["host"] == BOUND]
    assert len(rec) == 1 and rec[0]["verdict"] == "allowed" and rec[0]["bytes_up"] > 0, log
    assert rec[0]["owner"] == "time" and "curl" in rec[0]["commands"][0]["command"], rec
    assert_no_secret(nh, sb, log, secret)
    sb.rm()


def test_errors_of_the_verb_and_the_route(nh, fakenet):
    r = nh("net-log", "0123456789ab")
    assert r.returncode != 0 and "0123456789ab" in r.stderr.decode(), r.stderr
    sb = create(nh, "--network", f"allow:{API}")
    r = nh("net-log", sb.id, "--since", "soon")
    assert r.returncode == 64 and "--since" in r.stderr.decode(), r.stderr
    for q, says in (("?since=soon", "'since'"), ("?since=-1", "'since'"),
                    ("?limit=0", "'limit'"), ("?limit=100000", "'limit'")):
        status, res = sb.api("GET", "/v1/net_log" + q)
        assert status == 400 and res["error"]["code"] == "invalid_request", (q, res)
        assert says in res["error"]["message"], (q, res)
    status, res = sb.api("POST", "/v1/net_log", {})
    assert status == 405, res
    assert net_log(sb)["records"] == []
    sb.rm()
    # --net-log off: no record, no file.
    sb = create(nh, "--network", f"allow:{API}", "--net-log", "off")
    assert sb.info["config"]["net_log"] is False
    assert sb.run(argv=["python3", "-c", "import socket; socket.create_connection(('"
                        + WEB + "', 443), 10).sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')"])
    assert net_log(sb)["records"] == []
    assert not os.path.exists(os.path.join(nh.rtdir, sb.id, "net.jsonl"))
    sb.rm()
    # A sandbox of network none answers an empty log.
    sb = create(nh)
    assert net_log(sb) == {"mode": "none", "dropped": 0, "next": 0, "records": []}
    r = nh("net-log", sb.id)
    assert r.returncode == 0 and "network none" in r.stdout.decode(), r
    sb.rm()
