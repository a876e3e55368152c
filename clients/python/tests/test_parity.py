# SPDX-License-Identifier: Apache-2.0
"""What E2B's and docker-py's users expect of a client (issue 17):
connect to a live sandbox, list, set_timeout, wait for a background
process, whole directories in and out, timeout validation, the cloud
SDK's hook context name, shared pytest fixtures."""
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import hutch
from hutch import ConfigError, LocalSandbox

from test_client import HUTCH, PKG_ROOT, pytestmark, runtime_dir  # noqa: F401,E402


def test_connect_and_list(runtime_dir):
    r = subprocess.run([HUTCH, "create", "--instance-type", "small"], capture_output=True,
                       text=True, check=True)
    sid = r.stdout.strip()
    assert [s["id"] for s in LocalSandbox.list()] == [sid]
    assert LocalSandbox.list()[0]["status"] == "running"
    with LocalSandbox.connect(sid[:6]) as sb:          # a unique prefix is enough
        assert sb.id == sid
        assert sb.execute("echo hi").stdout == "hi\n"
        assert sb.status()["config"]["instance_type"] == "small"
    # Closing the connected session deleted it.
    assert LocalSandbox.list() == []
    with pytest.raises(hutch.SandboxGoneError, match="deleted"):
        LocalSandbox.connect(sid)
    with pytest.raises(hutch.SandboxError, match="no sandbox"):
        LocalSandbox.connect("0123456789ab")
    with pytest.raises(ConfigError):
        LocalSandbox.connect("not-an-id!")


def test_connect_async():
    async def main():
        sb = await LocalSandbox().open_async()
        other = await LocalSandbox.connect_async(sb.id)
        assert (await other.execute("echo x")).stdout == "x\n"
        await other.close()
        assert sb.id not in [s["id"] for s in LocalSandbox.list()]
    asyncio.run(main())


def test_set_timeout_moves_the_end():
    with LocalSandbox(ttl_seconds=3600).open() as sb:
        t0 = time.time()
        when = sb.set_timeout(2)
        assert when == sb.expires_at and sb.status()["expires_at"] == when
        assert abs(sb.status()["expires_in_seconds"] - 2) <= 1
        deadline = t0 + 15
        while time.time() < deadline and not sb._gone():
            time.sleep(0.05)
        with pytest.raises(hutch.SandboxExpiredError):
            sb.execute("true")
    for bad in (0, -1, 1.5, "60", True, 367 * 86400):
        with LocalSandbox().open() as sb:
            before = sb.status()["expires_at"]
            with pytest.raises(ConfigError, match="invalid timeout"):
                sb.set_timeout(bad)
            assert sb.status()["expires_at"] == before


def test_wait_process():
    with LocalSandbox().open() as sb:
        p = sb.start_process("head -c 3000000 /dev/zero; sleep 0.5; exit 3")
        done = sb.wait_process(p, timeout=30)
        assert done.id == p.id and done.exit_code == 3 and done.status != "running", done
        p = sb.start_process("sleep 60")
        t0 = time.monotonic()
        with pytest.raises(hutch.CommandTimeoutError, match="still runs after 1 s"):
            sb.wait_process(p.id, timeout=1)
        assert 1 <= time.monotonic() - t0 < 10
        assert [q.status for q in sb.list_processes() if q.id == p.id] == ["running"]
        sb.kill_process(p)
        assert sb.wait_process(p).status == "killed"
        with pytest.raises(hutch.ProcessNotFoundError):
            sb.wait_process("p999")


def tree(root):
    """{relative path: (kind, mode, sha256)} of a local tree, links unfollowed."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if os.path.islink(p):
                out[rel] = ("link", None, None)
            elif os.path.isdir(p):
                out[rel] = ("dir", st.st_mode & 0o777, None)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", st.st_mode & 0o777, hashlib.sha256(f.read()).hexdigest())
    return out


def test_upload_and_download_dir(tmp_path):
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "top.bin").write_bytes(bytes(range(256)) * 4000)
    (src / "a" / "run.sh").write_bytes(b"#!/bin/sh\necho ok\n")
    os.chmod(src / "a" / "run.sh", 0o755)
    (src / "a" / "b" / "deep.txt").write_bytes(os.urandom(3 << 20))
    os.symlink("/etc/shadow", src / "a" / "escape")        # never followed
    with LocalSandbox().open() as sb:
        up = sb.upload_dir(src, "/workspace/proj")
        assert (up.files, up.bytes) == (3, 256 * 4000 + 18 + (3 << 20)), up
        assert up.skipped == [os.path.join("a", "escape")]
        assert sb.execute("/workspace/proj/a/run.sh").stdout == "ok\n"
        assert sb.execute("test -e /workspace/proj/a/escape").exit_code == 1
        sb.execute("ln -s /etc/passwd /workspace/proj/link")
        back = tmp_path / "back"
        down = sb.download_dir("/workspace/proj", back)
        assert down.files == 3 and down.skipped == ["link"], down
    want = {k: v for k, v in tree(src).items() if v[0] != "link"}
    assert tree(back) == want
    with LocalSandbox().open() as sb:
        with pytest.raises(NotADirectoryError):
            sb.upload_dir(src / "top.bin", "/workspace/x")
        with pytest.raises(hutch.SandboxFileNotFoundError):
            sb.download_dir("/workspace/none", tmp_path / "none")


@pytest.mark.parametrize("bad, exc, match", [
    (-1, ConfigError, "invalid timeout -1: give seconds from 0"),
    (float("nan"), ConfigError, "invalid timeout nan"),
    (float("inf"), ConfigError, "invalid timeout inf"),
    ("10", TypeError, "timeout must be a number of seconds, not str"),
    (True, TypeError, "timeout must be a number of seconds"),
])
def test_command_timeout_validated(bad, exc, match):
    with LocalSandbox().open() as sb:
        with pytest.raises(exc, match=match):
            sb.execute("true", timeout=bad)
        with pytest.raises(exc, match=match):
            sb.execute_stream("true", timeout=bad, on_stdout=print)
        assert sb.execute("echo fine", timeout=0).stdout == "fine\n"   # 0: no limit


def test_cloud_names():
    assert hutch.SandboxCallbackContext is hutch.HookContext
    seen = []

    class Hook(hutch.SandboxHook):
        async def on_create(self, ctx: hutch.SandboxCallbackContext):
            seen.append(ctx.sandbox_id)
    with LocalSandbox(hooks=[Hook()]).open() as sb:
        assert seen == [sb.id]


def test_module_and_session_fixtures(tmp_path, runtime_dir):
    (tmp_path / "conftest.py").write_text(textwrap.dedent('''
        import pytest

        @pytest.fixture(scope="session")
        def hutch_session_options():
            return {"instance_type": "small"}
    '''))
    (tmp_path / "test_a.py").write_text(textwrap.dedent('''
        import pytest
        pytestmark = pytest.mark.hutch(instance_type="nano")
        IDS = set()

        def test_one(sandbox_module, sandbox_session):
            IDS.add(("m", sandbox_module.id)); IDS.add(("s", sandbox_session.id))
            assert sandbox_module.status()["config"]["instance_type"] == "nano"
            assert sandbox_session.status()["config"]["instance_type"] == "small"
            sandbox_module.write_file("/workspace/shared", "1")

        def test_two(sandbox_module, sandbox_session):
            IDS.add(("m", sandbox_module.id)); IDS.add(("s", sandbox_session.id))
            assert sandbox_module.read_file("/workspace/shared") == b"1"
            assert len(IDS) == 2
            open("ids_a", "w").write(" ".join(sorted(i for _, i in IDS)))
    '''))
    (tmp_path / "test_b.py").write_text(textwrap.dedent('''
        def test_three(sandbox_module, sandbox_session):
            assert sandbox_module.status()["config"]["instance_type"] == "medium"
            open("ids_b", "w").write(sandbox_module.id + " " + sandbox_session.id)
    '''))
    env = {**os.environ, "PYTHONPATH": PKG_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "hutch.pytest_plugin", "test_a.py", "test_b.py"],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    a = set((tmp_path / "ids_a").read_text().split())
    mod_b, sess_b = (tmp_path / "ids_b").read_text().split()
    assert sess_b in a and mod_b not in a            # one session sandbox, one per module
    left = sorted(n for n in os.listdir(runtime_dir) if not n.startswith("."))
    assert left == [], left


# Every option of `hutch create --help`: its name in the API (the config of
# create --json, inspect and GET /status) and LocalSandbox's parameter.
# None: the CLI's output form only (the client always reads JSON).
CREATE_OPTIONS = {
    "--json": None, "--progress": None,
    "--no-limits": ("no_limits", "no_limits"),
    "--instance-type": ("instance_type", "instance_type"),
    "--workspace": ("workspace", "workspace"),
    "--ttl": ("ttl_seconds", "ttl_seconds"),
    "--idle-timeout": ("idle_timeout_seconds", "idle_timeout_seconds"),
    "--region": ("region", "region"),
    "--network": ("network", "network"),
    "--host-port": ("host_ports", "host_ports"),
    "--publish": ("publish", "ports"),
    "--volume": ("volumes", "volumes"), "--mount": ("volumes", "volumes"),
    "--header-binding": ("header_bindings", "header_bindings"),
    "--image": ("image", "image"),
    "--snapshot": ("image", "snapshot"),  # a snapshot is the image it names
    "--max-output": ("max_output_bytes", "max_output_bytes"),
    "--journal-max": ("journal_max_bytes", "journal_max_bytes"),
    "--change-lists": ("change_lists", "change_lists"),
    "--net-log": ("net_log", "net_log"),
    "--nat-log": ("nat_log", "nat_log"),
    "--executor-port": ("executor_port", "executor_port"),
    "--executor-max-output": ("executor_max_output_bytes", "executor_max_output_bytes"),
    "--access": ("access", "access"),
    "--secret": ("secrets", "secrets"),
    "--egress": ("egress", "egress"),
    "--setup-script": ("setup_script_bytes", "setup_script"),
    "--setup-timeout": ("setup_script_timeout_seconds", "setup_script_timeout_seconds"),
    "--on-create": ("on_create", "on_create"),
    "--on-destroy": ("on_destroy", "on_destroy"),
    "--description": ("description", "description"),
}


def test_every_create_option_has_its_api_and_python_counterpart():
    import inspect as pyinspect
    import re
    help_text = subprocess.run([HUTCH, "create", "--help"], capture_output=True, text=True,
                               check=True).stdout
    cli = set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]*)", help_text.split("environment:")[0],
                         re.M))
    assert cli == set(CREATE_OPTIONS), "hutch create --help and this table differ"
    info = json.loads(subprocess.run([HUTCH, "create", "--json", "--no-limits"],
                                     capture_output=True, text=True, check=True).stdout)
    subprocess.run([HUTCH, "rm", info["id"]], capture_output=True, check=True)
    assert info["config"]["no_limits"] is True
    params = set(pyinspect.signature(LocalSandbox.__init__).parameters)
    doc = open(os.path.join(PKG_ROOT, "..", "..", "docs", "python.md")).read()
    for flag, names in CREATE_OPTIONS.items():
        if names is None:
            continue
        api, py = names
        assert api in info["config"], f"{flag}: no '{api}' in the API's config"
        assert py in params, f"{flag}: LocalSandbox has no parameter {py}"
        assert f"| `{py}` |" in doc, f"{flag}: docs/python.md's options table lacks {py}"


def test_no_limits_and_hutch_options_reach_the_sandbox():
    sb = LocalSandbox(no_limits=True, max_output_bytes=5, description="parity",
                      on_create="echo made > /tmp/made", on_destroy="true")
    assert "--no-limits" in sb._cli_options()
    with sb as s:
        cfg = s.status()["config"]
        assert (cfg["no_limits"], cfg["max_output_bytes"], cfg["description"]) == (True, 5, "parity")
        assert s.execute("cat /tmp/made; echo 0123456789").stdout == "made\n"   # 5 bytes kept
    # The error paths: refused at construction, naming the parameter.
    for kw, word in (({"no_limits": 1}, "no_limits"), ({"max_output_bytes": 0}, "max_output_bytes"),
                     ({"on_create": ""}, "on_create"), ({"description": 5}, "description"),
                     ({"workspace": "ram"}, "workspace"),
                     ({"no_limits": True, "idle_timeout_seconds": 60}, "idle_timeout_seconds")):
        with pytest.raises(ConfigError, match=word):
            LocalSandbox(**kw)


def test_not_capable_error_names_the_clients_parameter(tmp_path, monkeypatch):
    # A hutch that fails as an ordinary user's without a delegated cgroup
    # does: the message names no_limits=True, not a flag the client cannot pass.
    fake = tmp_path / "hutch"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = version ]; then exec %s \"$@\"; fi\n"
                    "echo 'hutch: cannot create sandbox: no delegated cgroup v2 subtree; or pass "
                    "--no-limits (no CPU, memory, pids limits)' >&2\nexit 69\n" % HUTCH)
    fake.chmod(0o755)
    monkeypatch.setenv("HUTCH_BIN", str(fake))
    with pytest.raises(hutch.NotCapableHostError) as e:
        LocalSandbox().open()
    assert "pass no_limits=True to LocalSandbox" in str(e.value)
    assert "--no-limits" not in str(e.value) and "run as root" not in str(e.value)


def test_network_as_the_clis_string():
    from hutch import Network
    assert LocalSandbox(network="none").network == Network.none()
    assert LocalSandbox(network="all").network == Network.all()
    assert LocalSandbox(network="allow:example.com,pypi.org").network == \
        Network.allow(hosts=("example.com", "pypi.org"))
    for bad in ("some", "none:x", "allow:https://x", 5):
        with pytest.raises(ConfigError):
            LocalSandbox(network=bad)


# egress= (issue 27): the client normalizes and refuses entries as the
# cloud's client does (koyeb's _normalize_destination), and as the CLI and
# API do: the pool key hashes the CLI's normalized list, so an entry and the
# client's normal form of it give one key; a refused entry has one message.
EGRESS_OK = [" 10.0.0.1/8 ", "1.2.3.4", "2001:DB8:0:0:0:0:0:1/64", "10.0.0.1/255.0.0.0",
             "1.2.3.4/0.0.0.255", "0.0.0.0/0", "198.51.100.11/31"]
EGRESS_BAD = ["10.0.0.1%eth0", "fe80::1%lo", "api.example.com", "10.0.0.1/33", "010.0.0.1",
              "1.2.3", "", "1.2.3.4/"]


def _pool_key(*opts):
    r = subprocess.run([HUTCH, "pool", "key", "--json", *opts], capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout)["key"] if r.returncode == 0 else r.stderr)


def test_egress_is_normalized_and_refused_as_the_cli_does():
    from hutch import EgressPolicyError
    none = _pool_key()[1]
    for e in EGRESS_OK:
        norm = LocalSandbox(egress=[e]).egress
        rc, key = _pool_key("--egress", e)
        assert rc == 0 and key != none, key
        assert _pool_key("--egress", norm[0]) == (0, key), (e, norm)
        assert LocalSandbox(egress=[e])._cli_options()[-2:] == ["--egress", norm[0]]
    assert LocalSandbox(egress=["1.2.3.4"]).egress == ["1.2.3.4/32"]
    assert LocalSandbox(egress=[" 10.0.0.1/8 "]).egress == ["10.0.0.0/8"]
    for e in EGRESS_BAD:
        with pytest.raises(EgressPolicyError) as err:
            LocalSandbox(egress=[e])
        assert isinstance(err.value, ConfigError)
        if e:  # the CLI's '' is the empty list
            rc, msg = _pool_key("--egress", e)
            assert rc == 64 and f"hutch: {err.value}\n" == msg, (e, msg, str(err.value))
    for kw in ({"egress": "1.2.3.4"}, {"egress": [1]},
               {"egress": ["1.2.3.4"], "network": "allow:example.com"},
               {"egress": ["1.2.3.4"], "network": "all", "region": "fr-par"},
               {"egress": [], "host_ports": [8080]},
               {"egress": ["1.2.3.4"] * 65}):
        with pytest.raises(EgressPolicyError if "host_ports" not in kw else ConfigError):
            LocalSandbox(**kw)
    assert "--egress" not in LocalSandbox()._cli_options()
    assert LocalSandbox(egress=[])._cli_options()[-2:] == ["--egress", ""]


def test_empty_egress_blocks_everything():
    with LocalSandbox(network="all", egress=[]) as s:
        assert s.config["egress"] == [] and s.config["network"] == "all"
        net = s.status()["network"]
        assert net["egress"] == [] and "address" not in net   # wired as none
        r = s.execute("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 5)\"")
        assert r.exit_code != 0 and "Network is unreachable" in r.stderr, r
    with LocalSandbox() as s:
        assert s.config["egress"] is None
