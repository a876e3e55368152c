# SPDX-License-Identifier: Apache-2.0
"""hutch replay (issue 29): a session's journal run again into a fresh
sandbox gives the same /workspace (a tree hash of paths, types, modes,
sizes, link targets and contents), which is the journal's test of
completeness; what a journal does not hold is named line by line (exit
2); a broken chain is refused before anything runs (exit 1, naming the
line)."""
import base64
import json
import os
import shutil
import tempfile

from conftest import wait_until

USAGE, NOT_FOUND, BROKEN, DIFFERS = 64, 65, 1, 2

TREE_HASH = ("cd /workspace && { find . -printf '%p %y %m %s %l\\n' | LC_ALL=C sort; "
             "find . -type f | LC_ALL=C sort | xargs -r sha256sum; } | sha256sum")


def journal(hutch, sid):
    r = hutch("journal", sid, "--json")
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in r.stdout.decode().splitlines()]


def ended(hutch, sid):
    """rm returns at DELETE's answer; the end line comes after it."""
    def done():
        r = hutch("journal", sid, "--verify")
        return r.returncode == 0 and b"ended" in r.stdout
    assert wait_until(done, 20), hutch("journal", sid, "--verify").stdout


def session(hutch):
    """Commands that write, rename, link, chmod and delete; files written,
    made and deleted through the API; stdin and cwd of /v1/run; bash -c;
    a background process that writes and ends by itself."""
    sb = hutch.create()
    assert hutch("exec", sb.id, "--", "sh", "-c",
                 "mkdir -p d/e && echo one > d/e/f && echo two > g && chmod 600 g && "
                 "ln -s g h && ln g g2 && mv d/e/f d/moved").returncode == 0
    assert hutch("exec", sb.id, "--", "python3", "-c",
                 "import mmap, os\n"
                 "fd = os.open('m', os.O_RDWR | os.O_CREAT, 0o640); os.ftruncate(fd, 4096)\n"
                 "mm = mmap.mmap(fd, 4096); mm[:5] = b'mmap!'; mm.close()").returncode == 0
    sb.sh("rm -r d/e; mkdir k; chmod 700 k; touch gone; rm gone")
    data = bytes(range(256)) * 4
    for body in ({"path": "/workspace/api/bin", "content": base64.b64encode(data).decode(),
                  "encoding": "base64", "mode": "640"},
                 {"path": "/workspace/api/text", "content": "hello\n"}):
        status, res = sb.api("POST", "/v1/write_file", body)
        assert status == 200, res
    assert sb.api("POST", "/v1/make_dir", {"path": "/workspace/made", "mode": "750"})[0] == 200
    assert sb.api("POST", "/v1/delete_file", {"path": "/workspace/g2"})[0] == 200
    assert sb.api("POST", "/v1/delete_file", {"path": "/workspace/none"})[0] == 404
    assert sb.run("cat > in; pwd > where", stdin="from stdin", cwd="/workspace/k")["exit_code"] == 0
    assert sb.run(argv=["bash", "-c", "echo {x,y} > brace"])["exit_code"] == 0
    assert sb.run("exit 3")["exit_code"] == 3
    status, p = sb.api("POST", "/v1/start_process", {"cmd": "echo bg > bg; exit 5"})
    assert status == 200, p
    assert wait_until(lambda: any(x.get("of") is not None or x.get("exit") == 5
                                  for x in journal(hutch, sb.id)), 20)
    return sb


def test_replay_reproduces_the_workspace(hutch):
    sb = session(hutch)
    want = sb.sh(TREE_HASH)
    assert sb.sh("cat k/where") == "/workspace/k\n" and sb.sh("cat brace") == "x y\n"
    js = journal(hutch, sb.id)
    wf = [x for x in js if x.get("path") == "/workspace/api/bin"][0]
    assert wf["mode"] == "640" and wf["content"]["size"] == 1024
    assert base64.b64decode(wf["content"]["base64"]) == bytes(range(256)) * 4
    run = [x for x in js if x.get("command") == "cat > in; pwd > where"][0]
    assert run["cwd"] == "/workspace/k" and base64.b64decode(run["stdin"]["base64"]) == b"from stdin"
    assert [x for x in js if x.get("command") == "echo {x,y} > brace"][0]["shell"] == "bash"
    assert js[0]["image"] == "host" and js[0]["instance_type"] == "medium"
    assert sb.rm().returncode == 0
    ended(hutch, sb.id)

    r = hutch("replay", sb.id)
    assert r.returncode == 0, r.stderr.decode()
    new = r.stdout.decode().strip()
    assert new != sb.id and new in hutch.ids()
    assert b"0 differences" in r.stderr
    got = hutch("exec", new, "--", "sh", "-c", TREE_HASH)
    assert got.returncode == 0 and got.stdout.decode() == want
    assert hutch("exec", new, "--", "cat", "k/where").stdout == b"/workspace/k\n"
    # the replay is on the new sandbox's own journal
    assert any(x.get("command") == "exit 3" and x.get("exit") == 3 for x in journal(hutch, new))
    hutch("rm", new)


def test_replay_into_a_live_sandbox_from_a_file(hutch):
    sb = hutch.create()
    sb.sh("echo a > a; chmod 604 a")
    assert wait_until(lambda: any("command" in x for x in journal(hutch, sb.id)), 20)
    target = hutch.create()
    path = os.path.join(hutch.rtdir, sb.id, "journal.jsonl")
    r = hutch("replay", path, "--into", target.id)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == target.id
    assert target.sh("stat -c %a a; cat a") == "604\na\n"
    assert hutch.ids() == sorted([sb.id, target.id])
    sb.rm()
    target.rm()


def test_what_the_journal_lacks_is_named(hutch):
    sb = hutch.create()
    big = "x" * 5000  # past the 4 KiB a journal line keeps
    assert sb.api("POST", "/v1/write_file", {"path": "/workspace/big", "content": big})[0] == 200
    r = hutch("exec", "-i", sb.id, "--", "sh", "-c", "cat > piped", input=b"streamed")
    assert r.returncode == 0
    assert sb.run("test -e /workspace/marker")["exit_code"] == 1
    # a request's line is written once its answer is out: wait for it
    assert wait_until(lambda: any(x.get("command") == "test -e /workspace/marker"
                                  for x in journal(hutch, sb.id)), 20)
    js = journal(hutch, sb.id)
    wf = [x for x in js if x.get("path") == "/workspace/big"][0]
    assert wf["content"]["size"] == 5000 and wf["content"]["withheld"] == "large"
    assert len(wf["content"]["sha256"]) == 64 and "base64" not in wf["content"]
    ex = [x for x in js if x.get("command") == "cat > piped"][0]
    assert ex["stdin"] == {"streamed": True, "size": 8}
    target = hutch.create()
    target.sh("touch marker")  # so the last command's exit differs
    r = hutch("replay", sb.id, "--into", target.id)
    err = r.stderr.decode()
    assert r.returncode == DIFFERS, err
    seq = {x.get("path") or x.get("command"): x["seq"] for x in js if "seq" in x}
    assert f"line {seq['/workspace/big']}: write of '/workspace/big' not replayed" in err
    assert "more than 4 KiB" in err
    assert f"line {seq['cat > piped']}: its stdin (8 bytes) was streamed" in err
    assert f"line {seq['test -e /workspace/marker']}: " in err and "ended with exit 0, the journal says exit 1" in err
    assert "3 differences" in err
    sb.rm()
    target.rm()


def test_a_broken_or_missing_journal_is_refused(hutch):
    sb = hutch.create()
    sb.sh("echo 1 > one")
    sb.sh("echo 2 > two")
    sb.rm()
    ended(hutch, sb.id)
    d = tempfile.mkdtemp(prefix="hutch-replay-")
    try:
        edited = os.path.join(d, "edited.jsonl")
        shutil.copy(os.path.join(hutch.rtdir, ".gone", sb.id + ".journal"), edited)
        with open(edited) as f:
            text = f.read().split("\n")
        text[1] = text[1].replace("echo 1 > one", "echo 9 > one")
        with open(edited, "w") as f:
            f.write("\n".join(text))
        r = hutch("replay", edited)
        err = r.stderr.decode()
        assert r.returncode == BROKEN, err
        assert "is broken at line 3" in err and "nothing replayed" in err
        cut = os.path.join(d, "cut.jsonl")
        with open(cut, "w") as f:
            f.write("\n".join(text[2:]))
        r = hutch("replay", cut)
        assert r.returncode == BROKEN and b"first lines are missing" in r.stderr
        assert hutch.ids() == []  # nothing created
        r = hutch("replay", os.path.join(d, "none.jsonl"))
        assert r.returncode == NOT_FOUND and b"no journal" in r.stderr
    finally:
        shutil.rmtree(d)
    r = hutch("replay", "0123456789ab")
    assert r.returncode == NOT_FOUND, r.stderr
    r = hutch("replay")
    assert r.returncode == USAGE and b"missing journal: hutch replay JOURNAL|ID" in r.stderr
