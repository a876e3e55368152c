"""The cloud sandbox's (MistralSandbox's) options beyond the network mode
(issue 27): access= ("files": files only, no commands; "none": neither) and
secrets= (NAME=VALUE in every command's environment, the value never
shown nor written by hutch).

Each is an option of create (CLI), of the API's claim and of the Python
client (clients/python/tests), enforced by the sandbox itself, so every way
in is refused alike: the native API, the executor's contract and the CLI.
"""
import json
import os

import pytest

from conftest import api, files_holding


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
        # 403 access_denied is the class not_capable: 69 (was 70)
        assert r.returncode == 69 and b'access "files"' in r.stderr, r
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


SECRET = "s3cr3t-\u00e9-" + "v" * 40


def test_secrets_reach_commands_and_nothing_else(hutch, tmp_path):
    script = tmp_path / "setup.sh"
    script.write_text('printf %s "$TOKEN" > /tmp/setup-saw\n')
    env = {"HUTCH_TEST_TOKEN": SECRET}
    r = hutch("create", "--json", "--secret", "TOKEN=@env:HUTCH_TEST_TOKEN",
              "--secret", "PLAIN=abc", "--setup-script", str(script),
              "--on-create", 'printf %s "$PLAIN" > /tmp/hook-saw', env=env)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    sid = info["id"]
    try:
        assert info["config"]["secrets"] == ["TOKEN", "PLAIN"]
        # every way a command starts: native /run, /exec (CLI), the executor
        res = api(info["socket"], "POST", "/v1/run", {"cmd": 'printf %s "$TOKEN"'})[1]
        assert res["stdout"] == SECRET
        r = hutch("exec", sid, "--", "sh", "-c", 'printf %s "$PLAIN"; cat /tmp/setup-saw')
        assert r.stdout.decode() == "abc" + SECRET
        assert api(info["socket"], "POST", "/run", {"cmd": "cat /tmp/hook-saw"})[1]["stdout"] == "abc"
        # a request's own env still wins over it
        res = api(info["socket"], "POST", "/v1/run",
                  {"cmd": 'printf %s "$PLAIN"', "env": {"PLAIN": "mine"}})[1]
        assert res["stdout"] == "mine"
        # never shown: inspect, status, ls; never in a file hutch writes
        for args in (("inspect", sid), ("ls", "--json"), ("events", sid)):
            out = hutch(*args).stdout
            assert SECRET.encode() not in out, args
        assert SECRET not in json.dumps(api(info["socket"], "GET", "/v1/status")[1])
        assert files_holding(str(hutch.rtdir), SECRET.encode()) == []
    finally:
        hutch("rm", sid)
    assert files_holding(str(hutch.rtdir), SECRET.encode()) == []


@pytest.mark.parametrize("spec,msg", [
    ("1BAD=x", b"invalid secret name '1BAD'"),
    ("A-B=x", b"invalid secret name 'A-B'"),
    ("NOVALUE", b"give NAME=VALUE"),
    ("T=@env:HUTCH_SURELY_UNSET_VAR", b"secret 'T': environment variable 'HUTCH_SURELY_UNSET_VAR'"),
    ("T=@file:/nonexistent/x", b"secret 'T': open '/nonexistent/x'"),
    ("T=@nope:x", b"unknown source '@nope:x'"),
])
def test_secret_errors_name_the_secret_never_the_value(hutch, spec, msg):
    r = hutch("create", "--secret", spec)
    assert r.returncode == 64 and msg in r.stderr, r.stderr


def test_secret_given_twice_is_refused(hutch):
    r = hutch("create", "--secret", "A=1", "--secret", "A=2")
    assert r.returncode == 64 and b"secret 'A' is given twice" in r.stderr, r.stderr
