# SPDX-License-Identifier: Apache-2.0
"""The matrix of roots (roots.py) for what needs a network: modes all and
allow, ports, and header bindings' CA material, on the host-derived root,
the tests' small OCI image and hutch-default, inside the fake internet's
host netns (netfake.py). In depth: test_network.py, test_ports.py,
test_bindings.py."""
import json
import socket

import pytest

from conftest import wait_until
from netfake import RESOLVER, WEB

pytestmark = pytest.mark.usefixtures("fakenet", "root")

ECHO = ("import socket\n"
        "s = socket.create_server(('127.0.0.1', 7000))\n"
        "while True:\n"
        "    c, _ = s.accept(); c.sendall(c.recv(100).upper()); c.close()\n")


@pytest.fixture
def nh(hutch):
    hutch.env["HUTCH_RESOLVER"] = RESOLVER
    return hutch


def test_network_all(nh, root):
    sb = root.create(nh, "--network", "all")
    code = ("import socket; s = socket.create_connection(('api.test.example', 80), 5); "
            "s.sendall(b'GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n'); print(s.recv(100).decode())")
    out = sb.sh(f'python3 -c "{code}"')
    assert out.startswith("HTTP/1.") and f"fake-http {WEB}:80" in out, out
    assert sb.rm().returncode == 0


def test_network_allow(nh, root):
    sb = root.create(nh, "--network", "allow:api.test.example")
    code = ("import socket\n"
            "print(socket.gethostbyname('api.test.example'))\n"
            "try:\n    socket.gethostbyname('unlisted.test.example'); print('leak')\n"
            "except OSError: print('nxdomain')\n")
    assert sb.sh(f"python3 -c \"{code}\"").split() == [WEB, "nxdomain"]
    assert sb.rm().returncode == 0


def test_port(nh, root):
    sb = root.create(nh, "--network", "none", "-p", "0:7000")
    (fwd,) = sb.status()["ports"]
    sb.put_file("/workspace/echo.py", ECHO.encode(), "644")
    st, res = sb.api("POST", "/v1/start_process", {"argv": ["python3", "/workspace/echo.py"]})
    assert st in (200, 201), res

    def echo():
        try:
            with socket.create_connection(("127.0.0.1", fwd["host_port"]), 5) as c:
                c.sendall(b"ping")
                return c.recv(100)
        except OSError:
            return None
    assert wait_until(lambda: echo() == b"PING", 20), echo()
    assert sb.rm().returncode == 0


def test_header_binding_ca_material(nh, root, fakenet):
    """SSL_CERT_FILE & co. name files that exist, on every root: the
    root's own bundle then the sandbox's CA (on an image they named
    /etc/hutch files only the host-derived root had: curl exited 77); curl
    through the binding sets the header (the default image has curl; so
    has the host's /usr)."""
    r = nh("create", "--json", *root.use(nh), "--network", "allow:bound.test.example",
           "--header-binding", "bound.test.example:Authorization=Bearer {secret}@env:HB",
           env={"HB": "matrix-secret", "HUTCH_UPSTREAM_CA": fakenet.ca})
    assert r.returncode == 0, r.stderr
    from conftest import Sandbox
    sb = Sandbox(nh, json.loads(r.stdout))
    env = dict(ln.split("=", 1) for ln in sb.sh("env").splitlines() if "=" in ln)
    names = ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
             "NODE_EXTRA_CA_CERTS"]
    ca = sb.sh(f"cat {env['NODE_EXTRA_CA_CERTS']}")
    assert ca.startswith("-----BEGIN CERTIFICATE-----"), ca
    for n in names:
        text = sb.sh(f"cat {env[n]}")  # exists, readable by appuser
        assert ca in text, (n, text[:200])
    default_bundle = sb.sh("cat /etc/ssl/certs/ca-certificates.crt")
    assert ca in default_bundle
    if root.name == "image":
        assert sb.sh(f"cat {env['SSL_CERT_FILE']}").startswith("# the image's own bundle\n")
    else:
        assert default_bundle.count("BEGIN CERTIFICATE") > 10  # the root's own CAs kept
    if root.name != "image":  # (no curl in the small image)
        mark = fakenet.mark()
        res = sb.run("curl -sS --max-time 20 https://bound.test.example/hello")
        assert res["exit_code"] == 0, res
        reqs = [e for e in fakenet.since(mark, "bound443") if e.get("event") == "request"]
        assert reqs and [v for k, v in reqs[-1]["headers"] if k.lower() == "authorization"] == \
            ["Bearer matrix-secret"], reqs
    assert sb.rm().returncode == 0


def test_run_header_binding_api_github_com(nh, root, fakenet):
    """Issue 26's own line, on each root: `hutch run --network
    allow:api.github.com --header-binding api.github.com:...` and a client
    in the sandbox reaches https://api.github.com (the fake internet's bound
    server under that name, its certificate from the test CA) through the
    binding: the header set on the way, the secret never inside, every CA
    file the environment names readable by appuser (curl; the small image
    has no TLS client at all, no curl and its python3 without ssl: there,
    the CA files only)."""
    root.skip_unless(root.name != "image", "no TLS client in the small image (no curl, "
                     "python3 without ssl); its CA files: test_header_binding_ca_material")
    get = "curl -sS --max-time 20 https://api.github.com/hello"
    cmd = ('for v in SSL_CERT_FILE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE GIT_SSL_CAINFO '
           'NODE_EXTRA_CA_CERTS; do f=$(printenv $v) && test -r "$f" && grep -q "BEGIN CERT" "$f" '
           '|| echo "unreadable $v=$f"; done; env | grep -q gh-run-secret && echo leaked; ' + get)
    mark = fakenet.mark()
    r = nh("run", *root.use(nh), "--network", "allow:api.github.com",
           "--header-binding", "api.github.com:Authorization=Bearer {secret}@env:HB",
           "--", "sh", "-c", cmd, env={"HB": "gh-run-secret", "HUTCH_UPSTREAM_CA": fakenet.ca})
    assert (r.returncode, r.stdout.decode()) == (0, "fake-https-ka 198.51.100.12:443 /hello\n"), r
    reqs = [e for e in fakenet.since(mark, "bound443") if e.get("event") == "request"]
    assert len(reqs) == 1, reqs
    hdrs = {k.lower(): v for k, v in reqs[0]["headers"]}
    assert hdrs["authorization"] == "Bearer gh-run-secret" and hdrs["host"] == "api.github.com", hdrs
    assert nh.ids() == []  # run removed it
