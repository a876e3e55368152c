# SPDX-License-Identifier: Apache-2.0
"""NUL bytes and duplicate keys are refused, never silently cut or dropped
(issue 18 #6): each is a 400 that names the field, and nothing runs or is
written."""
import json

import pytest

from conftest import raw_http


def post_raw(sb, path, body: bytes):
    data = raw_http(sb.sock, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: sandbox\r\n"
                    b"Content-Type: application/json\r\nConnection: close\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    head, _, text = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(text)


def assert_refused(status, res, *words):
    assert status == 400, (status, res)
    assert res["error"]["code"] == "invalid_request", res
    for w in words:
        assert w in res["error"]["message"], res


def listing(sb):
    return sb.sh("ls -A /workspace")


@pytest.mark.parametrize("path,body,field", [
    ("/v1/write_file", {"path": "safe.txt\u0000/../x.py", "content": "x"}, "'path'"),
    ("/v1/write_file", {"path": "safe.txt", "content": "a\u0000b"}, "'content'"),
    ("/v1/run", {"cmd": "echo A\u0000; touch /workspace/pwned"}, "'cmd'"),
    ("/v1/run", {"argv": ["touch", "/workspace/pwned\u0000x"]}, "'argv'"),
    ("/v1/run", {"cmd": "touch /workspace/pwned", "env": {"A": "1\u0000"}}, "'env'"),
    ("/v1/run", {"cmd": "touch /workspace/pwned", "env": {"A\u0000B": "1"}}, "'env'"),
    ("/v1/start_process", {"cmd": "touch /workspace/pwned\u0000"}, "'cmd'"),
    ("/v1/make_dir", {"path": "d\u0000x"}, "'path'"),
    ("/v1/kill_process", {"id": "p1\u0000"}, "'id'"),
])
def test_nul_in_a_field_is_refused(sandbox, path, body, field):
    text = json.dumps(body).encode()
    assert b"\\u0000" in text
    status, res = post_raw(sandbox, path, text)
    assert_refused(status, res, field, "NUL")
    assert listing(sandbox) == ""
    # A raw NUL byte in the text likewise.
    status, res = post_raw(sandbox, path, text.replace(b"\\u0000", b"\x00"))
    assert_refused(status, res, field, "NUL")
    assert listing(sandbox) == ""


def test_an_escaped_backslash_before_u0000_is_text(sandbox):
    # "\\u0000" is a backslash and "u0000": no NUL, served as usual.
    status, res = post_raw(sandbox, "/v1/run", json.dumps({"cmd": "printf '%s' '\\u0000'"}).encode())
    assert status == 200 and res["stdout"] == "\\u0000", res


@pytest.mark.parametrize("path,body,words", [
    ("/v1/run", b'{"cmd": "echo 1", "cmd": "touch /workspace/pwned"}', ["duplicate field 'cmd'"]),
    ("/v1/run", b'{"cmd": "touch /workspace/pwned", "env": {"A": "1", "B": "2", "A": "3"}}',
     ["duplicate key 'A' in 'env'"]),
    ("/v1/write_file", b'{"path": "a.txt", "content": "x", "path": "b.txt"}',
     ["duplicate field 'path'"]),
    ("/v1/start_process", b'{"timeout": 5, "cmd": "true", "timeout": 1}', ["duplicate field 'timeout'"]),
    ("/v1/kill_process", b'{"id": "p1", "id": "p2"}', ["duplicate field 'id'"]),
])
def test_duplicate_keys_are_refused(sandbox, path, body, words):
    status, res = post_raw(sandbox, path, body)
    assert_refused(status, res, *words)
    assert listing(sandbox) == ""


@pytest.mark.parametrize("method", ["GET", "PUT"])
@pytest.mark.parametrize("query,words", [
    ("path=safe.txt%00.png", ["'path'", "NUL"]),
    ("path=safe.txt&mode=644%00", ["'mode'", "NUL"]),
    ("path=safe.txt&path=other.txt", ["'path' given twice"]),
])
def test_bad_query_arguments_are_refused(sandbox, method, query, words):
    sandbox.sh("echo secret > /workspace/safe.txt")
    body = "Content-Length: 3\r\n\r\nnew" if method == "PUT" else "\r\n"
    data = raw_http(sandbox.sock, f"{method} /files?{query} HTTP/1.1\r\nHost: sandbox\r\n"
                    f"Connection: close\r\n{body}".encode())
    head, _, text = data.partition(b"\r\n\r\n")
    assert int(head.split()[1]) == 400, data
    res = json.loads(text)
    assert_refused(400, res, *words)
    assert sandbox.sh("cat /workspace/safe.txt") == "secret\n"
    assert listing(sandbox) == "safe.txt\n"
