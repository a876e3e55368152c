# SPDX-License-Identifier: Apache-2.0
"""Tests of the Python client against real sandboxes (root, the real binary:
HUTCH_BIN, else build/hutch). Each test gets its own HUTCH_RUNTIME_DIR and
HUTCH_IMAGE_STORE and leaves no sandbox behind."""
import asyncio
import json
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import hutch
from hutch import (ConfigError, GitHubBinding, HeaderBinding, LocalSandbox, MistralApiBinding, Network,
                   SandboxHook)

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PKG_ROOT))
HUTCH = os.environ.get("HUTCH_BIN") or os.path.join(REPO, "build", "hutch")

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes need root"),
    pytest.mark.skipif(not os.access(HUTCH, os.X_OK), reason=f"no hutch binary at {HUTCH}"),
]


@pytest.fixture(autouse=True)
def runtime_dir(monkeypatch):
    d = tempfile.mkdtemp(prefix="hpy-", dir="/tmp")
    monkeypatch.setenv("HUTCH_RUNTIME_DIR", d)
    monkeypatch.setenv("HUTCH_IMAGE_STORE", d + "-store")  # empty: the host-derived root
    monkeypatch.setenv("HUTCH_BIN", HUTCH)
    yield d
    subprocess.run([HUTCH, "rm", "--all"], capture_output=True, env={**os.environ, "HUTCH_RUNTIME_DIR": d})
    stop_views(d)
    left = live_sandboxes(d)
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(d + "-store", ignore_errors=True)
    assert not left, f"sandboxes left behind: {left}"


def stop_views(d):
    """hutch gc stops the dir's lxcfs (the /proc views) once the last
    supervisor has exited (they finish after rm answers)."""
    end = time.monotonic() + 10
    while os.path.exists(os.path.join(d, ".lxcfs")) and time.monotonic() < end:
        subprocess.run([HUTCH, "gc"], capture_output=True, env={**os.environ, "HUTCH_RUNTIME_DIR": d})
        time.sleep(0.05)


def live_sandboxes(d):
    return sorted(n for n in os.listdir(d) if not n.startswith("."))


# ---------------------------------------------------------------------------
# options: defaults and validation (no sandbox started)
# ---------------------------------------------------------------------------
def test_defaults_readable_as_attributes():
    sb = LocalSandbox()
    assert sb.instance_type == "medium"
    assert sb.idle_timeout_seconds == 0
    assert sb.ttl_seconds == 86400
    assert sb.region == "nl-north-1"
    assert sb.network == Network.none()
    assert sb.image is None and sb.setup_script is None
    assert sb.setup_script_timeout_seconds == 600
    assert sb.hooks == [] and sb.supports_background_processes is True


def test_options_readable_back():
    h = SandboxHook()
    sb = LocalSandbox(instance_type="large", idle_timeout_seconds=300, ttl_seconds=7200,
                      region="us-east-1", network=Network.all(), setup_script="true",
                      setup_script_timeout_seconds=30, hooks=[h], supports_background_processes=False)
    assert (sb.instance_type, sb.idle_timeout_seconds, sb.ttl_seconds, sb.region) == \
        ("large", 300, 7200, "us-east-1")
    assert sb.network.mode == "all" and sb.setup_script == "true"
    assert sb.setup_script_timeout_seconds == 30 and sb.hooks == [h]
    assert sb.supports_background_processes is False


@pytest.mark.parametrize("kwargs, match", [
    ({"instance_type": "huge"}, "unknown instance_type 'huge': valid types are nano, micro"),
    ({"instance_type": 3}, "unknown instance_type"),
    ({"ttl_seconds": 0}, "invalid ttl_seconds 0"),
    ({"ttl_seconds": "60"}, "invalid ttl_seconds"),
    ({"ttl_seconds": True}, "invalid ttl_seconds"),
    ({"ttl_seconds": 1.5}, "invalid ttl_seconds"),
    ({"ttl_seconds": 367 * 86400}, "invalid ttl_seconds"),
    ({"idle_timeout_seconds": -1}, "invalid idle_timeout_seconds"),
    ({"setup_script_timeout_seconds": 0}, "invalid setup_script_timeout_seconds"),
    ({"region": "NL-North"}, "invalid region"),
    ({"region": "-x"}, "invalid region"),
    ({"region": 5}, "invalid region"),
    ({"region": "us-east-1"}, "only the default region, nl-north-1, can block traffic"),
    ({"region": "us-east-1", "network": Network.allow(hosts=("pypi.org",))}, "only the default region"),
    ({"network": "everything"}, "invalid network"),
    ({"image": 3}, "invalid image"),
    ({"setup_script": b"echo"}, "invalid setup_script"),
    ({"setup_script": ""}, "invalid setup_script: empty"),
    ({"hooks": [object()]}, "invalid hook"),
    ({"hooks": 5}, "invalid hooks"),
    ({"supports_background_processes": "yes"}, "invalid supports_background_processes"),
])
def test_validation_at_construction(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        LocalSandbox(**kwargs)


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError):
        LocalSandbox(instance_typ="small")


@pytest.mark.parametrize("entry", [
    "pypi.org", "PyPI.org", "api.github.com:8443", "10.0.0.1", "10.0.0.1:443", "::1",
    "2001:db8::1", "[2001:db8::1]:8443", "[::1]", "under_score.example", "example.com.", "a-b.c",
])
def test_network_allow_valid_hosts(entry):
    assert Network.allow(hosts=(entry,)).to_cli() == "allow:" + entry


@pytest.mark.parametrize("entry, match", [
    ("https://pypi.org", "invalid host 'https://pypi.org': give a host name, not a URL"),
    ("pypi.org/simple", "invalid host 'pypi.org/simple': a path is not allowed"),
    ("*.github.com", r"invalid host '\*.github.com': wildcards are not allowed"),
    ("", "invalid host '': an empty entry"),
    ("pypi.org:0", "port must be a number from 1 to 65535"),
    ("pypi.org:65536", "port must be a number"),
    ("pypi.org:", "port must be a number"),
    ("pypi.org:+1", "port must be a number"),
    ("[::1", "missing ']'"),
    ("[::1]x", "junk after ']'"),
    ("[pypi.org]:443", "not an IPv6 address"),
    ("1::2::3", r"not an IPv6 address \(write \[addr\]:port"),
    ("-bad.org", "not a host name or IP address"),
    ("bad-.org", "not a host name or IP address"),
    ("a..b", "not a host name or IP address"),
    ("1.2.3", "not a host name or IP address"),
    ("999.1.1.1", "not a host name or IP address"),
    ("exa mple.com", "not a host name or IP address"),
    ("x" * 64 + ".com", "not a host name or IP address"),
    ("a" * 300, "longer than 253 characters"),
])
def test_network_allow_invalid_hosts(entry, match):
    with pytest.raises(ConfigError, match=match):
        Network.allow(hosts=(entry,))
    with pytest.raises(ConfigError, match=match):
        LocalSandbox(network=Network.allow(hosts=("pypi.org", entry)))


def test_network_allow_needs_hosts():
    with pytest.raises(ConfigError, match="at least one host"):
        Network.allow(hosts=())
    with pytest.raises(ConfigError, match="list or tuple"):
        Network.allow(hosts="pypi.org")
    with pytest.raises(ConfigError, match="more than 256 hosts"):
        Network.allow(hosts=[f"h{i}.example" for i in range(257)])


def test_a_runtime_dir_longer_than_sun_path(monkeypatch):
    """A HUTCH_RUNTIME_DIR of ~200 bytes puts the sandbox's socket beyond
    sun_path's 108 bytes: the client reaches it through an O_PATH fd of its
    directory (before: OSError "AF_UNIX path too long"), for requests and
    for POST /exec's upgraded stream."""
    top = tempfile.mkdtemp(prefix="hpy-long-", dir="/tmp")
    d = top
    while len(d) < 196:
        d = os.path.join(d, "d" * min(60, 196 - len(d) - 1))
    rt = os.path.join(d, "rt")
    os.makedirs(d)
    monkeypatch.setenv("HUTCH_RUNTIME_DIR", rt)
    try:
        with LocalSandbox() as s:
            assert len(s.socket_path) > 108
            assert s.execute("echo hi").stdout == "hi\n"
            out = []
            st = s.execute_stream("echo streamed", on_stdout=out.append)
            assert st.exit_code == 0 and "".join(out) == "streamed\n"
            s.write_file("/workspace/f", b"long")
            with LocalSandbox.connect(s.id) as again:
                assert again.read_file("/workspace/f") == b"long"
    finally:
        subprocess.run([HUTCH, "rm", "--all"], capture_output=True, env={**os.environ, "HUTCH_RUNTIME_DIR": rt})
        stop_views(rt)
        left = live_sandboxes(rt) if os.path.isdir(rt) else []
        shutil.rmtree(top, ignore_errors=True)
    assert not left, f"sandboxes left behind: {left}"


# ---------------------------------------------------------------------------
# options at creation
# ---------------------------------------------------------------------------
def test_options_reach_the_sandbox():
    with LocalSandbox(instance_type="small", ttl_seconds=600, idle_timeout_seconds=30) as s:
        cfg = s.status()["config"]
        assert (cfg["instance_type"], cfg["ttl_seconds"], cfg["idle_timeout_seconds"]) == ("small", 600, 30)
        assert cfg["region"] == "nl-north-1" and cfg["network"] == "none"
        assert cfg["limits"]["memory_bytes"] == 1 << 30
        assert s.execute("cat /sys/fs/cgroup/memory.max 2>/dev/null || true").exit_code == 0


def test_default_options_reach_the_sandbox():
    with LocalSandbox() as s:
        cfg = s.status()["config"]
        assert (cfg["instance_type"], cfg["ttl_seconds"], cfg["idle_timeout_seconds"],
                cfg["setup_script_timeout_seconds"]) == ("medium", 86400, 0, 600)


def test_network_all_and_allow_reach_the_sandbox(own_net):
    with LocalSandbox(network=Network.all(), host_ports=[18080]) as s:
        net = s.status()["network"]
        assert (net["mode"], net["host_ports"]) == ("all", [18080])
        assert net["host_link"].startswith("hutch")
    with LocalSandbox(network=Network.allow(hosts=("pypi.org", "10.0.0.5:8443"))) as s:
        net = s.status()["network"]
        assert net["mode"] == "allow"
        assert net["hosts"] == ["pypi.org:443", "10.0.0.5:8443"]


@pytest.mark.parametrize("kwargs, what", [
    ({"host_ports": [8080]}, "host_ports needs a network"),
    ({"network": Network.all(), "host_ports": [0]}, "invalid host port 0"),
    ({"network": Network.all(), "host_ports": ["80"]}, "invalid host port '80'"),
    ({"network": Network.all(), "host_ports": 8080}, "invalid host_ports 8080"),
    ({"network": Network.all(), "host_ports": list(range(9000, 9017))}, "too many host ports"),
    ({"network": Network.allow(hosts=("pypi.org:8443",)), "host_ports": [8443]}, "8443 clashes"),
    ({"network": Network.allow(hosts=("pypi.org",)), "host_ports": [443]}, "443 clashes"),
])
def test_bad_host_ports_are_config_errors(kwargs, what):
    with pytest.raises(ConfigError, match=what):
        LocalSandbox(**kwargs)


@pytest.mark.parametrize("kwargs, what", [
    ({"host": "", "header": "Authorization", "value": "SeCrEt9"}, "no host"),
    ({"host": "*.github.com", "header": "Authorization", "value": "SeCrEt9"}, "wildcards"),
    ({"host": "https://api.github.com", "header": "Authorization", "value": "SeCrEt9"}, "not a URL"),
    ({"host": "api.github.com:443", "header": "Authorization", "value": "SeCrEt9"}, "DNS name"),
    ({"host": "api.github.com", "header": "Bad Header", "value": "SeCrEt9"}, "header name"),
    ({"host": "api.github.com", "header": "Host", "value": "SeCrEt9"}, "cannot be bound"),
    ({"host": "api.github.com", "header": "Authorization", "value": "SeCrEt9\nb"}, "control"),
    ({"host": "api.github.com", "header": "Authorization", "value": ""}, "non-empty"),
])
def test_bad_header_bindings_are_config_errors_naming_the_entry(kwargs, what):
    with pytest.raises(ConfigError, match=what) as e:
        HeaderBinding(**kwargs)
    if kwargs["host"] and kwargs["value"]:
        assert f"{kwargs['host']}:{kwargs['header']}" in str(e.value)
        assert kwargs["value"] not in str(e.value)


def test_header_binding_helpers_and_rules():
    gh = GitHubBinding(token="t0k")
    assert (gh.host, gh.header, gh.value) == ("api.github.com", "Authorization", "Bearer t0k")
    assert "t0k" not in repr(gh)
    assert GitHubBinding(token="t0k", host="github.com").value == \
        "Basic eC1hY2Nlc3MtdG9rZW46dDBr"  # base64("x-access-token:t0k")
    m = MistralApiBinding(api_key="k")
    assert (m.host, m.value) == ("api.mistral.ai", "Bearer k")
    allow = Network.allow(hosts=("api.github.com",))
    with pytest.raises(ConfigError, match="need a network"):
        LocalSandbox(header_bindings=[gh])
    with pytest.raises(ConfigError, match="not in the allow list"):
        LocalSandbox(network=allow, header_bindings=[m])
    with pytest.raises(ConfigError, match="given twice"):
        LocalSandbox(network=allow, header_bindings=[gh, GitHubBinding(token="x")])
    with pytest.raises(ConfigError, match="a list of HeaderBinding"):
        LocalSandbox(network=allow, header_bindings=5)
    assert LocalSandbox(network=Network.all(), header_bindings=[m]).header_bindings == [m]


def test_unknown_image_is_config_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HUTCH_IMAGE_STORE", str(tmp_path / "store"))
    with pytest.raises(ConfigError, match="python:3.12: no such image in the store"):
        LocalSandbox(image="python:3.12").open()
    with pytest.raises(ConfigError, match="invalid image 'a..b'"):
        LocalSandbox(image="a..b")
    with pytest.raises(ConfigError, match="invalid image '/a"):
        LocalSandbox(image="/a\nb")
    assert LocalSandbox(image="oci:/srv/layout").image == "oci:/srv/layout"


def test_image_sandbox_without_background_processes(monkeypatch, tmp_path):
    """image= of an image of the store; the cloud's rule: a custom image
    has no background processes unless supports_background_processes=True."""
    sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
    import ociimage
    import rootimage
    store = tmp_path / "store"
    rootimage.build(str(tmp_path / "root.tar"))
    with open(tmp_path / "root.tar", "rb") as fh:
        layer = fh.read()
    lay = ociimage.layout(str(tmp_path / "lay"), [layer], env=["PATH=/usr/bin:/bin", "FROM_IMAGE=1"])
    env = {**os.environ, "HUTCH_IMAGE_STORE": str(store)}
    subprocess.run([HUTCH, "image", "import", lay, "pytest-img"], env=env, check=True,
                   capture_output=True)
    monkeypatch.setenv("HUTCH_IMAGE_STORE", str(store))
    assert LocalSandbox(image="host").supports_background_processes is True
    assert LocalSandbox(image="pytest-img").supports_background_processes is False
    with LocalSandbox(image="pytest-img") as s:
        assert s.execute("echo $FROM_IMAGE; cat /etc/os-release").stdout == "1\nID=hutch-test\n"
        with pytest.raises(hutch.BackgroundProcessesDisabledError):
            s.start_process("sleep 1")
    with LocalSandbox(image="pytest-img", supports_background_processes=True) as s:
        s.start_process("sleep 1")


def test_setup_script_runs_before_open():
    script = "echo prepared > /workspace/ready\nmkdir -p /workspace/pkg\n"
    with LocalSandbox(setup_script=script, setup_script_timeout_seconds=20) as s:
        assert s.read_file("/workspace/ready") == b"prepared\n"
        assert s.status()["hooks"]["setup_script"]["exit_code"] == 0


def test_setup_script_failure_and_timeout(runtime_dir):
    with pytest.raises(hutch.SetupError, match="exit status 4") as ei:
        LocalSandbox(setup_script="echo broken-install; exit 4").open()
    assert "broken-install" in str(ei.value)
    with pytest.raises(hutch.SetupError):
        LocalSandbox(setup_script="sleep 30", setup_script_timeout_seconds=1).open()
    assert live_sandboxes(runtime_dir) == []


def test_background_processes_can_be_disabled():
    with LocalSandbox(supports_background_processes=False) as s:
        with pytest.raises(hutch.BackgroundProcessesDisabledError, match="supports_background_processes"):
            s.start_process("sleep 1")
        assert s.execute("echo ok").stdout == "ok\n"


# ---------------------------------------------------------------------------
# hooks
# ---------------------------------------------------------------------------
class Recorder(SandboxHook):
    def __init__(self, name, log):
        self.name, self.log = name, log

    async def on_create(self, ctx):
        r = await ctx.sandbox.execute(f"echo {self.name} >> /workspace/hooks.log")
        assert r.exit_code == 0
        await ctx.sandbox.write_file(f"/workspace/{self.name}.txt", self.name)
        self.log.append(("create", self.name, ctx.sandbox_id))

    async def on_destroy(self, ctx):
        data = await ctx.sandbox.read_file("/workspace/hooks.log")
        self.log.append(("destroy", self.name, data.decode()))


class SyncRecorder(SandboxHook):
    def __init__(self, name, log):
        self.name, self.log = name, log

    def on_create(self, ctx):
        assert ctx.sandbox.execute(f"echo {self.name} >> /workspace/hooks.log").exit_code == 0
        self.log.append(("create", self.name, ctx.sandbox_id))

    def on_destroy(self, ctx):
        self.log.append(("destroy", self.name, ctx.sandbox.read_file("/workspace/hooks.log").decode()))


def test_hooks_order_sync_session(runtime_dir):
    log = []
    sb = LocalSandbox(hooks=[Recorder("a", log), SyncRecorder("b", log)])
    with sb as s:
        assert log == [("create", "a", s.id), ("create", "b", s.id)]
        assert s.read_file("a.txt") == b"a"
        assert s.read_file("hooks.log") == b"a\nb\n"
        log.clear()
    assert log == [("destroy", "b", "a\nb\n"), ("destroy", "a", "a\nb\n")]
    assert live_sandboxes(runtime_dir) == []


def test_hooks_order_async_session(runtime_dir):
    log = []

    async def main():
        async with LocalSandbox(hooks=[SyncRecorder("a", log), Recorder("b", log)]) as s:
            assert [e[:2] for e in log] == [("create", "a"), ("create", "b")]
            assert await s.read_file("hooks.log") == b"a\nb\n"
            log.clear()
    asyncio.run(main())
    assert log == [("destroy", "b", "a\nb\n"), ("destroy", "a", "a\nb\n")]
    assert live_sandboxes(runtime_dir) == []


class Failing(SandboxHook):
    def __init__(self, log):
        self.log = log

    async def on_create(self, ctx):
        result = await ctx.sandbox.execute("pip-does-not-exist install -e .")
        self.log.append(ctx.sandbox_id)
        if result.exit_code != 0:
            raise RuntimeError(result.stderr)

    async def on_destroy(self, ctx):
        self.log.append("destroy must not run")


def test_on_create_failure_deletes_sandbox(runtime_dir):
    log = []
    with pytest.raises(RuntimeError, match="pip-does-not-exist"):
        with LocalSandbox(hooks=[Failing(log)]):
            pytest.fail("the block must not run")
    assert len(log) == 1 and live_sandboxes(runtime_dir) == []
    gone = [g for g in os.listdir(os.path.join(runtime_dir, ".gone")) if "." not in g]
    assert gone == [log[0]]

    async def main():
        async with LocalSandbox(hooks=[Failing(log)]):
            pytest.fail("the block must not run")
    with pytest.raises(RuntimeError, match="pip-does-not-exist"):
        asyncio.run(main())
    assert len(log) == 2 and live_sandboxes(runtime_dir) == []


def test_on_destroy_failure_still_deletes(runtime_dir):
    class Bad(SandboxHook):
        def on_destroy(self, ctx):
            raise ValueError("report missing")
    s = LocalSandbox(hooks=[Bad()]).open()
    with pytest.raises(ValueError, match="report missing"):
        s.close()
    assert live_sandboxes(runtime_dir) == [] and s.closed
    s.close()  # idempotent


def test_exception_in_with_block_deletes(runtime_dir):
    with pytest.raises(KeyError):
        with LocalSandbox() as s:
            assert live_sandboxes(runtime_dir) == [s.id]
            raise KeyError("boom")
    assert live_sandboxes(runtime_dir) == []
    with pytest.raises(hutch.SandboxDeletedError, match="closed"):
        s.execute("true")


# ---------------------------------------------------------------------------
# session calls
# ---------------------------------------------------------------------------
def test_execute_options():
    with LocalSandbox() as s:
        r = s.execute("pwd; id -u; echo $FOO; cat", env={"FOO": "bar"}, stdin="in put")
        assert (r.exit_code, r.stdout, r.stderr) == (0, "/workspace\n1000\nbar\nin put", "")
        s.make_dir("sub/dir")
        assert s.execute("pwd", cwd="sub/dir").stdout == "/workspace/sub/dir\n"
        assert s.execute(["printf", "%s|", "a b", "c"]).stdout == "a b|c|"
        r = s.execute("echo out; echo err >&2; exit 7")
        assert (r.exit_code, r.stdout, r.stderr, r.status) == (7, "out\n", "err\n", "exited")
        t0 = time.monotonic()
        with pytest.raises(hutch.CommandTimeoutError, match="timed out") as ei:
            s.execute("echo before; sleep 30", timeout=1)
        assert time.monotonic() - t0 < 10
        assert ei.value.result.stdout == "before\n" and ei.value.result.timed_out
        assert s.execute("python3 -c 'print(6*7)'").stdout == "42\n"


def test_exact_bytes_in_and_out():
    data = bytes(range(256)) + b"\r\x00\xff"
    with LocalSandbox() as s:
        r = s.execute("cat; printf '\\377' >&2", stdin=data, text=False)
        assert (r.stdout, r.stderr, r.exit_code) == (data, b"\xff", 0)
        # bytes stdin with text output: sent exactly, read back as text
        r = s.execute("wc -c", stdin=b"\xff\x00")
        assert r.stdout.strip() == "2"
        # str stdin with bytes output
        assert s.execute("cat", stdin="é", text=False).stdout == "é".encode()
        # the default stays text, invalid bytes replaced
        assert s.execute("printf 'a\\377'").stdout == "a\ufffd"
        chunks = [c for c in s.execute_stream("printf '\\000\\377'; printf '\\376' >&2",
                                              text=False)
                  if isinstance(c, hutch.OutputChunk)]
        assert b"".join(c.data for c in chunks if c.stream == "stdout") == b"\x00\xff"
        assert [c.data for c in chunks if c.stream == "stderr"] == [b"\xfe"]
        with pytest.raises(TypeError, match="stdin must be str or bytes"):
            s.execute("cat", stdin=5)
        with pytest.raises(TypeError, match="text must be"):
            s.execute("cat", text="no")


def test_exact_bytes_async():
    async def main():
        async with LocalSandbox() as s:
            r = await s.execute("cat", stdin=b"\x00\xff", text=False)
            assert r.stdout == b"\x00\xff"
            got = [c.data async for c in s.execute_stream("printf '\\377'", text=False)
                   if isinstance(c, hutch.OutputChunk)]
            assert got == [b"\xff"]
    asyncio.run(main())


def test_streaming_order():
    script = "for i in 1 2 3; do echo out$i; sleep 0.05; echo err$i >&2; sleep 0.05; done; exit 5"
    with LocalSandbox() as s:
        items = list(s.execute_stream(script))
        assert isinstance(items[-1], hutch.ExitStatus) and items[-1].exit_code == 5
        chunks = items[:-1]
        assert all(isinstance(c, hutch.OutputChunk) for c in chunks)
        assert [(c.stream, c.data) for c in chunks] == [
            (st, f"{p}{i}\n") for i in (1, 2, 3) for st, p in (("stdout", "out"), ("stderr", "err"))]
        # chunks arrive while the command runs
        stream = s.execute_stream("echo first; sleep 1; echo second")
        t0 = time.monotonic()
        first = next(stream)
        assert first.data == "first\n" and time.monotonic() - t0 < 0.9
        rest = list(stream)
        assert rest[0].data == "second\n" and stream.exit_code == 0
        with pytest.raises(hutch.CommandTimeoutError):
            list(s.execute_stream("sleep 30", timeout=1))


def test_files():
    with LocalSandbox() as s:
        assert s.write_file("a/b/c.txt", "héllo\n") == 7
        assert s.read_file("/workspace/a/b/c.txt") == "héllo\n".encode()
        blob = bytes(range(256)) * 10
        s.write_file("bin.dat", blob, mode=0o600)
        assert s.read_file("bin.dat") == blob
        entries = {e.name: e for e in s.list_dir()}
        assert entries["a"].type == "directory" and entries["bin.dat"].mode == "600"
        assert entries["bin.dat"].size == len(blob)
        s.make_dir("x/y", mode="700")
        assert [e.name for e in s.list_dir("x")] == ["y"]
        s.remove("bin.dat")
        with pytest.raises(hutch.SandboxIsADirectoryError):
            s.remove("a", recursive=False)
        s.remove("a")
        assert sorted(e.name for e in s.list_dir()) == ["x"]
        with pytest.raises(hutch.SandboxFileNotFoundError) as ei:
            s.read_file("missing.txt")
        assert isinstance(ei.value, FileNotFoundError) and ei.value.path == "missing.txt"
        with pytest.raises(hutch.SandboxPermissionError):
            s.write_file("/usr/evil", "x")


def test_max_bytes_refuses_a_sparse_file_before_reading(tmp_path):
    """A sparse file takes no room in the sandbox and can have any length:
    max_bytes refuses it before a byte is read or written."""
    with LocalSandbox(instance_type="nano") as s:
        s.execute("truncate -s 1T sparse && printf 12345 > small")
        with pytest.raises(hutch.FileTooLargeError) as ei:
            s.read_file("sparse", max_bytes=1 << 20)
        assert "1099511627776 bytes, more than max_bytes=1048576" in str(ei.value)
        dst = tmp_path / "sparse"
        with pytest.raises(hutch.FileTooLargeError):
            s.download("sparse", str(dst), max_bytes=1 << 20)
        assert not dst.exists()
        assert s.read_file("small", max_bytes=5) == b"12345"
        assert s.download("small", str(tmp_path / "small"), max_bytes=5) == 5
        # the connection pool is still usable after a refusal
        assert s.execute("echo ok").stdout == "ok\n"


async def _async_max_bytes():
    async with LocalSandbox(instance_type="nano") as s:
        await s.execute("truncate -s 1T sparse")
        with pytest.raises(hutch.FileTooLargeError):
            await s.read_file("sparse", max_bytes=10)


def test_max_bytes_async():
    asyncio.run(_async_max_bytes())


def test_large_upload_download_integrity(tmp_path):
    src = tmp_path / "big.bin"
    h = hashlib.sha256()
    with open(src, "wb") as f:
        for _ in range(64):
            chunk = os.urandom(1 << 20)
            h.update(chunk)
            f.write(chunk)
    with LocalSandbox() as s:
        assert s.upload(str(src), "big.bin") == 64 << 20
        r = s.execute("sha256sum big.bin")
        assert r.stdout.split()[0] == h.hexdigest()
        dst = tmp_path / "back.bin"
        assert s.download("big.bin", str(dst)) == 64 << 20
        h2 = hashlib.sha256()
        with open(dst, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h2.update(chunk)
        assert h2.hexdigest() == h.hexdigest()
        # file objects, and a non-seekable source (chunked)
        with open(src, "rb") as f:
            f.seek(1 << 20)
            assert s.upload(f, "tail.bin") == 63 << 20
        rfd, wfd = os.pipe()
        with os.fdopen(wfd, "wb") as w:
            w.write(b"through a pipe")
        with os.fdopen(rfd, "rb") as r_:
            assert s.upload(r_, "pipe.bin") == 14
        assert s.read_file("pipe.bin") == b"through a pipe"


def test_background_processes():
    with LocalSandbox() as s:
        p = s.start_process("echo started; sleep 60", env={"X": "1"})
        assert p.id == "p1" and p.status == "running"
        out = s.process_output(p.id, wait=5)
        assert out.data == "started\n" and out.next_offset == 8 and not out.eof
        assert [q.id for q in s.list_processes()] == ["p1"]
        k = s.kill_process(p, grace_seconds=0)
        assert k.status == "killed"
        with pytest.raises(hutch.ProcessNotRunningError):
            s.kill_process("p1")
        with pytest.raises(hutch.ProcessNotFoundError):
            s.process_output("p99")
        q = s.start_process(["sh", "-c", "echo e >&2; exit 3"])
        out = s.process_output(q.id, stream="stderr", wait=5)
        while not out.eof:
            out = s.process_output(q.id, stream="stderr", offset=out.next_offset, wait=5)
        assert [x for x in s.list_processes() if x.id == q.id][0].exit_code == 3


def test_idle_sleep_and_wake():
    with LocalSandbox(idle_timeout_seconds=1) as s:
        s.execute("echo kept > /tmp/kept")
        deadline = time.monotonic() + 15
        while s.status()["state"] != "sleeping" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert s.status()["state"] == "sleeping"
        assert s.read_file("/tmp/kept") == b"kept\n"  # wakes transparently
        assert s.status()["state"] == "running"


def test_status():
    with LocalSandbox(ttl_seconds=3600) as s:
        st = s.status()
        assert st["id"] == s.id and st["state"] == "running"
        assert 3500 < st["expires_in_seconds"] <= 3600 and st["expires_at"] == s.expires_at


def test_journal_after_close_and_its_bound():
    s = LocalSandbox(journal_max_bytes=1 << 20).open()
    assert s.execute("echo journaled; exit 4").exit_code == 4
    s.write_file("j.txt", "x")
    s.close()
    j = s.journal(verify=True)
    assert j[0]["journal"] == "start" and j[0]["max_bytes"] == 1 << 20
    assert j[-1]["journal"] == "end"
    assert any(x.get("command") == "echo journaled; exit 4" and x.get("exit") == 4 for x in j)
    assert any(x.get("path", "").endswith("j.txt") for x in j)
    for bad in (-1, True, "4", 2 << 30):
        with pytest.raises(ConfigError):
            LocalSandbox(journal_max_bytes=bad)


# ---------------------------------------------------------------------------
# sync / async parity
# ---------------------------------------------------------------------------
def _script(s):
    """The same calls, sync; returns comparable results."""
    out = []
    r = s.execute("echo a; echo b >&2; exit 3", env={"K": "v"})
    out.append((r.exit_code, r.stdout, r.stderr, r.status))
    out.append(s.write_file("f.txt", "data"))
    out.append(s.read_file("f.txt"))
    s.make_dir("d")
    out.append([(e.name, e.type, e.size) for e in s.list_dir()])
    s.remove("d")
    out.append([(i.stream, i.data) if isinstance(i, hutch.OutputChunk) else i.exit_code
                for i in s.execute_stream("echo x; echo y >&2; exit 1")])
    p = s.start_process("echo bg")
    o = s.process_output(p.id, wait=5)
    out.append((p.id, o.data))
    try:
        s.read_file("nope")
    except hutch.SandboxError as e:
        out.append((type(e).__name__, e.code))
    try:
        s.execute("sleep 5", timeout=0.5)
    except hutch.CommandTimeoutError as e:
        out.append(("timeout", e.result.timed_out))
    out.append(s.status()["config"]["instance_type"])
    return out


async def _ascript(s):
    out = []
    r = await s.execute("echo a; echo b >&2; exit 3", env={"K": "v"})
    out.append((r.exit_code, r.stdout, r.stderr, r.status))
    out.append(await s.write_file("f.txt", "data"))
    out.append(await s.read_file("f.txt"))
    await s.make_dir("d")
    out.append([(e.name, e.type, e.size) for e in await s.list_dir()])
    await s.remove("d")
    out.append([(i.stream, i.data) if isinstance(i, hutch.OutputChunk) else i.exit_code
                async for i in s.execute_stream("echo x; echo y >&2; exit 1")])
    p = await s.start_process("echo bg")
    o = await s.process_output(p.id, wait=5)
    out.append((p.id, o.data))
    try:
        await s.read_file("nope")
    except hutch.SandboxError as e:
        out.append((type(e).__name__, e.code))
    try:
        await s.execute("sleep 5", timeout=0.5)
    except hutch.CommandTimeoutError as e:
        out.append(("timeout", e.result.timed_out))
    out.append((await s.status())["config"]["instance_type"])
    return out


def test_sync_async_parity(runtime_dir):
    with LocalSandbox(instance_type="small") as s:
        sync_result = _script(s)

    async def main():
        async with LocalSandbox(instance_type="small") as s:
            assert isinstance(s, hutch.AsyncSandboxSession)
            a = await _ascript(s)
            # concurrent calls on one session
            rs = await asyncio.gather(*(s.execute(f"echo {i}") for i in range(8)))
            assert [r.stdout for r in rs] == [f"{i}\n" for i in range(8)]
            return a
    async_result = asyncio.run(main())
    assert sync_result == async_result
    assert len(sync_result) == 9
    # the same public names on both
    names = {n for n in dir(hutch.SandboxSession) if not n.startswith("_")} - {"closed"}
    assert names <= set(dir(hutch.AsyncSandboxSession))
    assert live_sandboxes(runtime_dir) == []


# ---------------------------------------------------------------------------
# the end of a sandbox
# ---------------------------------------------------------------------------
def test_expiry_surfaces_as_expired_error(runtime_dir):
    s = LocalSandbox(ttl_seconds=2).open()
    assert s.execute("echo alive").stdout == "alive\n"
    d = os.path.join(runtime_dir, s.id)
    deadline = time.monotonic() + 20
    while os.path.exists(d) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(d), "sandbox did not expire within 20 s"
    with pytest.raises(hutch.SandboxExpiredError, match=f"sandbox {s.id} expired") as ei:
        s.execute("echo late")
    assert ei.value.sandbox_id == s.id and ei.value.at
    with pytest.raises(hutch.SandboxExpiredError):
        s.read_file("x")
    s.close()  # already gone: not an error


def test_expiry_during_a_command(runtime_dir):
    s = LocalSandbox(ttl_seconds=2).open()
    t0 = time.monotonic()
    with pytest.raises(hutch.SandboxExpiredError, match="expired"):
        s.execute("sleep 30")
    assert time.monotonic() - t0 < 15
    s.close()


def test_deleted_while_streaming(runtime_dir):
    with LocalSandbox() as s:
        stream = s.execute_stream("echo go; sleep 30")
        assert next(stream).data == "go\n"
        subprocess.run([HUTCH, "rm", s.id], check=True, capture_output=True)
        with pytest.raises(hutch.SandboxDeletedError):
            list(stream)


def test_deleted_elsewhere_surfaces_as_deleted_error(runtime_dir):
    with LocalSandbox() as s:
        s.execute("true")
        subprocess.run([HUTCH, "rm", s.id], check=True, capture_output=True)
        with pytest.raises(hutch.SandboxDeletedError, match=f"sandbox {s.id} was deleted"):
            s.execute("true")


def test_exception_hierarchy():
    for cls in (hutch.NotCapableHostError, hutch.ConfigError, hutch.SandboxExpiredError,
                hutch.SandboxDeletedError, hutch.CommandTimeoutError, hutch.HutchNotFoundError,
                hutch.SetupError, hutch.APIError):
        assert issubclass(cls, hutch.SandboxError)


def test_missing_or_old_binary(monkeypatch, tmp_path):
    monkeypatch.setenv("HUTCH_BIN", str(tmp_path / "nope"))
    with pytest.raises(hutch.HutchNotFoundError, match="build hutch"):
        LocalSandbox().open()
    old = tmp_path / "hutch"
    old.write_text('#!/bin/sh\necho \'{"version": "0.0.1"}\'\n')
    old.chmod(0o755)
    monkeypatch.setenv("HUTCH_BIN", str(old))
    with pytest.raises(hutch.HutchNotFoundError, match="hutch 0.0.1, too old"):
        LocalSandbox().open()
    # not in HUTCH_BIN, not on PATH: the source tree's build/hutch, else an error
    monkeypatch.delenv("HUTCH_BIN")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    from hutch import _binary
    monkeypatch.setattr(_binary, "_source_tree_binary", lambda: str(tmp_path / "missing" / "hutch"))
    with pytest.raises(hutch.HutchNotFoundError, match="not found .* build hutch"):
        LocalSandbox().open()
    monkeypatch.setattr(_binary, "_source_tree_binary", lambda: HUTCH)
    assert hutch.find_hutch() == HUTCH


def test_not_capable_host_error(monkeypatch, tmp_path):
    fake = tmp_path / "hutch"
    fake.write_text('#!/bin/sh\nif [ "$1" = version ]; then echo \'{"version": "0.1.0"}\'; exit 0; fi\n'
                    'echo "hutch: creating sandboxes needs root" >&2; exit 69\n')
    fake.chmod(0o755)
    monkeypatch.setenv("HUTCH_BIN", str(fake))
    with pytest.raises(hutch.NotCapableHostError, match="needs root.*hutch doctor"):
        LocalSandbox().open()


# ---------------------------------------------------------------------------
# the pytest plugin
# ---------------------------------------------------------------------------
def test_pytest_fixture(tmp_path, runtime_dir):
    (tmp_path / "test_inner.py").write_text(textwrap.dedent('''
        import os
        import pytest
        import hutch

        IDS = []

        @pytest.mark.hutch(instance_type="small", ttl_seconds=600)
        def test_marked(sandbox):
            assert isinstance(sandbox, hutch.SandboxSession)
            cfg = sandbox.status()["config"]
            assert (cfg["instance_type"], cfg["ttl_seconds"]) == ("small", 600)
            IDS.append(sandbox.id)

        def test_default(sandbox):
            assert sandbox.status()["config"]["instance_type"] == "medium"
            assert sandbox.execute("echo hi").stdout == "hi\\n"
            IDS.append(sandbox.id)

        def test_closed_after_each():
            rt = os.environ["HUTCH_RUNTIME_DIR"]
            assert len(IDS) == 2
            for i in IDS:
                assert not os.path.exists(os.path.join(rt, i))
    '''))
    env = {**os.environ, "PYTHONPATH": PKG_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "hutch.pytest_plugin", "-W", "error::pytest.PytestUnknownMarkWarning",
                        str(tmp_path / "test_inner.py")],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 passed" in r.stdout


def test_pytest_fixture_keeps_a_failed_tests_sandbox(tmp_path, runtime_dir):
    """--hutch-keep-failed (HUTCH_KEEP_FAILED=1): the sandbox of a failed
    test stays, its id said with how to get in; a passed test's does not."""
    (tmp_path / "test_inner.py").write_text(textwrap.dedent('''
        def test_passes(sandbox):
            print("PASSED-ID", sandbox.id)

        def test_fails(sandbox):
            print("FAILED-ID", sandbox.id)
            assert sandbox.execute("false").exit_code == 0
    '''))
    env = {**os.environ, "PYTHONPATH": PKG_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HUTCH_RUNTIME_DIR": runtime_dir}
    argv = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
            "-p", "hutch.pytest_plugin", str(tmp_path / "test_inner.py")]
    for how, extra in (("option", ["--hutch-keep-failed"]), ("env", []), ("neither", [])):
        e = dict(env, HUTCH_KEEP_FAILED="1" if how == "env" else "0")
        r = subprocess.run(argv + extra, capture_output=True, text=True, env=e, cwd=str(tmp_path),
                           timeout=120)
        assert "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr
        passed = r.stdout.split("PASSED-ID ")[1].split()[0]
        failed = r.stdout.split("FAILED-ID ")[1].split()[0]
        assert not os.path.exists(os.path.join(runtime_dir, passed))
        if how == "neither":
            assert not os.path.exists(os.path.join(runtime_dir, failed))
            assert "kept sandbox" not in r.stderr
            continue
        assert os.path.exists(os.path.join(runtime_dir, failed)), how
        assert f"kept sandbox {failed} of a failed test" in r.stderr, r.stderr
        assert f"hutch exec -it {failed}" in r.stderr and f"hutch rm {failed}" in r.stderr
        rm = subprocess.run([HUTCH, "rm", failed], capture_output=True, env=e)
        assert rm.returncode == 0, rm.stderr


def test_example_agent_loop(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "agent_loop.py")],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mean 40.8" in r.stdout and "NameError" in r.stderr
    assert (tmp_path / "report.md").read_text().startswith("# Report")


# ---------------------------------------------------------------------------
# warm pool: the client claims a pooled sandbox itself (no CLI process)
# ---------------------------------------------------------------------------
def test_open_claims_from_a_warm_pool(runtime_dir):
    env = {**os.environ, "HUTCH_RUNTIME_DIR": runtime_dir}
    r = subprocess.run([HUTCH, "pool", "start", "--size", "1", "--instance-type", "small"],
                       capture_output=True, env=env)
    assert r.returncode == 0, r.stderr
    try:
        pool_dir = os.path.join(runtime_dir, ".pool")
        [key] = os.listdir(pool_dir)
        [pooled] = [n for n in os.listdir(os.path.join(pool_dir, key)) if len(n) == 12]
        # The client never computes the key: it asks the CLI, and gets the
        # key the pool was started with.
        from hutch import _pool
        sb = LocalSandbox(instance_type="small", ttl_seconds=90)
        described = _pool.describe(HUTCH, sb._cli_options())
        assert described["key"] == key and described["servable"] is True
        assert described["pool_dir"] == os.path.join(pool_dir, key)
        assert described["claim"]["ttl_seconds"] == 90
        r = subprocess.run([HUTCH, "pool", "key", "--instance-type", "small"], capture_output=True,
                           env=env, text=True)
        assert r.returncode == 0 and r.stdout.strip() == key, r
        with LocalSandbox(instance_type="small", ttl_seconds=90) as s:
            assert s.id == pooled
            st = s.status()
            assert st["state"] == "running" and st["config"]["ttl_seconds"] == 90
            assert s.execute("echo hi").stdout == "hi\n"
        # another configuration is not served from it
        with LocalSandbox(instance_type="micro") as s:
            assert s.id != pooled
    finally:
        r = subprocess.run([HUTCH, "pool", "stop", "--all"], capture_output=True, env=env)
        assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------
# ports out of the sandbox
# ---------------------------------------------------------------------------
HTTP_WAIT = ("import socket, time\n"
             "for _ in range(200):\n"
             "    try:\n"
             "        socket.create_connection(('127.0.0.1', {port}), 1).close(); break\n"
             "    except OSError:\n"
             "        time.sleep(0.05)\n")


def _serve(s, port):
    s.write_file("/workspace/hello.txt", "hello from inside\n")
    s.start_process(f"python3 -m http.server {port} -d /workspace")
    assert s.execute(["python3", "-c", HTTP_WAIT.format(port=port)]).exit_code == 0


def test_expose_port_reaches_a_server_inside():
    import urllib.request
    with LocalSandbox() as s:
        _serve(s, 8000)
        exposed = s.expose_port(8000)
        assert exposed.port == 8000 and exposed.host_address == "127.0.0.1"
        assert exposed.exposed_at == f"http://127.0.0.1:{exposed.host_port}"
        with urllib.request.urlopen(exposed.exposed_at + "/hello.txt", timeout=10) as r:
            assert r.read() == b"hello from inside\n"
        # one exposed port at a time, as in the cloud: the next replaces it
        again = s.expose_port(8000)
        assert [p.host_port for p in s.ports()] == [again.host_port]
        s.unexpose_port()
        assert s.ports() == []
        s.unexpose_port()  # nothing exposed: no error


def test_ports_at_creation_and_bad_ports():
    import urllib.request
    with LocalSandbox(ports=[8000]) as s:
        _serve(s, 8000)
        (p,) = s.ports()
        with urllib.request.urlopen(p.exposed_at + "/hello.txt", timeout=10) as r:
            assert r.status == 200
    with pytest.raises(ConfigError, match="invalid port 0"):
        LocalSandbox(ports=[0])
    with pytest.raises(ConfigError, match="only TCP ports"):
        LocalSandbox(ports=["8080:80/udp"]).open()


def test_expose_port_async():
    import urllib.request

    async def main():
        async with LocalSandbox() as s:
            await s.start_process("python3 -m http.server 8001 -d /tmp")
            await s.execute(["python3", "-c", HTTP_WAIT.format(port=8001)])
            exposed = await s.expose_port(8001)
            r = await asyncio.to_thread(urllib.request.urlopen, exposed.exposed_at, None, 10)
            assert r.status == 200
            await s.unexpose_port()
            assert await s.ports() == []
    asyncio.run(main())


@pytest.mark.parametrize("port", [-1, 65536, "80", "x:1", True, 1.5])
def test_executor_port_validation(port):
    with pytest.raises(ConfigError, match="executor_port"):
        LocalSandbox(executor_port=port)


@pytest.mark.parametrize("value", [0, -1, (1 << 30) + 1, True, 1.5, "10"])
def test_executor_max_output_validation(value):
    with pytest.raises(ConfigError, match="executor_max_output_bytes"):
        LocalSandbox(executor_max_output_bytes=value)


@pytest.mark.parametrize("value", ["all", "", "FILES", 1, True])
def test_access_validation(value):
    with pytest.raises(ConfigError, match="invalid access"):
        LocalSandbox(access=value)


def test_access_files_and_none():
    from hutch import AccessDeniedError
    with LocalSandbox(access="files") as s:
        assert s.config["access"] == "files"
        s.write_file("/tmp/a", "x")
        assert s.read_file("/tmp/a") == b"x"
        with pytest.raises(AccessDeniedError, match='access "files"'):
            s.execute("true")
        with pytest.raises(PermissionError):
            s.start_process("sleep 5")
    with LocalSandbox(access="none") as s:
        with pytest.raises(AccessDeniedError, match='access "none"'):
            s.write_file("/tmp/a", "x")
    assert LocalSandbox()._cli_options().count("--access") == 0


@pytest.mark.parametrize("value,what", [
    ([("A", "1")], "invalid secrets"), ({"1A": "x"}, "invalid secret name"),
    ({"A-B": "x"}, "invalid secret name"), ({"A": 1}, "invalid secret 'A'"),
    ({"A": "x\0y"}, "invalid secret 'A'"), ({"A": "x" * 65537}, "invalid secret 'A'"),
    ({f"S{i}": "x" for i in range(33)}, "at most 32")])
def test_secrets_validation(value, what):
    with pytest.raises(ConfigError, match=what):
        LocalSandbox(secrets=value)


def test_secrets_reach_commands_and_are_never_shown():
    value = "tok-\u00e9-" + "z" * 5000
    with LocalSandbox(secrets={"TOKEN": value, "EMPTY": ""}) as s:
        assert s.config["secrets"] == ["TOKEN", "EMPTY"]
        assert s.execute('printf %s "$TOKEN"').stdout == value
        assert s.execute('printf %s "${EMPTY-unset}"').stdout == ""
        assert value not in json.dumps(s.status())
    # never argv: the values went through pipes
    assert all(value not in a for a in LocalSandbox(secrets={"T": value})._cli_options())


def test_executor_max_output_bounds_the_contract_run():
    import http.client
    import json as _json
    with LocalSandbox(executor_port=0, executor_max_output_bytes=100) as s:
        e = s.executor
        assert s.config["executor_max_output_bytes"] == 100
        conn = http.client.HTTPConnection("127.0.0.1", e["port"], timeout=30)
        for n, want in ((100, 200), (101, 500)):
            conn.request("POST", "/run", body=_json.dumps({"cmd": "head -c %d /dev/zero" % n}),
                         headers={"Authorization": "Bearer " + e["secret"]})
            resp = conn.getresponse()
            body = resp.read()
            assert resp.status == want, body
        assert b"executor_max_output_bytes" in body
        conn.close()


def test_executor_port_serves_the_contract_with_the_secret():
    import http.client
    import json as _json
    with LocalSandbox(executor_port=0) as s:
        e = s.executor
        assert e["address"] == "127.0.0.1" and e["url"] == "http://127.0.0.1:%d" % e["port"]
        assert s.config["executor_port"] == "127.0.0.1:0"
        conn = http.client.HTTPConnection("127.0.0.1", e["port"], timeout=30)
        conn.request("POST", "/run", body=_json.dumps({"cmd": "echo hi; exit 3"}),
                     headers={"Authorization": "Bearer " + e["secret"]})
        resp = conn.getresponse()
        assert (resp.status, _json.loads(resp.read())) == (
            200, {"stdout": "hi\n", "stderr": "", "error": "Non-zero exit code", "code": 3})
        conn.request("POST", "/run", body=b'{"cmd": "true"}')
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (401, b"Unauthorized\n")
        conn.close()
        # the session itself goes on through the native API
        assert s.execute("echo ok").stdout == "ok\n"


@pytest.mark.parametrize("value,what", [
    ("/a:/b", "invalid volumes"), ({"data": "/srv"}, "invalid volume path"),
    ({"/d": 3}, "invalid volume for"), ({"/d": "rel/dir"}, "invalid volume source"),
    (lambda: {"/d": hutch.Volume("/srv", read_only="no")}, "read_only"),
    ([f"/s{i}:/d{i}" for i in range(17)], "at most 16"), (["/a"], "SOURCE:PATH")])
def test_volumes_validation(value, what):
    with pytest.raises(ConfigError, match=what):
        LocalSandbox(volumes=value() if callable(value) else value)


def test_volumes_host_directory_and_named(tmp_path):
    d = tmp_path / "proj"
    d.mkdir()
    (d / "in.txt").write_text("hello\n")
    os.chown(d, 4242, 4242)
    os.chown(d / "in.txt", 4242, 4242)
    sb = LocalSandbox(volumes={"/data": hutch.Volume(str(d), read_only=False), "/ro": str(d)})
    assert sb._cli_options()[-4:] == ["--volume", f"{d}:/data:rw", "--volume", f"{d}:/ro:ro"]
    with sb as s:
        assert s.config["volumes"] == [f"{d}:/data:rw", f"{d}:/ro:ro"]
        assert s.execute("cat /ro/in.txt; stat -c %U /data/in.txt").stdout == "hello\nappuser\n"
        assert s.execute("echo out > /data/out.txt").exit_code == 0
        assert s.execute("touch /ro/x").exit_code != 0
    assert (d / "out.txt").read_text() == "out\n" and os.stat(d / "out.txt").st_uid == 4242
    with pytest.raises(ConfigError, match="symlink"):
        os.symlink(d, tmp_path / "link")
        LocalSandbox(volumes={"/x": str(tmp_path / "link")}).open()
    with pytest.raises(ConfigError, match="no-such-dir"):
        LocalSandbox(volumes={"/x": str(tmp_path / "no-such-dir")}).open()

    vol = hutch.Volume.create("pyvol")
    assert vol == hutch.Volume("pyvol", read_only=False)

    async def main():
        async with LocalSandbox(volumes={"/workspace": vol}) as s:
            assert (await s.execute("echo kept > /workspace/f")).exit_code == 0
    asyncio.run(main())
    with LocalSandbox(volumes=["pyvol:/w"]) as s:
        assert s.execute("cat /w/f").stdout == "kept\n"
        assert [v["in_use"] for v in hutch.Volume.list() if v["name"] == "pyvol"] == [True]
        with pytest.raises(hutch.SandboxError, match="in use by sandbox"):
            hutch.Volume.delete("pyvol")
    hutch.Volume.delete("pyvol")
    assert all(v["name"] != "pyvol" for v in hutch.Volume.list())


def _small_image(monkeypatch, tmp_path, name):
    """The integration tests' small root image as name, in a store of the
    test's own (HUTCH_IMAGE_STORE)."""
    sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
    import ociimage
    import rootimage
    store = tmp_path / "store"
    rootimage.build(str(tmp_path / "root.tar"))
    with open(tmp_path / "root.tar", "rb") as fh:
        lay = ociimage.layout(str(tmp_path / "lay"), [fh.read()], env=["PATH=/usr/bin:/bin"])
    subprocess.run([HUTCH, "image", "import", lay, name], check=True, capture_output=True,
                   env={**os.environ, "HUTCH_IMAGE_STORE": str(store)})
    monkeypatch.setenv("HUTCH_IMAGE_STORE", str(store))


def test_fork_is_hutch_fork():
    """fork() runs hutch fork: the host-derived root (which has no snapshots)
    forks too, its disk cloned or copied, no snapshot made; each fork its
    own, with the options given; a root option or a bad n refused."""
    with LocalSandbox(image="host") as s:
        s.execute("echo kept > /workspace/f")
        with pytest.raises(ConfigError, match="its root is its source's"):
            s.fork(image="host")
        with pytest.raises(ConfigError, match="from 1 to 100"):
            s.fork(0)
        kids = s.fork(2, ttl_seconds=600)
        try:
            assert len({s.id, *(k.id for k in kids)}) == 3
            assert all(k.config["image"] == "host" and k.config["ttl_seconds"] == 600
                       for k in kids)
            kids[0].execute("echo one > /workspace/f")
            assert kids[1].execute("cat /workspace/f").stdout == "kept\n"
            assert s.execute("cat /workspace/f").stdout == "kept\n"
        finally:
            for k in kids:
                k.close()
        one = s.fork()
        with one:
            assert isinstance(one, hutch.SandboxSession)
            assert one.execute("cat /workspace/f").stdout == "kept\n"
    assert hutch.Snapshot.list() == []


def test_full_snapshot(monkeypatch, tmp_path):
    """type=SnapshotType.FULL of a plain sandbox: CRIU's dump, a Snapshot of
    type full, listed, restored by spawn() and deleted (skipped without a CRIU that passes
    'criu check': CI has none)."""
    criu = shutil.which("criu", path=os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin")
    if not criu or subprocess.run([criu, "check"], capture_output=True).returncode != 0:
        pytest.skip("no CRIU that passes 'criu check' here")
    monkeypatch.setenv("HUTCH_CRIU", criu)
    monkeypatch.setenv("HUTCH_IMAGE_STORE", str(tmp_path / "store"))
    with LocalSandbox(image="host", change_lists=False) as s:
        s.execute("echo kept > /workspace/f")
        snap = s.snapshot("py-full", type=hutch.SnapshotType.FULL)
        assert snap.name == "py-full" and snap.type == "full" and snap.source == s.id
        assert [x.type for x in hutch.Snapshot.list() if x.name == "py-full"] == ["full"]
        # spawn() restores it: a new sandbox, its files and shell carried on.
        with snap.spawn() as t:
            assert t.id != s.id and t.execute("cat /workspace/f").stdout == "kept\n"
        snap.delete()
        assert not [x for x in hutch.Snapshot.list() if x.name == "py-full"]


FULL_HOLDER = """
import os, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 8124))
s.listen(4)
n = 0
while True:
    c, _ = s.accept()
    n += 1
    c.sendall(b'n=%d' % n)
    c.close()
"""
FULL_ASK = ("python3 -c \"import socket; print(socket.create_connection(('127.0.0.1', 8124), "
            "timeout=5).recv(20).decode())\"")


def test_full_fork(monkeypatch, tmp_path):
    """fork(n, full=True): one CRIU dump, n restores, each fork's process
    carrying on from the fork's state, then apart; the asyncio form too; a
    network refused before anything is made (skipped without a CRIU that
    passes 'criu check': CI has none)."""
    criu = shutil.which("criu", path=os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin")
    if not criu or subprocess.run([criu, "check"], capture_output=True).returncode != 0:
        pytest.skip("no CRIU that passes 'criu check' here")
    monkeypatch.setenv("HUTCH_CRIU", criu)
    with LocalSandbox(image="host", change_lists=False) as s:
        s.start_process(f"python3 -c \"{FULL_HOLDER}\"")
        for _ in range(200):
            if s.execute(FULL_ASK).stdout == "n=1\n":
                break
            time.sleep(0.05)
        with pytest.raises(ConfigError, match="network none"):
            s.fork(full=True, network=Network.all())
        kids = s.fork(2, full=True, ttl_seconds=600)
        try:
            assert len({s.id, *(k.id for k in kids)}) == 3
            assert all(k.config["ttl_seconds"] == 600 for k in kids)
            assert kids[0].execute(FULL_ASK).stdout == "n=2\n"
            assert kids[0].execute(FULL_ASK).stdout == "n=3\n"
            assert kids[1].execute(FULL_ASK).stdout == "n=2\n"
        finally:
            for k in kids:
                k.close()

        async def afork():
            k = await hutch.AsyncSandboxSession(s).fork(full=True)
            try:
                return (await k.execute(FULL_ASK)).stdout
            finally:
                await k.close()
        assert asyncio.run(afork()) == "n=2\n"
        assert s.execute(FULL_ASK).stdout == "n=2\n"
    assert hutch.Snapshot.list() == []


def test_snapshot_spawn_fork(monkeypatch, tmp_path):
    """session.snapshot() -> Snapshot.spawn(), LocalSandbox(snapshot=...),
    fork(n): the files come along, each new sandbox its own; FULL refused."""
    _small_image(monkeypatch, tmp_path, "snap-img")
    with pytest.raises(ConfigError, match="invalid snapshot"):
        LocalSandbox(snapshot="../x")
    with pytest.raises(ConfigError, match="not both"):
        LocalSandbox(snapshot="a", image="b")
    with LocalSandbox(image="snap-img") as s:
        s.execute("echo kept > /workspace/f")
        snap = s.snapshot("py-snap")
        assert snap.name == "py-snap" and snap.base == "snap-img" and snap.source == s.id
        assert snap.frozen_ms >= 0
        with pytest.raises(ConfigError, match="made from an image"):
            s.snapshot("full", type=hutch.SnapshotType.FULL)
        with snap.spawn() as c:
            assert c.execute("cat /workspace/f").stdout == "kept\n"
        kids = s.fork(2)
        try:
            assert len({k.id for k in kids}) == 2
            kids[0].execute("echo one > /workspace/f")
            assert kids[1].execute("cat /workspace/f").stdout == "kept\n"
        finally:
            for k in kids:
                k.close()

        async def afork():  # the asyncio form: an AsyncSandboxSession of its own
            k = await hutch.AsyncSandboxSession(s).fork()
            try:
                assert isinstance(k, hutch.AsyncSandboxSession) and k.id != s.id
                return (await k.execute("cat /workspace/f")).stdout
            finally:
                await k.close()
        assert asyncio.run(afork()) == "kept\n"
    with LocalSandbox(snapshot="py-snap") as c:
        assert c.execute("cat /workspace/f").stdout == "kept\n"
    assert "py-snap" in [x.name for x in hutch.Snapshot.list()]
    assert hutch.Snapshot.get("py-snap").base == "snap-img"
    for x in hutch.Snapshot.list():
        x.delete()
    assert hutch.Snapshot.list() == []


def test_declarative_snapshot(monkeypatch, tmp_path):
    """DeclarativeSnapshot (hutch build): files, a copy (its mode kept), a
    command, env -> a Snapshot whose spawns see them; a failing command is
    SetupError with its output and makes nothing; bad declarations are
    ConfigError; the asyncio form."""
    _small_image(monkeypatch, tmp_path, "ds-img")
    tool = tmp_path / "tool.sh"
    tool.write_text("#!/bin/sh\necho tool\n")
    tool.chmod(0o750)
    snap = (LocalSandbox.template("ds-snap", "ds-img", workdir="/workspace/app")
            .file("/workspace/app/conf", "x = 1\n").copy(tool, "/workspace/app/tool.sh")
            .env({"APP_MODE": "test"}, GREETING="hi")
            .run("echo \"$APP_MODE\" > mode").build())
    assert isinstance(snap, hutch.Snapshot) and snap.name == "ds-snap" and snap.base == "ds-img"
    with snap.spawn() as c:
        assert c.execute("cat conf mode; ./tool.sh; echo $GREETING; stat -c %a tool.sh",
                         cwd="/workspace/app").stdout == "x = 1\ntest\ntool\nhi\n750\n"
    bad = hutch.DeclarativeSnapshot("ds-bad", "ds-img").run("echo out-of-the-fail; exit 4")
    with pytest.raises(hutch.SetupError, match="(?s)out-of-the-fail.*exited 4"):
        bad.build()
    with pytest.raises(ConfigError, match="invalid snapshot"):
        hutch.DeclarativeSnapshot("../x", "ds-img")
    with pytest.raises(ConfigError, match="host-derived root"):
        hutch.DeclarativeSnapshot("ds-host", "host").build()
    with pytest.raises(hutch.SandboxError, match="snapshot rm"):  # a name taken: exit 70
        hutch.DeclarativeSnapshot("ds-snap", "ds-img").build()
    done = asyncio.run(hutch.DeclarativeSnapshot("ds-async", "ds-img").file("f", "a")
                       .build_async())
    assert done.name == "ds-async"
    assert sorted(x.name for x in hutch.Snapshot.list()) == ["ds-async", "ds-snap"]
    for x in hutch.Snapshot.list():
        x.delete()


def test_rollback(monkeypatch, tmp_path):
    """session.rollback(snapshot): a write and a delete undone in place, the
    same session; the asyncio form; the refusals as the client's errors."""
    _small_image(monkeypatch, tmp_path, "rb-img")
    with LocalSandbox(image="rb-img") as s:
        s.execute("echo kept > /workspace/f && echo gone > /workspace/g")
        snap = s.snapshot("rb-snap")
        s.execute("echo changed > /workspace/f && rm /workspace/g && mkdir /workspace/new")
        res = s.rollback(snap)
        assert res["snapshot"] == "rb-snap" and res["changes"] >= 3
        assert s.execute("cat /workspace/f /workspace/g; ls /workspace").stdout == \
            "kept\ngone\nf\ng\n"
        s.execute("rm /workspace/f")

        async def arollback():
            await hutch.AsyncSandboxSession(s).rollback("rb-snap")
        asyncio.run(arollback())
        assert s.execute("cat /workspace/f").stdout == "kept\n"
        with pytest.raises(hutch.HutchNotFoundError, match="no snapshot"):
            s.rollback("nosuch")
        with pytest.raises(ConfigError, match="not a snapshot"):
            s.rollback("rb-img")
        with pytest.raises(ConfigError, match="invalid snapshot"):
            s.rollback("../x")
    with LocalSandbox() as h:  # the host-derived root has no snapshots
        with pytest.raises(ConfigError, match="host-derived root"):
            h.rollback("rb-snap")
    hutch.Snapshot.get("rb-snap").delete()


def test_result_changes():
    """result.changes: what a command changed in the writable mounts
    (docs/api.md, Change lists); None when it changed nothing there."""
    with LocalSandbox() as s:
        r = s.execute("echo hi > /workspace/c.txt")
        if r.changes is None:
            pytest.skip("no change lists on this kernel (fanotify in a user namespace: 6.8)")
        assert [(e["path"], e["size"]) for e in r.changes["created"]] == [("/workspace/c.txt", 3)]
        assert s.execute("cat /workspace/c.txt").changes is None
        r = s.execute("rm /workspace/c.txt")
        assert [e["path"] for e in r.changes["deleted"]] == ["/workspace/c.txt"]
        p = s.start_process("echo bg > /tmp/bg")
        info = s.wait_process(p.id, timeout=60)
        assert [e["path"] for e in info.changes["created"]] == ["/tmp/bg"]


def test_change_lists_off():
    """change_lists=False (--change-lists off): no result carries changes,
    and the sandbox's config says so."""
    with LocalSandbox(change_lists=False) as s:
        assert s.status()["config"]["change_lists"] is False
        assert s.execute("echo hi > /workspace/c.txt").changes is None
    for bad in (0, "off", None):
        with pytest.raises(ConfigError):
            LocalSandbox(change_lists=bad)


def test_diff():
    """session.diff(): since the start, since a journal line's command; its
    refusals as SandboxError, a bad since as ConfigError."""
    with LocalSandbox() as s:
        if s.execute("echo a > /workspace/a; echo t > /tmp/t").changes is None:
            pytest.skip("no change lists on this kernel (fanotify in a user namespace: 6.8)")
        s.execute("rm /tmp/t; echo b >> /workspace/a")
        seq = [j["seq"] for j in s.journal() if j.get("command") == "rm /tmp/t; echo b >> /workspace/a"][0]
        d = s.diff()
        assert [(e["path"], e["size"]) for e in d["created"]] == [("/workspace/a", 4)]
        assert d["deleted"] == [] and d["modified"] == [] and d["complete"]
        d = s.diff(seq)
        assert [e["path"] for e in d["modified"]] == ["/workspace/a"]
        assert [e["path"] for e in d["deleted"]] == ["/tmp/t"]
        with pytest.raises(hutch.SandboxError):
            s.diff("no-such-snapshot")
        with pytest.raises(hutch.SandboxError):
            s.diff(10 ** 6)
        with pytest.raises(ConfigError):
            s.diff(1.5)
        p = s.start_process("echo bg > /workspace/bg; read x", stdin=True)
        deadline = time.monotonic() + 20  # bounded: it writes before it reads
        while s.execute("test -e /workspace/bg").exit_code != 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert [e["path"] for e in s.diff(process=p)["created"]] == ["/workspace/bg"]
        with pytest.raises(hutch.SandboxError):
            s.diff(process="p99")
        with pytest.raises(ConfigError):
            s.diff(1, process=p)


def test_net_log(own_net):
    """session.net_log(): a refused connection of network allow, with its
    rule and command (and result.egress's count); paging by since; async;
    bad arguments."""
    probe = ("python3 -c 'import socket; s = socket.create_connection((\"10.0.0.9\", 443), 10); "
             "s.sendall(b\"GET / HTTP/1.0\\r\\n\\r\\n\"); print(s.recv(10))'")
    with LocalSandbox(network=Network.allow(hosts=("pypi.org",))) as s:
        assert s.net_log() == {"mode": "allow", "dropped": 0, "next": 0, "records": []}
        r = s.execute(probe)
        # result.egress: the command's connections (refused before it printed)
        assert (r.egress["allowed"], r.egress["refused"]) == (0, 1), r.egress
        assert s.execute("true").egress is None
        log = s.net_log()
        assert log["next"] == 1 and len(log["records"]) == 1, log
        rec = log["records"][0]
        assert (rec["verdict"], rec["rule"], rec["address"]) == ("refused", "plain_http",
                                                                  "10.0.0.9:443"), rec
        assert rec["owner"] == "time" and "10.0.0.9" in rec["commands"][0]["command"], rec
        assert s.net_log(since=1)["records"] == []
        assert s.net_log(since=0, limit=1)["records"] == [rec]
        for bad in ({"since": -1}, {"since": "0"}, {"since": True}, {"limit": 0},
                    {"limit": 1025}):
            with pytest.raises(ConfigError):
                s.net_log(**bad)

    async def main():
        async with LocalSandbox(network=Network.allow(hosts=("pypi.org",))) as a:
            return await a.net_log()

    assert asyncio.run(main())["records"] == []
