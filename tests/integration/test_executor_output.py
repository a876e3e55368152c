"""The executor contract's /run keeps all output, and a key given twice
means what Go's encoding/json makes of it (issue 27).

The cloud executor (Go) answers /run with everything the command wrote;
hutch keeps it whole up to the sandbox's executor_max_output_bytes per
stream and answers a 500 naming that option beyond it, never a cut. A body
with a key twice is decoded as Go decodes it: the last one wins, objects
merge, two types under one name is 400. Driven over the unix socket, where
the contract is served at its unprefixed paths.
"""
import pytest

from conftest import api

TEN_MB = 10 * 1000 * 1000


def run(sb, body=None, raw=None):
    return api(sb.info["socket"], "POST", "/run", body, raw=raw, timeout=120)


def test_ten_megabytes_of_stdout_arrive_whole(sandbox):
    status, res = run(sandbox, {"cmd": "head -c %d /dev/zero | tr '\\0' a; echo end >&2" % TEN_MB})
    assert status == 200, res if isinstance(res, str) else res.keys()
    assert res["stdout"] == "a" * TEN_MB
    assert res["stderr"] == "end\n" and res["code"] == 0 and "error" not in res


def test_output_over_the_limit_is_an_error_naming_it(hutch):
    sb = hutch.create("--executor-max-output", "1000")
    try:
        assert sb.status()["config"]["executor_max_output_bytes"] == 1000
        # exactly the limit: whole
        status, res = run(sb, {"cmd": "head -c 1000 /dev/zero | tr '\\0' b"})
        assert status == 200 and res["stdout"] == "b" * 1000
        # one byte more, on stderr: the error names the option and the stream,
        # and the command was killed (it would otherwise never end)
        status, text = run(sb, {"cmd": "head -c 1001 /dev/zero >&2; touch /tmp/ran-on; "
                                       "exec sleep 1000"})
        assert status == 500 and isinstance(text, str)
        assert "executor_max_output_bytes" in text and "1000 bytes to stderr" in text
        assert "--executor-max-output" in text
        status, text = run(sb, {"cmd": "yes"})
        assert status == 500 and "to stdout" in text
        assert sb.run("pgrep -x yes || pgrep -x sleep || echo none")["stdout"] == "none\n"
        # the native /run keeps its own bound and flag, untouched
        res = sb.run("head -c 5000 /dev/zero", max_output_bytes=10)
        assert res["stdout_truncated"] is True
    finally:
        sb.rm()


@pytest.mark.parametrize("value", ["0", "1073741825", "1k", "-1"])
def test_executor_max_output_invalid(hutch, value):
    r = hutch("create", "--executor-max-output", value)
    assert r.returncode == 64, r.stderr
    assert b"executor-max-output" in r.stderr or b"executor_max_output_bytes" in r.stderr


def test_duplicate_keys_last_wins_as_go(sandbox):
    status, res = run(sandbox, raw=b'{"cmd": "echo first", "cmd": "echo last"}')
    assert (status, res["stdout"]) == (200, "last\n")
    # field names match without case: still one field, the last wins
    status, res = run(sandbox, raw=b'{"cmd": "echo a", "CMD": "echo b", "Cmd": "echo c"}')
    assert (status, res["stdout"]) == (200, "c\n")
    # null resets the field, a later value sets it again
    status, res = run(sandbox, raw=b'{"cmd": "echo a", "cmd": null}')
    assert (status, res) == (200, {"stdout": "", "stderr": "", "code": 0})
    # a map twice: Go fills the one it made, keys within it last wins
    status, res = run(sandbox, raw=b'{"cmd": "echo $A$B$C", "env": {"A": "1", "B": "x"}, '
                                   b'"env": {"B": "2"}, "env": {"C": "3", "C": "4"}}')
    assert (status, res["stdout"]) == (200, "124\n")
    # unknown fields are ignored, even twice with two types
    status, res = run(sandbox, raw=b'{"x": 1, "x": "y", "cmd": "echo ok"}')
    assert (status, res["stdout"]) == (200, "ok\n")


@pytest.mark.parametrize("raw", [b'{"cmd": 1, "cmd": "echo x"}', b'{"cmd": "echo x", "cmd": []}',
                                 b'{"env": "A", "env": {"A": "1"}, "cmd": "true"}',
                                 b'{"env": {"A": 1, "A": "2"}, "cmd": "true"}'])
def test_duplicate_keys_of_two_types_are_400(sandbox, raw):
    for path in ("/run", "/run_streaming", "/start_process"):
        status, text = api(sandbox.info["socket"], "POST", path, raw=raw)
        assert (status, text) == (400, "Invalid request\n"), (path, raw)


def test_duplicate_keys_on_every_executor_endpoint(sandbox):
    sock = sandbox.info["socket"]
    status, res = api(sock, "POST", "/write_file",
                      raw=b'{"path": "/tmp/a", "path": "/tmp/b", "content": "x", "content": "y"}')
    assert (status, res) == (200, {"success": True})
    status, res = api(sock, "POST", "/read_file", raw=b'{"path": "/tmp/nope", "PATH": "/tmp/b"}')
    assert (status, res) == (200, {"content": "y"})
    assert sandbox.run("test -e /tmp/a")["exit_code"] == 1
    status, res = api(sock, "POST", "/kill_process", raw=b'{"id": "a", "id": "b"}')
    assert (status, res["error"]) == (400, "process not found: b")
    status, res = api(sock, "POST", "/bind_port", raw=b'{"port": "1", "port": "2"}')
    assert (status, res["port"], res["sandbox_port"]) == (200, "2", 2), res
    status, res = api(sock, "POST", "/unbind_port", raw=b'{"port": "1", "port": "2"}')
    assert (status, res["success"]) == (200, True), res
    status, text = api(sock, "POST", "/bind_port", raw=b'{"port": 1, "port": "2"}')
    assert (status, text) == (400, "Invalid request\n")
    # the native API refuses a key twice, naming it
    status, res = api(sock, "POST", "/v1/run", raw=b'{"cmd": "true", "cmd": "false"}')
    assert status == 400 and "duplicate field 'cmd'" in res["error"]["message"]

