# SPDX-License-Identifier: Apache-2.0
"""docs/sandbox.schema.json: one schema for a sandbox, checked against
every command that prints one as JSON and against GET /status."""
import json
import os

import pytest

from conftest import REPO, api

jsonschema = pytest.importorskip("jsonschema", reason="python3-jsonschema (scripts/install-deps --test)")

SCHEMA = json.load(open(os.path.join(REPO, "docs", "sandbox.schema.json")))


def check(obj, part=None):
    schema = SCHEMA if part is None else {"$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{part}"}
    jsonschema.Draft202012Validator(schema).validate(obj)


def test_every_sandbox_json_has_the_one_schema(hutch):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    created = json.loads(hutch("create", "--json", "--description", "schema").stdout)
    check(created, "cli")
    sid = created["id"]
    listed = json.loads(hutch("ls", "--json").stdout)
    for s in listed:
        check(s, "cli")
    inspected = json.loads(hutch("inspect", sid).stdout)
    check(inspected, "cli")
    status, body = api(created["socket"], "GET", "/status")
    assert status == 200
    check(body, "full")
    assert body["status"] == body["state"] == "running"     # state: the older alias
    # The same sandbox, the same keys and values wherever it is printed.
    for key in ("id", "status", "root", "image", "created_at", "expires_at", "network"):
        assert created[key] == listed[0][key] == inspected[key], key
    for s in json.loads(hutch("stats", "--json", "--no-stream", sid).stdout):
        check(s)
    # stats --format json: the same objects, one line each
    for line in hutch("stats", "--format", "json", "--no-stream", sid).stdout.splitlines():
        check(json.loads(line))
    for line in hutch("ls", "--format", "json").stdout.splitlines():
        check(json.loads(line), "cli")
    r = json.loads(hutch("exec", "--json", sid, "--", "true").stdout)
    check(r["sandbox"])
    assert r["sandbox"]["id"] == r["sandbox_id"] == sid          # sandbox_id: the older alias
    hutch("rm", sid)
    ended = hutch("inspect", sid)
    assert ended.returncode == 66
    check(json.loads(ended.stdout))
    r = json.loads(hutch("run", "--json", "--", "true").stdout)
    check(r["sandbox"])


def test_create_json_and_inspect_say_the_same_network_and_root(hutch):
    """create --json writes its answer without libcjson (cli/sandbox-json.c,
    config.network parsed there as for a state.json without a network
    object); inspect of the live sandbox asks its supervisor (GET /status:
    each host with its port, and counters). The same mode, hosts and root,
    checked on an allow-list, where the first test's default has no
    hosts."""
    created = json.loads(hutch("create", "--json", "--network",
                               "allow:a.example,b.example").stdout)
    check(created, "cli")
    assert created["network"] == {"mode": "allow", "hosts": ["a.example", "b.example"],
                                  "host_ports": []}
    live = json.loads(hutch("inspect", created["id"]).stdout)
    assert live["network"]["mode"] == "allow"
    assert [h.rsplit(":", 1)[0] for h in live["network"]["hosts"]] == ["a.example", "b.example"]
    assert live["network"]["host_ports"] == []
    for key in ("root", "image", "created_at", "expires_at", "status"):
        assert created[key] == live[key], key
    hutch("rm", created["id"])


@pytest.mark.parametrize("bad", [
    {"id": "0123456789ab", "network": "none"},              # a string where the object goes
    {"id": "0123456789ab", "status": "exited"},             # a command's status, not a sandbox's
    {"id": "x"},
    {"id": "0123456789ab", "root": "host", "image": 5},
])
def test_the_schema_refuses_the_old_mixups(bad):
    with pytest.raises(jsonschema.ValidationError):
        check(bad)
