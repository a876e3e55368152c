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
import shutil
import stat
import tempfile
import threading

import pytest

from conftest import HUTCH, SLOWDOWN, Sandbox, wait_until
from netfake import WEB
from test_journal import run_as, stranger  # noqa: F401 (stranger: a fixture)
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


def client_sandbox(nh, fakenet):
    """A sandbox of network allow:API with the fake internet's CA and CLIENT."""
    sb = create(nh, "--network", f"allow:{API}")
    install_ca(sb, fakenet)
    sb.put_file("/workspace/client.py", CLIENT.encode(), "644")
    return sb


def start_gated_pair(sb, a_args, b_args):
    """Two background runs of /workspace/client.py (A_ARGS /tmp/ga /tmp/ea
    "# cmd-A", B likewise): A's gate opened and its output waited for,
    then B's, so both (and the releasing command) run while each
    connects. Their end gates /tmp/ea and /tmp/eb are left closed."""
    sb.sh("mkfifo /tmp/ga /tmp/gb /tmp/ea /tmp/eb")
    a = start(sb, f"python3 /workspace/client.py {a_args} /tmp/ga /tmp/ea # cmd-A")
    b = start(sb, f"python3 /workspace/client.py {b_args} /tmp/gb /tmp/eb # cmd-B")
    sb.sh("echo > /tmp/ga")
    assert wait_until(lambda: output(sb, a), timeout=30)
    sb.sh("echo > /tmp/gb")
    assert wait_until(lambda: output(sb, b), timeout=30)
    return a, b


def test_two_commands_at_once_each_get_their_own(nh, fakenet):
    sb = client_sandbox(nh, fakenet)
    # A connects while B runs too (and the releasing command): neither
    # time nor order can tell them apart, only the socket's holder.
    a, b = start_gated_pair(sb, f"{API} {API}", f"{WEB} {UNLISTED}")
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


def process(sb, pid):
    status, res = sb.api("GET", "/v1/list_processes")
    assert status == 200, res
    return [p for p in res["processes"] if p["id"] == pid][0]


def journal(nh, sid):
    r = nh("journal", sid, "--json")
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in r.stdout.decode().splitlines()]


def assert_summary_matches(summary, recs):
    """A command's egress summary against its records in the log: the
    verdicts' counts; the bytes equal once none was open at its end
    (else what had moved by then: at most the records')."""
    assert summary["allowed"] == sum(r["verdict"] == "allowed" for r in recs), (summary, recs)
    assert summary["refused"] == sum(r["verdict"] == "refused" for r in recs), (summary, recs)
    for k in ("bytes_up", "bytes_down"):
        total = sum(r.get(k, 0) for r in recs)
        assert summary[k] == total if "open" not in summary else summary[k] <= total, \
            (k, summary, recs)


def test_each_command_s_egress_summary_in_its_result_and_journal_line(nh, fakenet):
    """Two commands at once: each one's result (its process record at its
    end) and journal exit line count its own connections only."""
    sb = client_sandbox(nh, fakenet)
    # By address (no DNS answer, which goes to the running commands by time).
    a, b = start_gated_pair(sb, f"{WEB} {API}", f"{WEB} {UNLISTED}")
    assert output(sb, a).startswith("answer HTTP/1."), output(sb, a)
    assert output(sb, b).startswith("error"), output(sb, b)
    sb.sh("echo > /tmp/ea; echo > /tmp/eb")
    assert wait_until(lambda: process(sb, a)["status"] != "running"
                      and process(sb, b)["status"] != "running", timeout=30)
    ea, eb = process(sb, a)["egress"], process(sb, b)["egress"]
    # Decided before each client printed: exact whatever the proxy's pace.
    assert ea["allowed"] == 1 and ea["refused"] == 0 and ea["dns"] == 0, ea
    assert ea["bytes_up"] > 0 and ea["bytes_down"] > 0, ea
    assert eb["allowed"] == 0 and eb["refused"] == 1 and eb["bytes_down"] == 0, eb
    assert "shared" not in ea and "shared" not in eb, (ea, eb)
    assert wait_until(lambda: len(tls(net_log(sb))) >= 2, timeout=30), net_log(sb)
    log = net_log(sb)
    for pid, summary in ((a, ea), (b, eb)):
        cmd = process(sb, pid)["command"]
        recs = [r for r in tls(log) if r["commands"][0].get("command") == cmd]
        assert len(recs) == 1, (cmd, log)
        assert_summary_matches(summary, recs)
    # The journal's exit lines of the two start_process requests.
    lines = journal(nh, sb.id)
    starts = {x["command"]: x for x in lines if x.get("route") == "POST /v1/start_process"}
    for mark, summary in (("cmd-A", ea), ("cmd-B", eb)):
        req = [x for c, x in starts.items() if mark in c][0]
        end = req if "exit" in req else [x for x in lines if x.get("of") == req["seq"]][0]
        assert end["egress"] == summary, (end, summary)
    human = nh("journal", sb.id).stdout.decode()
    assert "[net 1 allowed 0 refused, up " in human, human
    assert "[net 0 allowed 1 refused, up " in human, human
    # A command that reaches nothing has no summary; a run's result has one.
    res = sb.run("true")
    assert "egress" not in res, res
    res = sb.run(argv=["python3", "/workspace/client.py", WEB, API, "/dev/null", "/dev/null"])
    assert res["stdout"].startswith("answer HTTP/1."), res
    assert res["egress"]["allowed"] == 1 and res["egress"]["refused"] == 0, res
    assert res["egress"]["bytes_down"] > 0, res
    # The cloud executor's route carries it as an extra field.
    status, res = sb.api("POST", "/run", {"cmd": f"python3 /workspace/client.py {WEB} "
                                                 f"{UNLISTED} /dev/null /dev/null"})
    assert status == 200 and res["egress"]["refused"] == 1, res
    sb.rm()


def test_follow_and_an_ended_sandbox_s_log(nh, fakenet):
    """net-log --follow prints each record as it is written and ends with
    the sandbox; an ended sandbox's log is read from its kept file."""
    sb = client_sandbox(nh, fakenet)
    follower = nh.popen("net-log", sb.id, "--follow", "--json")
    got = []
    reader = threading.Thread(target=lambda: got.extend(follower.stdout), daemon=True)
    reader.start()
    try:
        res = sb.run(argv=["python3", "/workspace/client.py", WEB, API, "/dev/null", "/dev/null"])
        assert res["stdout"].startswith("answer HTTP/1."), res
        res = sb.run(argv=["python3", "/workspace/client.py", WEB, UNLISTED, "/dev/null",
                           "/dev/null"])
        assert res["stdout"].startswith("error"), res
        assert wait_until(lambda: len(tls(net_log(sb))) >= 2, timeout=30), net_log(sb)
        live = net_log(sb)["records"]
        # Each record as it is written, while the sandbox lives.
        assert wait_until(lambda: len(got) >= len(live), timeout=30), (got, live)
        assert follower.poll() is None
        sb.rm()
        # It ends by itself once the sandbox has ended and its supervisor
        # has let go of the file.
        assert follower.wait(timeout=60 * SLOWDOWN) == 0, follower.stderr.read()
        reader.join(timeout=10 * SLOWDOWN)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    followed = [json.loads(x) for x in got]
    assert followed[:len(live)] == live, (followed, live)
    # Ended: the kept file, the same records (and any written at the end).
    r = nh("net-log", sb.id, "--json")
    assert r.returncode == 0, r.stderr
    ended = json.loads(r.stdout)
    assert ended["ended"] is True and ended["records"] == followed, (ended, followed)
    assert ended["next"] == followed[-1]["seq"] + 1 and ended["dropped"] == 0, ended
    r = nh("net-log", sb.id, "--since", str(followed[-1]["seq"]), "--json")
    assert json.loads(r.stdout)["records"] == followed[-1:], r.stdout
    r = nh("net-log", sb.id)
    text = r.stdout.decode()
    assert r.returncode == 0 and f"allowed {API}" in text and f"refused {UNLISTED}" in text, text
    r = nh("net-log", "--follow", sb.id)  # ended: what is kept, then done
    assert r.returncode == 0 and f"refused {UNLISTED}" in r.stdout.decode(), r
    # None kept: the verb says so.
    gone = sb.id[:-1] + ("0" if sb.id[-1] != "0" else "1")
    r = nh("net-log", gone)
    assert r.returncode == 65, r


def test_another_user_cannot_read_it(stranger, fakenet):
    """net.jsonl and its kept copy are 0600, the owner's: another user can
    read neither, by hand or through hutch net-log."""
    top = tempfile.mkdtemp(prefix="hutch-netlog-")
    os.chmod(top, 0o755)  # open on the way: the file's own mode keeps it private
    h = NetHutch(os.path.join(top, "rt"))
    try:
        sb = create(h, "--network", f"allow:{API}")
        # Refused at once by the proxy (not TLS): a record, no fake host needed.
        sb.run(argv=["python3", "-c", "import socket; s = socket.create_connection(('"
                     + WEB + "', 443), 10); s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); s.recv(9)"])
        assert wait_until(lambda: tls(net_log(sb)), timeout=30)
        live = os.path.join(h.rtdir, sb.id, "net.jsonl")

        def as_stranger(*argv):
            return run_as(stranger, h.rtdir, *argv)

        for d in (h.rtdir, os.path.join(h.rtdir, sb.id)):
            os.chmod(d, 0o755)
        assert as_stranger("cat", live).returncode != 0
        sb.rm()
        kept = os.path.join(h.rtdir, ".gone", sb.id + ".net")
        assert wait_until(lambda: os.path.exists(kept), timeout=30)
        assert h("net-log", sb.id).returncode == 0
        os.chmod(os.path.join(h.rtdir, ".gone"), 0o755)
        st = os.stat(kept)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid(), oct(st.st_mode)
        assert as_stranger("cat", kept).returncode != 0
        r = as_stranger(HUTCH, "net-log", sb.id)
        assert r.returncode == 69 and WEB.encode() not in r.stdout, r  # not capable
    finally:
        h.cleanup()
        shutil.rmtree(top, ignore_errors=True)


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
