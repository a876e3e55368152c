# SPDX-License-Identifier: Apache-2.0
"""hutch set-timeout and POST /timeout: the sandbox ends that long from now,
later or sooner than its TTL said; every refusal names the fix."""
import json
import os
import time

import pytest

from conftest import cgroups_gone, wait_until

MAX = 366 * 86400


def expires_unix(hutch, sid):
    with open(os.path.join(hutch.rtdir, sid, "state.json")) as f:
        return json.load(f)["expires_at"]


def test_set_timeout_extends_past_the_ttl(hutch):
    sb = hutch.create("--ttl", "2")
    t0 = time.time()
    r = hutch("set-timeout", sb.id, "60", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["id"] == sb.id and abs(out["expires_at_unix"] - (t0 + 60)) <= 2, out
    assert expires_unix(hutch, sb.id) == out["expires_at_unix"]
    ls = json.loads(hutch("ls", "--json").stdout)
    assert [s["expires_at_unix"] for s in ls if s["id"] == sb.id] == [out["expires_at_unix"]]
    # Past the TTL it was created with, it still runs.
    time.sleep(max(0, t0 + 3 - time.time()))
    r = hutch("exec", sb.id, "--", "echo", "alive")
    assert r.returncode == 0 and r.stdout == b"alive\n", r.stderr
    assert sb.rm().returncode == 0


def test_set_timeout_shortens_and_the_sandbox_ends(hutch):
    sb = hutch.create()  # 24 h TTL
    r = hutch("set-timeout", sb.id, "1")
    assert r.returncode == 0 and r.stdout.decode().endswith("Z\n"), r
    assert wait_until(lambda: sb.id not in hutch.ids(), timeout=10)
    r = hutch("exec", sb.id, "--", "true")
    assert r.returncode == 66 and b"expired" in r.stderr, r.stderr
    assert cgroups_gone(sb.id)


@pytest.mark.parametrize("bad", ["0", "1.5", "abc", str(MAX + 1), ""])
def test_set_timeout_refuses_bad_seconds(hutch, bad):
    sb = hutch.create()
    before = expires_unix(hutch, sb.id)
    r = hutch("set-timeout", sb.id, bad)
    assert r.returncode == 64, r
    assert f"invalid timeout '{bad}': give whole seconds from 1 to {MAX}" in r.stderr.decode()
    assert expires_unix(hutch, sb.id) == before
    assert sb.rm().returncode == 0


def test_set_timeout_usage_and_unknown_sandbox(hutch):
    r = hutch("set-timeout")
    assert r.returncode == 64 and b"missing sandbox id: hutch set-timeout ID SECONDS" in r.stderr
    r = hutch("set-timeout", "0123456789ab")
    assert r.returncode == 64 and b"missing seconds" in r.stderr, r.stderr
    r = hutch("set-timeout", "0123456789ab", "10")
    assert r.returncode == 65, r.stderr


@pytest.mark.parametrize("body,msg", [
    ({}, "missing 'timeout_seconds'"),
    ({"timeout_seconds": 0}, "'timeout_seconds' must be whole seconds"),
    ({"timeout_seconds": 1.5}, "'timeout_seconds' must be whole seconds"),
    ({"timeout_seconds": "60"}, "'timeout_seconds' must be whole seconds"),
    ({"timeout_seconds": MAX + 1}, "'timeout_seconds' must be whole seconds"),
    ({"timeout_seconds": 60, "ttl": 5}, "unknown field 'ttl'"),
    ([60], "must be a JSON object"),
])
def test_timeout_api_refusals(hutch, body, msg):
    sb = hutch.create()
    before = expires_unix(hutch, sb.id)
    status, res = sb.api("POST", "/timeout", body)
    assert status == 400, res
    assert msg in res["error"]["message"], res
    assert expires_unix(hutch, sb.id) == before
    status, res = sb.api("POST", "/timeout", raw=b'{"timeout_seconds": 60, "timeout_seconds": 1}')
    assert status == 400 and "duplicate field 'timeout_seconds'" in res["error"]["message"], res
    assert sb.rm().returncode == 0
