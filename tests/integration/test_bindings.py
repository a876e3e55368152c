# SPDX-License-Identifier: Apache-2.0
"""Header bindings (issue 16): --header-binding HOST:HEADER=VALUE, the
supervisor's proxy terminating the sandbox's TLS to a bound host with the
sandbox's own CA and setting the header on every request upstream, proved
against the fake internet's keep-alive HTTPS server (bound.test.example,
which logs every request's headers). The secret is random per test and
searched for, byte for byte, in everything a sandbox process can read."""
import json
import os
import secrets
import subprocess
import time

import pytest

from conftest import HUTCH, files_holding
from netfake import BOUND, RESOLVER
from test_network import NetHutch, USAGE

BOUND_HOST = "bound.test.example"
ALLOW = f"allow:{BOUND_HOST},api.test.example"

# hutch, the host's listeners and every client here run in the fake
# internet's host netns (netfake.py), never in the machine's own.
pytestmark = pytest.mark.usefixtures("fakenet")


@pytest.fixture
def nh(tmp_path):
    h = NetHutch(tmp_path / "rt")
    yield h
    h.cleanup()


def bound_requests(fakenet, mark):
    return [e for e in fakenet.since(mark, "bound443") if e.get("event") == "request"]


def header(entry, name):
    vals = [v for n, v in entry["headers"] if n.lower() == name.lower()]
    return vals


def make(nh, fakenet, secret, *extra, network=ALLOW, value="Bearer {secret}@env:HB_SECRET",
         upstream_ca=True):
    env = {"HB_SECRET": secret}
    if upstream_ca:
        env["HUTCH_UPSTREAM_CA"] = fakenet.ca
    r = nh("create", "--json", "--network", network, "--header-binding",
           f"{BOUND_HOST}:Authorization={value}", *extra, env=env)
    assert r.returncode == 0, r.stderr.decode()
    from conftest import Sandbox
    return Sandbox(nh, json.loads(r.stdout))


def test_curl_keepalive_every_request_gets_the_header(nh, fakenet):
    secret = "s3cr3t-" + secrets.token_hex(16)
    sb = make(nh, fakenet, secret)
    mark = fakenet.mark()
    # Three requests on one connection; the second carries its own
    # Authorization, which must be replaced, not doubled.
    out = sb.sh(f"curl -sS --fail https://{BOUND_HOST}/a -o /dev/null "
                f"-H 'Authorization: Bearer forged' https://{BOUND_HOST}/b -o /dev/null "
                f"https://{BOUND_HOST}/c -w '%{{num_connects}}\\n'")
    reqs = bound_requests(fakenet, mark)
    assert [r["request"] for r in reqs] == ["GET /a HTTP/1.1", "GET /b HTTP/1.1", "GET /c HTTP/1.1"]
    assert len({r["peer"] for r in reqs}) == 1, reqs  # one keep-alive connection upstream
    assert [r["n_on_conn"] for r in reqs] == [1, 2, 3]
    for r in reqs:
        assert header(r, "Authorization") == [f"Bearer {secret}"], r
        assert r["alpn"] == "http/1.1"
    sb.rm()



PY_KEEPALIVE = r'''
import http.client, ssl, sys, urllib.request
c = http.client.HTTPSConnection(sys.argv[1], context=ssl.create_default_context())
for path in ("/p1", "/p2"):
    c.request("GET", path, headers={"Authorization": "forged"})
    r = c.getresponse(); r.read(); assert r.status == 200, r.status
c.request("POST", "/sha256", body=b"x" * 100000)
r = c.getresponse(); print(r.read().decode().strip())
print(urllib.request.urlopen(f"https://{sys.argv[1]}/u").read().decode().strip())
'''


def test_python_and_git_through_a_binding(nh, fakenet):
    secret = "s3cr3t-" + secrets.token_hex(16)
    sb = make(nh, fakenet, secret)
    sb.put_file("/workspace/ka.py", PY_KEEPALIVE.encode(), "644")
    mark = fakenet.mark()
    out = sb.sh(f"python3 /workspace/ka.py {BOUND_HOST}")
    assert out.splitlines()[0].startswith("100000 ")
    reqs = bound_requests(fakenet, mark)
    assert [r["request"].split()[1] for r in reqs] == ["/p1", "/p2", "/sha256", "/u"]
    assert [r["n_on_conn"] for r in reqs[:3]] == [1, 2, 3]  # http.client keeps one connection
    assert all(header(r, "Authorization") == [f"Bearer {secret}"] for r in reqs), reqs
    # git over HTTPS (dumb HTTP: several requests on its connection)
    mark = fakenet.mark()
    out = sb.sh(f"git clone -q https://{BOUND_HOST}/git/repo.git /workspace/repo && "
                "cat /workspace/repo/README")
    assert out == "hello from the bound host\n"
    reqs = bound_requests(fakenet, mark)
    assert any("info/refs" in r["request"] for r in reqs), reqs
    assert len(reqs) >= 3
    for r in reqs:
        assert header(r, "Authorization") == [f"Bearer {secret}"], r
        assert header(r, "User-Agent")[0].startswith("git/")


def test_bodies_chunked_and_sized_pass_unchanged(nh, fakenet):
    secret = secrets.token_hex(20)
    sb = make(nh, fakenet, secret, value="@env:HB_SECRET")
    sb.sh("head -c 3000000 /dev/urandom > /workspace/body")
    want = sb.sh("sha256sum /workspace/body").split()[0]
    mark = fakenet.mark()
    sized = sb.sh(f"curl -sS --fail --data-binary @/workspace/body https://{BOUND_HOST}/sha256")
    chunked = sb.sh(f"curl -sS --fail -H 'Transfer-Encoding: chunked' --data-binary "
                    f"@/workspace/body https://{BOUND_HOST}/sha256")
    assert sized == chunked == f"3000000 {want}\n"
    reqs = bound_requests(fakenet, mark)
    assert len(reqs) == 2 and all(header(r, "Authorization") == [secret] for r in reqs)


def sandbox_sees(sb, needle):
    """Everything a sandbox process can read that could hold the secret:
    its environment and every process's, command lines, every file under
    / (but /proc and /sys, searched through environ and cmdline, and /usr
    but /usr/local: the host's or the image's files, read-only, 9 GB on a
    host root, whose reading outlasted the timeout at a load of 15; /bin and
    /lib are links into it). The
    pattern is written so that it does not match its own command line."""
    pattern = needle[:3] + "[" + needle[3] + "]" + needle[4:]
    res = sb.run("env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; echo FILES:; "
                 "grep -rlaE '" + pattern + "' $(for d in /* /usr/local; do case $d in "
                 "/proc|/sys|/usr) ;; *) [ -L $d ] || echo $d;; esac; done) 2>/dev/null; "
                 "echo done", timeout=120)
    assert res["exit_code"] == 0 and res["stdout"].endswith("done\n"), res
    files = res["stdout"].split("FILES:\n", 1)[1]
    return needle in res["stdout"] or needle in res["stderr"] or files != "done\n"


def test_the_secret_stays_outside(nh, fakenet, tmp_path):
    secret = "Zq" + secrets.token_hex(24)
    setup = tmp_path / "setup.sh"
    setup.write_text(f"env > /workspace/setup-env\ncurl -sS --fail https://{BOUND_HOST}/s\n")
    mark = fakenet.mark()
    sb = make(nh, fakenet, secret, "--setup-script", str(setup))
    assert "SSL_CERT_FILE=/etc/hutch/ca-certificates.crt" in sb.sh("cat /workspace/setup-env")
    # Used once more, so that every path that carries it has run.
    sb.sh(f"curl -sS --fail https://{BOUND_HOST}/x -o /dev/null")
    assert [header(r, "Authorization") for r in bound_requests(fakenet, mark)] == \
        [[f"Bearer {secret}"]] * 2
    env = sb.sh("env")
    assert "SSL_CERT_FILE=/etc/hutch/ca-certificates.crt" in env
    assert "NODE_EXTRA_CA_CERTS=/etc/hutch/sandbox-ca.crt" in env
    assert not sandbox_sees(sb, secret)
    canary = "Cq" + secrets.token_hex(24)  # the search finds what is there
    sb.sh(f"echo {canary} > /home/appuser/.canary")
    assert sandbox_sees(sb, canary)
    # Host side: what the API, the CLI and the logs say.
    st = json.dumps(sb.status())
    assert f'"header_bindings": [{{"host": "{BOUND_HOST}", "header": "Authorization"}}]' in st
    insp = nh("inspect", sb.id)
    ls = nh("ls", "--json")
    ev = nh("events", sb.id)
    for out in (st, insp.stdout.decode(), ls.stdout.decode(), ev.stdout.decode()):
        assert secret not in out
    assert files_holding(nh.rtdir, secret.encode()) == []
    # Memory: the secret is in the supervisor's (positive control), and
    # nowhere in init's, which was cloned from it (MADV_WIPEONFORK).
    info = json.loads(insp.stdout)
    assert memory_holds(info["supervisor_pid"], secret.encode())
    assert not memory_holds(info["init_pid"], secret.encode())
    for f in ("environ", "cmdline"):
        with open(f"/proc/{info['supervisor_pid']}/{f}", "rb") as fh:
            assert secret.encode() not in fh.read()
    sb.rm()


def memory_holds(pid, needle):
    """Whether a process's readable memory holds needle (read as host root
    through /proc/PID/mem)."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(lo)
                if needle in mem.read(hi - lo):
                    return True
            except (OSError, ValueError, OverflowError):
                continue
    return False


def test_untrusted_upstream_is_refused_and_recorded(nh, fakenet):
    secret = secrets.token_hex(16)
    # No HUTCH_UPSTREAM_CA: the host's trust store does not know the fake CA.
    sb = make(nh, fakenet, secret, upstream_ca=False)
    mark = fakenet.mark()
    res = sb.run(f"curl -sS https://{BOUND_HOST}/never")
    assert res["exit_code"] != 0, res
    assert bound_requests(fakenet, mark) == []
    tls_fail = [e for e in fakenet.since(mark, "bound443") if e.get("event") == "tls-fail"]
    assert tls_fail, fakenet.since(mark, "bound443")  # the handshake went no further
    net = sb.status()["network"]
    ref = [r for r in net["refused"] if r["host"] == BOUND_HOST]
    assert ref and ref[-1]["what"] == "tls", net
    assert "upstream certificate of bound.test.example does not verify" in ref[-1]["reason"]
    assert secret not in json.dumps(net)


CERT_ISSUER = r'''
import socket, ssl, sys
host, cafile = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile=cafile if cafile != "-" else None)
with ctx.wrap_socket(socket.create_connection((host, 443)), server_hostname=host) as s:
    print(dict(x[0] for x in s.getpeercert()["issuer"])["commonName"])
'''


def test_unbound_host_is_spliced_with_its_own_certificate(nh, fakenet):
    sb = make(nh, fakenet, secrets.token_hex(8))
    sb.put_file("/workspace/ca.pem", fakenet.ca_pem(), "644")
    sb.put_file("/workspace/issuer.py", CERT_ISSUER.encode(), "644")
    # api.test.example is listed, not bound: the real server's certificate,
    # verified against the fake CA only (the sandbox CA is not involved).
    assert sb.sh("python3 /workspace/issuer.py api.test.example /workspace/ca.pem") == \
        "hutch nettests CA\n"
    assert sb.sh(f"python3 /workspace/issuer.py {BOUND_HOST} -") == \
        "hutch sandbox CA (header bindings)\n"
    # And the fake CA cannot vouch for the bound host: the sandbox's client
    # talks to the proxy, never to the upstream.
    res = sb.run(f"python3 /workspace/issuer.py {BOUND_HOST} /workspace/ca.pem")
    assert res["exit_code"] != 0 and "CERTIFICATE_VERIFY_FAILED" in res["stderr"]


@pytest.mark.parametrize("spec, says", [
    (":Authorization=@env:HB_SECRET", "no host"),
    ("*.test.example:Authorization=@env:HB_SECRET", "wildcards"),
    ("https://bound.test.example:Authorization=@env:HB_SECRET", "not a URL"),
    ("bound.test.example:8443:Authorization=@env:HB_SECRET", "header name"),
    ("198.51.100.12:Authorization=@env:HB_SECRET", "DNS name"),
    ("bound.test.example:Bad Header=@env:HB_SECRET", "header name"),
    ("bound.test.example:Host=@env:HB_SECRET", "cannot be bound"),
    ("bound.test.example:Content-Length=@env:HB_SECRET", "cannot be bound"),
    ("bound.test.example:Authorization=@env:HB_UNSET", "HB_UNSET"),
    ("bound.test.example:Authorization=@env:HB_CRLF", "control character"),
    ("bound.test.example:Authorization=Bearer {secret}", "source"),
    ("bound.test.example:Authorization=@file:/nonexistent/x", "/nonexistent/x"),
    ("unlisted.test.example:Authorization=@env:HB_SECRET", "not in the allow list"),
    ("bound.test.example", "HOST:HEADER=VALUE"),
])
def test_bad_bindings_are_refused_naming_the_entry(nh, spec, says):
    secret = "n0tsh0wn" + secrets.token_hex(8)
    r = nh("create", "--network", ALLOW, "--header-binding", spec,
           env={"HB_SECRET": secret, "HB_CRLF": f"a\r\nX-Evil: {secret}"})
    err = r.stderr.decode()
    assert r.returncode == USAGE, err
    assert says in err, err
    assert secret not in err and nh.ids() == []


def test_binding_needs_a_network_and_literals_are_warned_about(nh, fakenet):
    r = nh("create", "--header-binding", f"{BOUND_HOST}:X-Key=@env:HB", env={"HB": "v"})
    assert r.returncode == USAGE and b"need a network" in r.stderr, r.stderr
    assert nh.ids() == []
    r = nh("create", "--json", "--network", ALLOW, "--header-binding",
           f"{BOUND_HOST}:X-Key=literal-value", env={"HUTCH_UPSTREAM_CA": fakenet.ca})
    assert r.returncode == 0, r.stderr
    assert b"warning: header binding 'bound.test.example:X-Key' has its value on the command " \
        b"line" in r.stderr
    assert b"literal-value" not in r.stderr + r.stdout
    nh("rm", json.loads(r.stdout)["id"])


def test_secret_from_a_file_and_an_fd(nh, fakenet, tmp_path):
    secret = secrets.token_hex(12)
    f = tmp_path / "token"
    f.write_text(secret + "\n")
    rfd, wfd = os.pipe()
    os.write(wfd, b"fd-" + secret.encode())
    os.close(wfd)
    e = dict(nh.env, HUTCH_UPSTREAM_CA=fakenet.ca)
    r = subprocess.run([HUTCH, "create", "--json", "--network", ALLOW, "--header-binding",
                        f"{BOUND_HOST}:X-From-File=token {{secret}}@file:{f}",
                        "--header-binding", f"{BOUND_HOST}:X-From-Fd=@fd:{rfd}"],
                       env=e, capture_output=True, pass_fds=(rfd,), timeout=60)
    os.close(rfd)
    assert r.returncode == 0, r.stderr
    from conftest import Sandbox
    sb = Sandbox(nh, json.loads(r.stdout))
    mark = fakenet.mark()
    sb.sh(f"curl -sS --fail https://{BOUND_HOST}/f -o /dev/null")
    (req,) = bound_requests(fakenet, mark)
    assert header(req, "X-From-File") == [f"token {secret}"]
    assert header(req, "X-From-Fd") == [f"fd-{secret}"]
    sb.rm()


def _client():
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "clients", "python"))
    import hutch
    return hutch


def test_python_client_round_trip(nh, fakenet, monkeypatch):
    hutch = _client()
    secret = secrets.token_hex(16)
    for k, v in nh.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HUTCH_BIN", HUTCH)
    monkeypatch.setenv("HUTCH_UPSTREAM_CA", fakenet.ca)
    cfg = hutch.LocalSandbox(
        network=hutch.Network.allow(hosts=(BOUND_HOST, "api.test.example")),
        header_bindings=[hutch.HeaderBinding(host=BOUND_HOST, header="X-Api-Key", value=secret),
                         hutch.GitHubBinding(token=secret, host=BOUND_HOST.upper())])
    assert secret not in repr(cfg.header_bindings)
    mark = fakenet.mark()
    with cfg as sb:
        out = sb.execute(f"curl -sS --fail https://{BOUND_HOST}/py")
        assert out.exit_code == 0, out
        st = json.dumps(sb.status()) if hasattr(sb, "status") else ""
        assert secret not in st
    (req,) = bound_requests(fakenet, mark)
    assert header(req, "X-Api-Key") == [secret]
    assert header(req, "Authorization") == [f"Bearer {secret}"]


def test_python_bad_bindings_refused_at_construction():
    hutch = _client()
    allow = hutch.Network.allow(hosts=("api.github.com",))
    for kw, says in [
        (dict(host="", header="Authorization", value="x"), "no host"),
        (dict(host="*.github.com", header="Authorization", value="x"), "wildcards"),
        (dict(host="https://api.github.com", header="Authorization", value="x"), "not a URL"),
        (dict(host="1.2.3.4", header="Authorization", value="x"), "DNS name"),
        (dict(host="api.github.com", header="Bad Header", value="x"), "header name"),
        (dict(host="api.github.com", header="Content-Length", value="x"), "cannot be bound"),
        (dict(host="api.github.com", header="Authorization", value="a\r\nX: y"), "control"),
    ]:
        with pytest.raises(hutch.ConfigError, match=says) as e:
            hutch.HeaderBinding(**kw)
        assert "a\r\nX" not in str(e.value)
    b = hutch.GitHubBinding(token="t")
    with pytest.raises(hutch.ConfigError, match="need a network"):
        hutch.LocalSandbox(header_bindings=[b])
    with pytest.raises(hutch.ConfigError, match="not in the allow list"):
        hutch.LocalSandbox(network=allow, header_bindings=[hutch.MistralApiBinding(api_key="k")])
    with pytest.raises(hutch.ConfigError, match="given twice"):
        hutch.LocalSandbox(network=allow, header_bindings=[b, hutch.GitHubBinding(token="u")])
    assert hutch.LocalSandbox(network=allow, header_bindings=b).header_bindings == [b]


def test_network_all_intercepts_only_bound_hosts(nh, fakenet):
    """Mode all: TCP 443 goes to the proxy (nftables in the sandbox's
    netns); a bound name is intercepted, any other destination spliced
    where the client dialled, under the same blocks as NAT; port 80 and
    other ports are not touched."""
    secret = secrets.token_hex(16)
    sb = make(nh, fakenet, secret, network="all")
    sb.put_file("/workspace/ca.pem", fakenet.ca_pem(), "644")
    sb.put_file("/workspace/issuer.py", CERT_ISSUER.encode(), "644")
    mark = fakenet.mark()
    sb.sh(f"curl -sS --fail https://{BOUND_HOST}/a https://{BOUND_HOST}/b -o /dev/null "
          "-o /dev/null")
    reqs = bound_requests(fakenet, mark)
    assert [header(r, "Authorization") for r in reqs] == [[f"Bearer {secret}"]] * 2
    assert [r["n_on_conn"] for r in reqs] == [1, 2]
    # Unbound: its own certificate (spliced to the address dialled).
    assert sb.sh("python3 /workspace/issuer.py api.test.example /workspace/ca.pem") == \
        "hutch nettests CA\n"
    # Plain HTTP on 80: not redirected, through NAT as before.
    assert "fake-http" in sb.sh(f"curl -sS --fail http://api.test.example/")
    # A private address on 443: refused, as NAT's forward chain refuses it.
    res = sb.run("curl -sS --max-time 5 https://10.99.0.10/ -k")
    assert res["exit_code"] != 0
    time.sleep(0.3)
    assert fakenet.since(mark, "lan10_443") == []
    # QUIC (UDP 443) is refused, so clients fall back to TCP through the proxy.
    res = sb.run("python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                 "s.connect(('198.51.100.12', 443)); s.send(b'x'); s.settimeout(2); s.recv(1)\"")
    assert res["exit_code"] != 0 and ("PermissionError" in res["stderr"]
                                      or "ConnectionRefused" in res["stderr"]), res
    assert not sandbox_sees(sb, secret)
    sb.rm()


def test_pool_refuses_bindings(nh):
    r = nh("pool", "start", "--size", "1", "--network", ALLOW, "--header-binding",
           f"{BOUND_HOST}:X-Key=@env:HB", env={"HB": "pool-secret"})
    assert r.returncode != 0 and b"header bindings" in r.stderr, r.stderr
    assert b"pool-secret" not in r.stderr + r.stdout


def test_more_binding_errors(nh, tmp_path):
    env = {"HB": "v", "HB_LONG": "x" * 4097}
    opts = []
    for i in range(17):
        opts += ["--header-binding", f"{BOUND_HOST}:X-K{i}=@env:HB"]
    cases = [
        (opts, "too many header bindings: at most 16"),
        (["--header-binding", f"{BOUND_HOST}:X-K=@env:HB",
          "--header-binding", f"{BOUND_HOST}:x-k=@env:HB"], "given twice"),
        (["--header-binding", f"{BOUND_HOST}:X-K=@env:HB_LONG"], "longer than 4096"),
        (["--header-binding", f"{BOUND_HOST}:X-K=@fd:2"], "3 or more"),
        (["--header-binding", f"{BOUND_HOST}:X-K=a {{secret}} {{secret}}@env:HB"], "once"),
    ]
    for args, says in cases:
        r = nh("create", "--network", ALLOW, *args, env=env)
        assert r.returncode == USAGE and says.encode() in r.stderr, (args[:2], r.stderr)
    # An upstream CA file that cannot be loaded fails the creation, saying which.
    r = nh("create", "--network", ALLOW, "--header-binding", f"{BOUND_HOST}:X-K=@env:HB",
           env=dict(env, HUTCH_UPSTREAM_CA=str(tmp_path / "missing.pem")))
    assert r.returncode != 0 and b"HUTCH_UPSTREAM_CA" in r.stderr, r.stderr
    assert nh.ids() == []


def test_upstream_name_mismatch_is_refused(nh, fakenet):
    # nosan.test.example resolves to the fake server whose certificate
    # (from the trusted fake CA) does not name it.
    host = "nosan.test.example"
    r = nh("create", "--json", "--network", f"allow:{host}", "--header-binding",
           f"{host}:X-Key=@env:HB", env={"HB": "k", "HUTCH_UPSTREAM_CA": fakenet.ca})
    assert r.returncode == 0, r.stderr
    from conftest import Sandbox
    sb = Sandbox(nh, json.loads(r.stdout))
    mark = fakenet.mark()
    res = sb.run(f"curl -sS https://{host}/")
    assert res["exit_code"] != 0
    assert [e for e in fakenet.since(mark, "https443") if e.get("event") == "request"] == []
    ref = [x for x in sb.status()["network"]["refused"] if x["host"] == host]
    assert ref and "does not verify: hostname mismatch" in ref[-1]["reason"], ref
    sb.rm()


BAD_REQUEST = r'''
import socket, ssl, sys
ctx = ssl.create_default_context()
with ctx.wrap_socket(socket.create_connection((sys.argv[1], 443)), server_hostname=sys.argv[1]) as s:
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n")
    print(s.recv(4096).decode().split("\r\n")[0])
'''


def test_malformed_request_gets_400_and_is_recorded(nh, fakenet):
    sb = make(nh, fakenet, secrets.token_hex(8))
    sb.put_file("/workspace/bad.py", BAD_REQUEST.encode(), "644")
    mark = fakenet.mark()
    assert sb.sh(f"python3 /workspace/bad.py {BOUND_HOST}") == "HTTP/1.1 400 Bad Request\n"
    assert bound_requests(fakenet, mark) == []
    ref = sb.status()["network"]["refused"][-1]
    assert ref["what"] == "http" and "obsolete line folding" in ref["reason"], ref
    sb.rm()


def test_secrets_that_cannot_be_locked_in_memory_are_said(nh, fakenet):
    """A supervisor whose mlock of the bindings' secrets is refused (no
    CAP_IPC_LOCK, an RLIMIT_MEMLOCK of 0: an ordinary user's limits): the
    sandbox is made and binds all the same, its pages may be swapped out,
    and its events log says so and the fix (the supervisor's own log goes
    nowhere: it said nothing before); where mlock works, no such line."""
    secret = "s3cr3t-" + secrets.token_hex(16)
    env = dict(nh.env, HB_SECRET=secret, HUTCH_UPSTREAM_CA=fakenet.ca)
    r = subprocess.run(["prlimit", "--memlock=0:0", "setpriv", "--bounding-set", "-ipc_lock",
                        HUTCH, "create", "--json", "--network", ALLOW, "--header-binding",
                        f"{BOUND_HOST}:Authorization=Bearer {{secret}}@env:HB_SECRET"],
                       env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr.decode()
    from conftest import Sandbox
    sb = Sandbox(nh, json.loads(r.stdout))
    warn = [ln for ln in nh("events", sb.id).stdout.decode().splitlines() if "warning:" in ln]
    assert len(warn) == 1 and "warning: header bindings: mlock refused, their secrets may be " \
        "swapped out (raise hutch's RLIMIT_MEMLOCK: ulimit -l, LimitMEMLOCK=)" in warn[0], warn
    mark = fakenet.mark()
    sb.sh(f"curl -sS --fail https://{BOUND_HOST}/x -o /dev/null")
    got = bound_requests(fakenet, mark)
    assert got and header(got[-1], "Authorization") == [f"Bearer {secret}"], got
    sb.rm()
    sb = make(nh, fakenet, secret)
    assert "warning:" not in nh("events", sb.id).stdout.decode()
    sb.rm()
