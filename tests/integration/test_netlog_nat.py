# SPDX-License-Identifier: Apache-2.0
"""The egress log of network all's NAT path (issue 29): every TCP or UDP
flow a command starts beyond the sandbox's loopback is a record ("kind":
"nat") with its verdict and rule (the host's refusals decided the same
way), bytes each way from conntrack at the flow's end, and the command that
made it, two at once each their own. Against the fake internet
(netfake.py), run under flock /work/locks/net.lock."""
import json
import os
import secrets

import pytest

from conftest import wait_until
from netfake import HOST_IP, PRIVATE, WEB
from test_netlog import (assert_no_secret, assert_summary_matches, create,  # noqa: F401 (nh)
                         journal, net_log, nh, output, process, start_gated_pair, tls)

pytestmark = pytest.mark.usefixtures("fakenet")

# Waits for its gate (a FIFO), connects over TCP to ADDR:PORT and (send)
# sends one request and prints the answer's first line, or (hold) prints
# "connected" (the error if any), then holds the socket until its end gate
# opens: the socket stays in the kernel's table (a server's close leaves it
# in CLOSE_WAIT; a reset would take it out: nothing is sent to a server
# that would answer one).
CLIENT = r'''
import socket, sys
addr, port, how, gate, end = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
open(gate).read()
try:
    s = socket.create_connection((addr, port), timeout=20)
    if how == "send":
        s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        print("answer", s.recv(4096).decode(errors="replace").splitlines()[0], flush=True)
    else:
        print("connected", flush=True)
except OSError as e:
    s = None
    print("error", type(e).__name__, flush=True)
open(end).read()
if s:
    s.close()
'''


def nat(log):
    return [r for r in log["records"] if r["kind"] == "nat"]


def test_two_commands_at_once_each_get_their_own_flow(nh, fakenet):
    sb = create(nh, "--network", "all", "--nat-log", "on")
    sb.put_file("/workspace/client.py", CLIENT.encode(), "644")
    # Both run while each connects (and the releasing command too): only
    # the holder of the socket tells the flows apart. Each holds its
    # connection until its end gate opens.
    a, b = start_gated_pair(sb, f"{WEB} 80 send", f"{WEB} 8443 hold")
    assert output(sb, a).startswith("answer HTTP/1."), output(sb, a)
    assert output(sb, b).startswith("connected"), output(sb, b)
    # Records are made at a flow's end (conntrack's), after the close.
    sb.sh("echo > /tmp/ea; echo > /tmp/eb")
    assert wait_until(lambda: len(nat(net_log(sb))) >= 2, timeout=30), net_log(sb)
    log = net_log(sb)
    assert log["mode"] == "all" and "complete" not in log, log
    by_port = {r["port"]: r for r in nat(log)}
    assert set(by_port) == {80, 8443}, log
    for rec, mark in ((by_port[80], "cmd-A"), (by_port[8443], "cmd-B")):
        assert rec["verdict"] == "allowed" and rec["rule"] == "all", rec
        assert rec["proto"] == "tcp" and rec["address"] == f"{WEB}:{rec['port']}", rec
        assert rec["owner"] == "exact" and len(rec["commands"]) == 1, rec
        assert mark in rec["commands"][0]["command"], rec
        assert rec["commands"][0]["process"] > 0, rec
        # IP packets' bytes (headers too): at least the handshake's.
        assert rec["bytes_up"] >= 120 and rec["bytes_down"] >= 80, rec
    assert by_port[80]["bytes_down"] > len("HTTP/1.0 200"), by_port[80]
    # The same in net.jsonl and the CLI's lines.
    with open(os.path.join(nh.rtdir, sb.id, "net.jsonl")) as f:
        lines = [json.loads(x) for x in f]
    assert [x for x in lines if x["kind"] == "nat"] == nat(log), lines
    r = nh("net-log", sb.id)
    assert r.returncode == 0, r.stderr
    assert f"allowed tcp {WEB}:80" in r.stdout.decode(), r.stdout
    # Each process's egress summary at its end is its own flow: counted
    # when the kernel's log was read (before its exit was taken), its
    # bytes conntrack's at its exit (the flow's end comes a second later).
    assert wait_until(lambda: process(sb, a)["status"] != "running"
                      and process(sb, b)["status"] != "running", timeout=30)
    for pid, port in ((a, 80), (b, 8443)):
        summary = process(sb, pid)["egress"]
        assert summary["allowed"] == 1 and summary["refused"] == 0, summary
        assert summary["bytes_up"] >= 120 and summary["bytes_down"] >= 80, summary
        assert "shared" not in summary and "complete" not in summary, summary
        assert_summary_matches(summary, [by_port[port]])
    lines = journal(nh, sb.id)
    exits = [x for x in lines if "of" in x or x.get("route") == "POST /v1/start_process"]
    assert sorted(x["egress"]["allowed"] for x in exits if "egress" in x) == [1, 1], exits
    sb.rm()


def test_refusals_and_udp_with_one_command(nh, fakenet):
    sb = create(nh, "--network", "all", "--nat-log", "on")
    meta = PRIVATE["metadata"]
    code = (
        "import socket\n"
        f"for a in ({meta!r}, {HOST_IP!r}):\n"
        "    try:\n"
        "        socket.create_connection((a, 80), timeout=10).close()\n"
        "        print('connected', a)\n"
        "    except OSError as e:\n"
        "        print('refused', a, type(e).__name__)\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"u.sendto(b'x' * 100, ({WEB!r}, 9999))\n"
        "u.close()\n")
    res = sb.run(argv=["python3", "-c", code])
    assert res["exit_code"] == 0 and "connected" not in res["stdout"], res
    # Its result: two refusals and the UDP flow (its bytes so far: 100 and
    # the headers), open or ended by then.
    summary = res["egress"]
    assert summary["refused"] == 2 and summary["allowed"] == 1, summary
    assert summary["bytes_up"] >= 128 and summary["bytes_down"] == 0, summary
    assert wait_until(lambda: len(nat(net_log(sb))) >= 3, timeout=30), net_log(sb)
    assert_summary_matches(summary, nat(net_log(sb)))
    recs = {r["address"]: r for r in nat(net_log(sb))}
    for addr, says in ((meta, "never reaches"), (HOST_IP, "this machine")):
        rec = recs[f"{addr}:80"]
        assert rec["verdict"] == "refused" and rec["rule"] == "forbidden_address", rec
        assert says in rec["reason"] and rec["bytes_up"] == 0, rec
        assert rec["owner"] == "time" and "python3" in rec["commands"][0]["command"], rec
    udp = recs[f"{WEB}:9999"]
    assert udp["proto"] == "udp" and udp["verdict"] == "allowed", udp
    assert udp["bytes_up"] >= 128 and udp["bytes_down"] == 0, udp
    assert udp["owner"] == "time", udp
    sb.rm()


@pytest.mark.parametrize("mode", ["all", "none"])
def test_egress_list_refusal_is_named(nh, fakenet, mode):
    """--egress narrows all, or opens none (wired as all, its table in the
    netns): either way the log's mode is the one that applies, all."""
    sb = create(nh, "--network", mode, "--nat-log", "on", "--egress", f"{WEB}/32")
    code = (
        "import socket\n"
        "for a in ('198.51.100.11', '198.51.100.10'):\n"
        "    try:\n"
        "        socket.create_connection((a, 80), timeout=10).close()\n"
        "        print('connected', a)\n"
        "    except OSError as e:\n"
        "        print('refused', a)\n")
    res = sb.run(argv=["python3", "-c", code])
    assert "refused 198.51.100.11" in res["stdout"], res
    assert "connected 198.51.100.10" in res["stdout"], res
    assert wait_until(lambda: len(nat(net_log(sb))) >= 2, timeout=30), net_log(sb)
    recs = {r["address"]: r for r in nat(net_log(sb))}
    assert recs["198.51.100.11:80"]["rule"] == "egress", recs
    assert recs["198.51.100.10:80"]["verdict"] == "allowed", recs
    assert net_log(sb)["mode"] == "all", net_log(sb)
    text = nh("net-log", sb.id).stdout.decode()
    assert "allowed tcp 198.51.100.10:80" in text and "network none" not in text, text
    sb.rm()


def test_no_secret_of_a_binding_and_no_double_record(nh, fakenet):
    secret = "s3cr3t-" + secrets.token_hex(16)
    host = "bound.test.example"
    sb = create(nh, "--network", "all", "--nat-log", "on", "--header-binding",
                f"{host}:Authorization=Bearer {{secret}}@env:HB_SECRET",
                env={"HB_SECRET": secret, "HUTCH_UPSTREAM_CA": fakenet.ca})
    sb.sh(f"curl -sS --fail https://{host}/a -o /dev/null")
    assert wait_until(lambda: tls(net_log(sb)), timeout=30)
    log = net_log(sb)
    # The bound 443 is the proxy's record, not a NAT flow as well: the
    # kernel logged no first packet (read before the proxy's accept).
    assert [r["kind"] for r in tls(log)] == ["redirect"], log
    status, res = sb.api("GET", "/status")
    assert res["network"]["nat_logged"] == 0, res["network"]
    assert_no_secret(nh, sb, log, secret)
    sb.rm()


@pytest.mark.parametrize("opts", [(), ("--net-log", "off"), ("--net-log", "off", "--nat-log", "on")])
def test_nat_path_is_logged_only_when_asked(nh, fakenet, opts):
    """Network all logs its NAT path only with --nat-log on (and the log
    on): by default, and with --net-log off, no rule, no flow record."""
    sb = create(nh, "--network", "all", *opts)
    assert sb.info["config"]["nat_log"] is ("--nat-log" in opts)
    res = sb.run(argv=["python3", "-c", f"import socket; socket.create_connection(('{WEB}', 80), "
                       "10).close(); print(socket.gethostbyname('api.test.example'))"])
    assert res["exit_code"] == 0, res
    recs = net_log(sb)["records"]
    assert nat({"records": recs}) == [], recs
    # The DNS stub's answer is a record when the log is on.
    assert {r["kind"] for r in recs} == (set() if opts else {"dns"}), recs
    # No log rule in the sandbox's netns: nothing to read it.
    status, res = sb.api("GET", "/status")
    assert "nat_logged" not in json.dumps(res), res
    sb.rm()


def dns(log):
    return [r for r in log["records"] if r["kind"] == "dns"]


def test_dns_answers_are_recorded_and_name_the_flows(nh, fakenet):
    sb = create(nh, "--network", "all", "--nat-log", "on")
    code = (
        "import socket\n"
        "a = socket.gethostbyname('api.test.example')\n"
        "socket.create_connection((a, 80), timeout=10).close()\n"
        "try:\n"
        "    socket.gethostbyname('nowhere.example')\n"
        "except OSError:\n"
        "    print('no nowhere')\n")
    res = sb.run(argv=["python3", "-c", code])
    assert res["exit_code"] == 0 and "no nowhere" in res["stdout"], res
    assert wait_until(lambda: nat(net_log(sb)), timeout=30), net_log(sb)
    log = net_log(sb)
    answers = {(r["host"], r["type"]): r for r in dns(log)}
    ok = answers[("api.test.example", "A")]
    assert ok["answer"] == "NOERROR" and ok["addresses"] == [WEB], ok
    assert ok["verdict"] == "allowed" and ok["rule"] == "all", ok
    assert ok["owner"] == "time" and "python3" in ok["commands"][0]["command"], ok
    no = answers[("nowhere.example", "A")]
    assert no["answer"] == "NXDOMAIN" and no["addresses"] == [], no
    # The flow to the answered address carries the name.
    flow = nat(log)[0]
    assert flow["host"] == "api.test.example" and flow["address"] == f"{WEB}:80", flow
    r = nh("net-log", sb.id)
    assert f"dns api.test.example A -> NOERROR {WEB}" in r.stdout.decode(), r.stdout
    sb.rm()


def test_dns_of_allow_mode_refuses_unlisted_names(nh, fakenet):
    sb = create(nh, "--network", "allow:api.test.example")
    res = sb.run("getent hosts api.test.example; getent hosts unlisted.test.example; true")
    assert WEB in res["stdout"], res
    log = net_log(sb)
    answers = {(r["host"], r["type"]): r for r in dns(log)}
    ok = answers[("api.test.example", "A")]
    assert ok["verdict"] == "allowed" and ok["rule"] == "api.test.example", ok
    assert ok["addresses"] == [WEB], ok
    no = answers[("unlisted.test.example", "A")]
    assert no["verdict"] == "refused" and no["rule"] == "unlisted", no
    assert no["answer"] == "NXDOMAIN" and "allow list" in no["reason"], no
    sb.rm()


def test_a_nat_log_the_kernel_cannot_turn_on_is_said(nh, fakenet):
    """--nat-log on where the sandbox's netns cannot turn the log on (a
    host whose nf_conntrack cannot be loaded: its settings are not there;
    here HUTCH_TEST_NATLOG_SYSCTLS names a directory that is not there
    either): the sandbox is made and works, without the log, and its
    events log says so, why and the fix (it said nothing before); the
    answer is not complete."""
    sb = create(nh, "--network", "all", "--nat-log", "on",
                env={"HUTCH_TEST_NATLOG_SYSCTLS": "/proc/sys/net/netfilter/none"})
    ev = nh("events", sb.id).stdout.decode()
    warn = [ln for ln in ev.splitlines() if "warning:" in ln]
    assert len(warn) == 1, ev
    assert "--nat-log on, but the NAT path is not logged: egress log: write " \
           "'/proc/sys/net/netfilter/none/nf_conntrack_acct': No such file or directory" \
           in warn[0], warn
    assert "nf_conntrack and nfnetlink_log: modprobe them" in warn[0], warn
    res = sb.run(argv=["python3", "-c", f"import socket; socket.create_connection(('{WEB}', 80), "
                       "10).close()"])
    assert res["exit_code"] == 0, res
    log = net_log(sb)
    assert log["complete"] is False and nat(log) == [], log
    sb.rm()
    # where it can be turned on, no such line
    sb = create(nh, "--network", "all", "--nat-log", "on")
    assert "warning:" not in nh("events", sb.id).stdout.decode()
    assert "complete" not in net_log(sb)  # complete: said only when not
    sb.rm()
