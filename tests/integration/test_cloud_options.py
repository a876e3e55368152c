"""The cloud sandbox's (MistralSandbox's) options beyond the network mode
(issue 27): access= ("files": files only, no commands; "none": neither).

Each is an option of create (CLI), of the API's claim and of the Python
client (clients/python/tests), enforced by the sandbox itself, so every way
in is refused alike: the native API, the executor's contract and the CLI.
"""
import pytest

from conftest import api


def test_access_files_reads_and_writes_files_and_runs_nothing(hutch):
    sb = hutch.create("--access", "files", "--on-create", "touch /tmp/hook-ran")
    try:
        sock = sb.info["socket"]
        assert sb.status()["config"]["access"] == "files"
        # files: native and executor
        status, res = api(sock, "POST", "/v1/write_file", {"path": "/tmp/f", "content": "x"})
        assert status == 200, res
        status, res = api(sock, "POST", "/read_file", {"path": "/tmp/f"})
        assert (status, res) == (200, {"content": "x"})
        # the hook (the creator's own, at creation) ran
        status, res = api(sock, "POST", "/read_file", {"path": "/tmp/hook-ran"})
        assert (status, res) == (200, {}), res
        # commands: refused on every route, with the reason
        for path in ("/v1/run", "/v1/run_streaming", "/v1/start_process", "/exec"):
            status, res = api(sock, "POST", path, {"cmd": "touch /tmp/ran"})
            assert status == 403, (path, res)
            assert res["error"]["code"] == "access_denied"
            assert 'access "files"' in res["error"]["message"]
        for path in ("/run", "/run_streaming", "/start_process"):
            status, text = api(sock, "POST", path, {"cmd": "touch /tmp/ran"})
            assert status == 403 and 'access "files"' in text, (path, text)
        r = hutch("exec", sb.id, "--", "touch", "/tmp/ran")
        assert r.returncode != 0 and b'access "files"' in r.stderr
        status, res = api(sock, "POST", "/read_file", {"path": "/tmp/ran"})
        assert status == 200 and "no such file" in res["error"]
    finally:
        sb.rm()


def test_access_none_refuses_files_too(hutch):
    sb = hutch.create("--access", "none")
    try:
        sock = sb.info["socket"]
        for path in ("/v1/write_file", "/v1/read_file", "/v1/list_dir"):
            status, res = api(sock, "POST", path, {"path": "/tmp/f", "content": "x"})
            assert status == 403 and res["error"]["code"] == "access_denied", (path, res)
            assert 'access "none"' in res["error"]["message"]
        status, text = api(sock, "POST", "/write_file", {"path": "/tmp/f", "content": "x"})
        assert status == 403 and 'access "none"' in text
        status, res = api(sock, "PUT", "/files?path=/tmp/f", raw=b"x")
        assert status == 403
        status, res = api(sock, "POST", "/v1/run", {"cmd": "true"})
        assert status == 403
        # what is not a command or a file is still served
        assert api(sock, "GET", "/v1/status")[0] == 200
    finally:
        sb.rm()


@pytest.mark.parametrize("value", ["", "read", "FILES", "all,files"])
def test_access_invalid_is_refused_at_creation(hutch, value):
    r = hutch("create", "--access", value)
    assert r.returncode == 64 and b"invalid --access" in r.stderr, r.stderr
