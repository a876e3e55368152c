# SPDX-License-Identifier: Apache-2.0
"""hutch diff (issue 29): what changed in /workspace, /home/appuser and /tmp
over a span (since the sandbox started, since the start of a journal line's
command, since a snapshot of it), checked against the ground truth of
test_changes (a tree walk with SHA-256 before and after), on every root of
the matrix; and each way it refuses."""
import json

import pytest

from conftest import wait_until
from test_changes import sandbox, snap, truth

pytestmark = pytest.mark.usefixtures("root")


def as_sets(ch):
    assert ch["omitted"] == 0 and ch["complete"], ch
    created = {e["path"]: e["size"] if e["type"] != "dir" else 0 for e in ch["created"]}
    modified = {e["path"]: e["size"] if e["type"] != "dir" else 0 for e in ch["modified"]}
    return created, modified, {e["path"] for e in ch["deleted"]}


def diff(hutch, sid, *args):
    r = hutch("diff", "--json", sid, *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["changes"]


def seq_of(hutch, sid, command):
    r = hutch("journal", sid, "--json")
    lines = [json.loads(x) for x in r.stdout.decode().splitlines()]
    return [j["seq"] for j in lines if j.get("command") == command][-1]


FIRST = ("echo a > /workspace/a; echo b > /workspace/b; mkdir -p /tmp/d/e; echo f > /tmp/d/e/f; "
         "echo h > /home/appuser/h; ln -s a /workspace/l; echo gone > /tmp/gone")
SECOND = ("echo more >> /workspace/a; rm -r /tmp/d; chmod 600 /home/appuser/h; "
          "echo new > /workspace/t && mv /workspace/t /workspace/b; ln /workspace/a /workspace/hl; "
          "mkdir /workspace/n; echo n > /workspace/n/x; rm /tmp/gone; echo back > /tmp/gone")


def test_diff_matches_the_ground_truth(hutch, root):
    sb = sandbox(hutch, root)
    start = snap(sb)  # the probe of sandbox() left nothing: the start's tree
    assert sb.run(FIRST)["exit_code"] == 0
    middle = snap(sb)
    assert sb.run(SECOND)["exit_code"] == 0
    end = snap(sb)
    assert as_sets(diff(hutch, sb.id)) == truth(start, end)
    seq = seq_of(hutch, sb.id, SECOND)
    assert as_sets(diff(hutch, sb.id, "--since", str(seq))) == truth(middle, end)
    assert as_sets(diff(hutch, sb.id, "--since", str(seq_of(hutch, sb.id, FIRST)))) == \
        truth(start, end)
    # the API's form, and the CLI's lines
    st, res = sb.api("POST", "/v1/diff", {"since_command": seq})
    assert st == 200 and as_sets(res["changes"]) == truth(middle, end), res
    out = hutch("diff", sb.id, "--since", str(seq)).stdout.decode()
    assert "~ /home/appuser/h  file 2 (mode)" in out and "- /tmp/d/e/f  file 2" in out, out
    assert sb.rm().returncode == 0


def test_diff_since_a_snapshot(hutch, root):
    root.skip_unless(root.name == "image", "snapshots of the test's own store only (the "
                     "default image's store is shared)")
    sb = sandbox(hutch, root)
    assert sb.run(FIRST)["exit_code"] == 0
    r = hutch("snapshot", sb.id, "difftest-snap")
    assert r.returncode == 0, r.stderr
    try:
        before = snap(sb)
        assert sb.run(SECOND)["exit_code"] == 0
        after = snap(sb)
        assert as_sets(diff(hutch, sb.id, "--since", "difftest-snap")) == truth(before, after)
        assert sb.rm().returncode == 0
    finally:
        hutch("rm", sb.id)
        hutch("snapshot", "rm", "difftest-snap")


def test_diff_refusals(hutch, root):
    sb = sandbox(hutch, root)
    assert sb.run("echo x > /workspace/x")["exit_code"] == 0
    for body, status, code in (
            ({"since_command": 999}, 404, "not_found"),
            ({"since_snapshot": "no-such-snap"}, 404, "not_found"),
            ({"since_command": 1, "since_snapshot": "x"}, 400, "invalid_request"),
            ({"since_command": "1"}, 400, "invalid_request"),
            ({"since_command": -1}, 400, "invalid_request"),
            ({"since": 1}, 400, "invalid_request"),
            ([], 400, "invalid_json")):
        st, res = sb.api("POST", "/v1/diff", body)
        assert (st, res["error"]["code"]) == (status, code), (body, res)
    # a journal line that started no command: the journal's own start line
    st, res = sb.api("POST", "/v1/diff", {"since_command": 0})
    assert st == 404, res
    # The CLI: each refusal's exit code is its class's (docs/errors.md):
    # a 404 is not found (65), never "other failure" (70).
    for args, code, said in (
            (("--since", "999"), 65, b"started no command"),
            (("--since", "0"), 65, b"started no command"),
            (("--since", "no-such-snap"), 65, b"no snapshot 'no-such-snap'"),
            (("--since", ""), 64, b"empty --since")):
        r = hutch("diff", sb.id, *args)
        assert (r.returncode, said in r.stderr) == (code, True), (args, r)
    for args, code in ((("diff",), 64), (("diff", "zz"), 64), (("diff", "0123456789ab"), 65),
                       (("diff", sb.id, "extra"), 64)):
        r = hutch(*args)
        assert r.returncode == code, (args, r)
    assert sb.rm().returncode == 0
    r = hutch("diff", sb.id)
    assert r.returncode == 66 and b"was deleted" in r.stderr, r  # its tombstone
    sb = root.create(hutch, "--change-lists", "off")
    st, res = sb.api("POST", "/v1/diff", {})
    assert (st, res["error"]["code"]) == (409, "change_lists_off"), res
    r = hutch("diff", sb.id)
    assert r.returncode == 70 and b"change-lists off" in r.stderr, r  # a conflict
    assert sb.rm().returncode == 0
    sb = root.create(hutch, "--journal-max", "0")
    st, res = sb.api("POST", "/v1/diff", {"since_command": 1})
    assert (st, res["error"]["code"]) == (409, "no_journal"), res
    r = hutch("diff", sb.id, "--since", "1")
    assert r.returncode == 70, r  # a conflict
    assert sb.rm().returncode == 0


def test_diff_since_a_background_process(hutch, root):
    """process.changes while it runs (issue 29): what changed since a
    background process started, asked while it waits on its stdin; its own
    list at its exit in its record."""
    root.skip_unless(root.name == "host", "the span is the same on every root (test_changes)")
    sb = sandbox(hutch, root)
    st, p = sb.api("POST", "/v1/start_process",
                   {"cmd": "echo a > /workspace/bg1; read x; echo b > /workspace/bg2",
                    "stdin": True})
    assert st == 200, p
    assert wait_until(lambda: sb.run("test -e /workspace/bg1")["exit_code"] == 0, 20)
    r = hutch("diff", "--json", sb.id, "--process", "p1")
    assert r.returncode == 0, r.stderr
    created = {e["path"] for e in json.loads(r.stdout)["changes"]["created"]}
    assert created == {"/workspace/bg1"}, created
    st, res = sb.api("POST", "/v1/diff", {"since_process": p["uuid"]})
    assert st == 200 and {e["path"] for e in res["changes"]["created"]} == created, res
    st, res = sb.api("POST", "/process_stdin?id=p1&eof=true", raw=b"\n")
    assert st == 200, res

    def record():
        st, ps = sb.api("GET", "/v1/list_processes")
        return [x for x in ps["processes"] if x["id"] == "p1" and x["status"] != "running"]
    assert wait_until(record, 20)
    final = {e["path"] for e in record()[0]["changes"]["created"]}
    assert final == {"/workspace/bg1", "/workspace/bg2"}, record()
    created = {e["path"] for e in diff(hutch, sb.id, "--process", "p1")["created"]}
    assert created == final
    for args, code in ((("--process", "p9"), 65), (("--process", ""), 64),
                       (("--process", "p1", "--since", "1"), 64)):
        r = hutch("diff", sb.id, *args)
        assert r.returncode == code, (args, r)
    st, res = sb.api("POST", "/v1/diff", {"since_process": "p1", "since_command": 1})
    assert st == 400, res
    assert sb.rm().returncode == 0
