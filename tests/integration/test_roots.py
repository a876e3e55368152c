# SPDX-License-Identifier: Apache-2.0
"""The feature tests of the matrix of roots (roots.py), as root: each runs
on the host-derived root, the tests' small OCI image and hutch-default
(its id names the root). Files, setup script and hooks, limits, network
none, pty, pools, the image's environment; the network modes, ports and
header bindings' CA are in test_roots_net.py (inside the fake internet).
What a feature does in depth is in its own file (test_files.py,
test_session.py, ...): here, that it works on the root users get."""
import json
import os

import pytest

from conftest import api, proc_comm, wait_until
from test_tty import Term

pytestmark = pytest.mark.usefixtures("root")


def test_files(hutch, root, tmp_path):
    sb = root.create(hutch)
    assert sb.sh("id -u; id -g").split() == ["1000", "1000"]
    st, res = sb.api("POST", "/v1/write_file", {"path": "/workspace/a.txt", "content": "hé\n"})
    assert st == 200, res
    st, res = sb.api("POST", "/v1/read_file", {"path": "/workspace/a.txt"})
    assert st == 200 and res["content"] == "hé\n", res
    data = os.urandom(100000)
    st, _ = sb.api("PUT", "/files?path=/workspace/bin", raw=data,
                   headers={"Content-Type": "application/octet-stream"})
    assert st in (200, 201, 204), st
    assert sb.sh("sha256sum /workspace/bin").split()[0] == __import__("hashlib").sha256(data).hexdigest()
    sb.sh("mkdir -p /workspace/d/e && echo deep > /workspace/d/e/f")
    r = hutch("cp", f"{sb.id}:/workspace/d", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "e" / "f").read_text() == "deep\n"
    (tmp_path / "in.txt").write_text("from the host\n")
    assert hutch("cp", str(tmp_path / "in.txt"), f"{sb.id}:/workspace/in.txt").returncode == 0
    assert sb.sh("cat /workspace/in.txt") == "from the host\n"
    assert sb.rm().returncode == 0


def test_setup_script_and_hooks(hutch, root, tmp_path):
    script = tmp_path / "setup.sh"
    script.write_text("echo setup >> /workspace/order\n")
    sb = root.create(hutch, "--setup-script", str(script),
                     "--on-create", "echo on_create >> /workspace/order; echo hi-on-create",
                     "--on-destroy", "echo bye; exit 3")
    assert sb.sh("cat /workspace/order") == "setup\non_create\n"
    assert "hi-on-create" in sb.status()["hooks"]["on_create"]["output"]
    assert sb.rm().returncode == 0
    from test_session import on_destroy_result
    assert wait_until(lambda: os.path.isdir(os.path.join(hutch.rtdir, ".gone")), 10)
    reason, res = on_destroy_result(hutch, sb.id)
    assert reason == "deleted" and res["exit_code"] == 3 and "bye" in res["output"], res


def test_limits(hutch, root):
    sb = root.create(hutch, "--instance-type", "nano")
    res = sb.run("python3 -c 'b = bytearray(400 << 20); b[::4096] = b\"x\" * len(b[::4096])'")
    assert res["exit_code"] != 0 and res.get("oom_killed") is True, res
    assert sb.status()["config"]["limits"]["pids"] == 256
    assert sb.rm().returncode == 0


def test_network_none(hutch, root):
    sb = root.create(hutch, "--network", "none")
    res = sb.run("python3 -c 'import socket; socket.create_connection((\"198.51.100.10\", 80), 3)'")
    assert res["exit_code"] != 0 and "Network is unreachable" in res["stderr"], res
    assert sb.sh("python3 -c 'import socket; print(socket.gethostname())'").strip()
    assert sb.rm().returncode == 0


def test_pty(hutch, root):
    sb = root.create(hutch)
    code = "import os; print(os.ttyname(0)); print(*os.get_terminal_size()); print(os.getuid())"
    t = Term(hutch, "exec", "-t", sb.id, "--", "python3", "-c", code, rows=33, cols=101)
    try:
        t.expect(rb"/dev/pts/\d+")
        t.expect(rb"101 33")
        t.expect(rb"1000")
        assert t.wait() == 0
    finally:
        t.close()
    assert sb.rm().returncode == 0


def test_pool(hutch, root):
    opts = root.use(hutch)
    r = hutch("pool", "start", "--size", "1", *opts)
    assert r.returncode == 0, r.stderr
    try:
        ls = lambda: json.loads(hutch("pool", "ls", "--json").stdout)
        assert wait_until(lambda: [p["ready"] for p in ls()] == [1], 60), ls()
        keeper = ls()[0]["keeper_pid"]
        ready = [d for d in hutch.ids()]
        r = hutch("create", "--json", *opts)
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert info["id"] in ready, (info["id"], ready)  # handed over, not made
        assert info["config"]["image"] == (root.image or "host")
        s, res = api(info["socket"], "POST", "/v1/run", {"cmd": "id -u"})
        assert s == 200 and res["stdout"] == "1000\n", res
        assert hutch("rm", info["id"]).returncode == 0
    finally:
        hutch("pool", "stop", "--all")
    assert wait_until(lambda: proc_comm(keeper) is None, 30)


def test_environment(hutch, root):
    """The image's own environment (Env) under ours: HOME and USER are
    appuser's, PATH is the image's."""
    sb = root.create(hutch)
    env = dict(ln.split("=", 1) for ln in sb.sh("env").splitlines() if "=" in ln)
    assert env["HOME"] == "/home/appuser" and env["USER"] == "appuser", env
    if root.name == "image":
        assert env["PATH"].startswith("/opt/bin:") and sb.sh("imgtool") == "imgtool\n"
    if root.name == "default":
        tools = sb.sh("for t in git curl gh jq rg node; do command -v $t; done")
        assert tools.count("\n") == 6, tools
    assert sb.rm().returncode == 0
