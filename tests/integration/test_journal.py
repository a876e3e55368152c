# SPDX-License-Identifier: Apache-2.0
"""The session journal (issue 29): one hash-chained JSON line per request
(caller, route, command line or path, status, exit, duration), a
background process's exit on a line of its own, kept beside the tombstone
after rm, 0600, bounded by rotation, nothing of a secret in it; hutch
journal --verify finds an edited, removed or reordered line and a cut
head or tail."""
import json
import os
import pwd
import select
import shutil
import signal
import stat
import subprocess
import tempfile

import pytest

from conftest import HUTCH, Hutch, Sandbox, supervisor_alive, wait_until

USAGE, NOT_FOUND, BROKEN = 64, 65, 1


def lines(hutch, sid):
    r = hutch("journal", sid, "--json")
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in r.stdout.decode().splitlines()]


def verify(hutch, sid):
    r = hutch("journal", sid, "--verify")
    return r.returncode, r.stdout.decode() + r.stderr.decode()


def gone_path(hutch, sid, suffix=".journal"):
    return os.path.join(hutch.rtdir, ".gone", sid + suffix)


def ended(hutch, sid):
    """rm returns once DELETE / is answered; the supervisor writes the end
    line after its last answer."""
    assert wait_until(lambda: verify(hutch, sid)[0] == 0 and "ended" in verify(hutch, sid)[1],
                      20), verify(hutch, sid)


def test_every_request_is_a_line_with_caller_command_and_exit(hutch):
    sb = hutch.create()
    r = hutch("exec", sb.id, "--", "sh", "-c", "echo hi; exit 3")
    assert r.returncode == 3
    assert sb.run(argv=["python3", "-c", "print(1)"])["exit_code"] == 0
    status, _ = sb.api("POST", "/v1/write_file", {"path": "/workspace/a.txt", "content": "x"})
    assert status == 200
    status, _ = sb.api("POST", "/v1/run", {"nonsense": 1})
    assert status == 400
    status, p = sb.api("POST", "/v1/start_process", {"cmd": "exit 7"})
    assert status == 200, p
    sb.status()  # passive: not on the record

    def started_exit_seen(js):
        # Its exit on a later "of" line, or on its own line when it ended
        # before its request was answered (a quick 'exit 7' under load).
        sp = [x for x in js if x.get("route") == "POST /v1/start_process"]
        return bool(sp) and ("exit" in sp[0] or any("of" in x for x in js))
    assert wait_until(lambda: started_exit_seen(lines(hutch, sb.id)), 20), lines(hutch, sb.id)
    js = lines(hutch, sb.id)
    assert js[0]["journal"] == "start" and js[0]["seq"] == 0 and js[0]["sandbox"] == sb.id
    assert [x["seq"] for x in js] == list(range(len(js)))
    by = {x.get("route"): x for x in js}
    ex = by["POST /exec"]
    assert ex["command"] == "echo hi; exit 3" and ex["exit"] == 3
    assert ex["caller"]["uid"] == os.getuid() and ex["caller"]["pid"] > 0
    assert ex["ms"] >= 0 and ex["time"].endswith("Z")
    assert by["POST /v1/run"]["status"] == 400 and "command" not in by["POST /v1/run"]
    assert [x["command"] for x in js if x.get("route") == "POST /v1/run" and "command" in x] \
        == ["python3 -c 'print(1)'"]
    wf = by["POST /v1/write_file"]
    assert wf["path"] == "/workspace/a.txt" and wf["op"] == "write" and wf["status"] == 200
    sp = by["POST /v1/start_process"]
    assert sp["command"] == "exit 7"
    ex7 = [x for x in js if "of" in x]
    if "exit" in sp:
        assert "running" not in sp and sp["exit"] == 7 and ex7 == []
    else:
        assert sp["running"] is True
        assert len(ex7) == 1 and ex7[0]["of"] == sp["seq"] and ex7[0]["exit"] == 7
    assert "GET /status" not in by and "GET /health" not in by
    rc, out = verify(hutch, sb.id)
    assert rc == 0 and "chain intact, still being written" in out, out
    human = hutch("journal", sb.id).stdout.decode()
    assert "echo hi; exit 3" in human and "exit 3" in human and "/workspace/a.txt" in human
    sb.rm()


def test_kept_after_rm_private_and_pruned_with_the_tombstone(hutch):
    sb = hutch.create()
    sb.sh("true")
    assert sb.rm().returncode == 0
    ended(hutch, sb.id)
    js = lines(hutch, sb.id)
    assert js[-1]["journal"] == "end" and js[-1]["reason"] == "deleted"
    assert js[-2]["route"] == "DELETE /"
    st = os.stat(gone_path(hutch, sb.id))
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    # gc prunes it with the tombstone, after 7 days
    old = st.st_mtime - 8 * 86400
    for f in (sb.id, sb.id + ".journal", sb.id + ".events"):
        os.utime(os.path.join(hutch.rtdir, ".gone", f), (old, old))
    assert hutch("gc").returncode == 0
    assert not os.path.exists(gone_path(hutch, sb.id))
    assert hutch("journal", sb.id).returncode == NOT_FOUND


@pytest.fixture
def ended_journal(hutch):
    sb = hutch.create()
    for i in range(3):
        sb.sh(f"echo {i}")
    sb.rm()
    ended(hutch, sb.id)
    path = gone_path(hutch, sb.id)
    with open(path, "rb") as f:
        good = f.read()
    return sb.id, path, good


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def test_an_edited_line_shows(hutch, ended_journal):
    sid, path, good = ended_journal
    write(path, good.replace(b'"echo 1"', b'"echo X"'))
    rc, out = verify(hutch, sid)
    assert rc == BROKEN and "one of the two was changed" in out, out
    # an edit that keeps the JSON's shape but drops the chain's fields
    ls = good.splitlines(keepends=True)
    e = json.loads(ls[2])
    del e["prev"]
    write(path, b"".join(ls[:2] + [json.dumps(e).encode() + b"\n"] + ls[3:]))
    rc, out = verify(hutch, sid)
    assert rc == BROKEN and "line 3" in out, out
    write(path, good)
    assert verify(hutch, sid)[0] == 0


@pytest.mark.parametrize("cut", ["middle", "head", "tail", "mid-line", "reorder"])
def test_a_cut_shows(hutch, ended_journal, cut):
    sid, path, good = ended_journal
    ls = good.splitlines(keepends=True)
    bad = {"middle": ls[:2] + ls[3:], "head": ls[1:], "tail": ls[:-1],
           "mid-line": ls[:-1] + [ls[-1][:20]], "reorder": ls[:1] + [ls[2], ls[1]] + ls[3:]}[cut]
    write(path, b"".join(bad))
    rc, out = verify(hutch, sid)
    assert rc == BROKEN, out
    says = {"middle": "missing (cut)", "head": "first lines are missing", "tail": "end line",
            "mid-line": "line", "reorder": "line 2"}[cut]
    assert says in out, out


def test_no_secret_in_it(hutch):
    secret = "s3cr3t-" + os.urandom(8).hex()
    r = hutch("create", "--json", "--secret", "TOKEN=@env:T", env={"T": secret})
    assert r.returncode == 0, r.stderr
    sb = Sandbox(hutch, json.loads(r.stdout))
    assert sb.sh('printf %s "$TOKEN"') == secret
    sb.sh(f"echo {secret} >/dev/null")  # the value typed in a command line
    status, _ = sb.api("POST", "/v1/run", {"cmd": "true", "env": {"X": secret}})
    assert status == 200
    # a value across the cut of a long command line: no head of it kept
    sb.sh(": " + "a" * 4088 + secret)
    sb.rm()
    ended(hutch, sb.id)
    with open(gone_path(hutch, sb.id), "rb") as f:
        data = f.read()
    assert secret.encode() not in data and secret[7:13].encode() not in data
    cmds = [x.get("command") for x in lines(hutch, sb.id)]
    assert 'printf %s "$TOKEN"' in cmds and "echo [secret TOKEN] >/dev/null" in cmds, cmds


def test_a_secret_inside_its_own_mark(hutch):
    # "s" is in "[secret ONE]": the replacement goes on after the mark
    r = hutch("create", "--json", "--secret", "ONE=@env:V", env={"V": "s"})
    assert r.returncode == 0, r.stderr
    sb = Sandbox(hutch, json.loads(r.stdout))
    sb.sh("echo sss")
    assert lines(hutch, sb.id)[-1]["command"] == "echo [secret ONE][secret ONE][secret ONE]"
    sb.rm()


def test_off_switch_and_rotation(hutch):
    sb = hutch.create("--journal-max", "0")
    sb.sh("true")
    assert not os.path.exists(os.path.join(hutch.rtdir, sb.id, "journal.jsonl"))
    r = hutch("journal", sb.id)
    assert r.returncode == NOT_FOUND and b"--journal-max 0" in r.stderr, r.stderr
    sb.rm()
    bound = 4096
    sb = hutch.create("--journal-max", str(bound))
    for i in range(40):
        sb.sh(f"echo {i}")
    d = os.path.join(hutch.rtdir, sb.id)
    cur, old = os.path.join(d, "journal.jsonl"), os.path.join(d, "journal.1.jsonl")
    assert os.path.exists(old)
    # each file is rotated once past half the bound: one line over at most
    assert os.path.getsize(cur) + os.path.getsize(old) <= bound + 2 * 512
    with open(old) as f:
        assert json.loads(f.readline())["journal"] == "rotated"
    rc, out = verify(hutch, sb.id)
    assert rc == 0 and "rotated away" in out, out
    js = lines(hutch, sb.id)
    assert js[-1]["command"] == "echo 39"
    # Its start rotated away: replay refuses it (2), before making anything.
    r = hutch("replay", sb.id)
    assert r.returncode == 2 and r.stdout == b"", r
    assert b"does not start at its session's start" in r.stderr, r.stderr
    assert b"--journal-max): nothing replayed" in r.stderr, r.stderr
    assert hutch.ids() == [sb.id]
    sb.rm()
    ended(hutch, sb.id)
    assert os.path.exists(gone_path(hutch, sb.id, ".journal.1"))
    assert verify(hutch, sb.id)[0] == 0


def test_follow_prints_until_the_end(hutch):
    sb = hutch.create()
    # No request yet: the file comes with the first one (--follow waits)
    r = hutch("journal", sb.id, "--verify")
    assert r.returncode == 0 and b"no lines yet" in r.stdout, r
    p = hutch.popen("journal", sb.id, "--follow", "--json")
    try:
        wait_watching(p)
        sb.sh("echo followed")
        # The follower holds the journal once it has printed its first line;
        # an rm before that removes the file it was about to open.
        js = rm_after_the_first_line(sb, p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert js[0]["journal"] == "start" and js[-1]["journal"] == "end"
    assert any(x.get("command") == "echo followed" for x in js)


def test_follow_of_a_sandbox_removed_before_its_watch(hutch):
    """--follow of a sandbox removed between the follower's first lines and
    its watch (strace holds the follower's inotify_init1 for 3 s, the rm
    runs meanwhile): the file moved beside the tombstone is watched by its
    fd, the rest is read and the follower ends 0 at the end line. It failed
    "watch '...': No such file or directory" when it watched by path."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    sb = hutch.create("--instance-type", "nano")
    assert sb.sh("echo before") == "before\n"
    p = subprocess.Popen(["strace", "-o", "/dev/null", "-e", "trace=inotify_init1",
                          "-e", "inject=inotify_init1:delay_enter=3000000", HUTCH, "journal",
                          sb.id, "--follow", "--json"], env=hutch.env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        js = rm_after_the_first_line(sb, p)  # printed before the watch (the delay)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert js[0]["journal"] == "start" and js[-1]["journal"] == "end", js
    assert any(x.get("command") == "echo before" for x in js), js


def rm_after_the_first_line(sb, p):
    """The follower p's first line, then sb removed, then the rest: every
    line as JSON, once p has ended 0."""
    first = b""  # byte by byte: communicate() reads the fd, not a buffer
    while not first.endswith(b"\n"):
        assert select.select([p.stdout], [], [], 30)[0], ("no first line", first)
        c = os.read(p.stdout.fileno(), 1)
        assert c, ("the follower ended before its first line", first, p.communicate())
        first += c
    assert sb.rm().returncode == 0
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return [json.loads(x) for x in (first + out).decode().splitlines()]


def wait_watching(p):
    """Until the follower p watches its files (inotify)."""
    def watching():
        assert p.poll() is None, ("the follower ended before it watched", p.communicate())
        try:
            return any(os.readlink(f"/proc/{p.pid}/fd/{fd}") == "anon_inode:inotify"
                       for fd in os.listdir(f"/proc/{p.pid}/fd"))
        except FileNotFoundError:  # it ends meanwhile: said at the next look
            return False
    assert wait_until(watching, 30), p.communicate()


def follow_then_signal(hutch, sb, sig):
    """journal --follow of sb, once it watches (inotify), then sig to sb's
    supervisor: (exit code, stdout, stderr) of the follow."""
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    p = hutch.popen("journal", sb.id, "--follow")
    try:
        wait_watching(p)
        os.kill(sup, sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err


def test_follow_of_a_sandbox_that_ends_without_a_request(hutch):
    """--follow waits for the first request's journal; a sandbox that ends
    before one (its supervisor told to stop) has none: 66, said once."""
    sb = hutch.create("--instance-type", "nano")
    rc, out, err = follow_then_signal(hutch, sb, signal.SIGTERM)
    assert rc == 66 and out == b"", err
    assert err == b"hutch: the sandbox ended without a request: no journal\n", err
    # (net-log's refusal of the same ended sandbox: network none writes no
    # egress log; the sandbox is gone, 66, as for the other verbs)
    r = hutch("net-log", sb.id)
    assert r.returncode == 66 and r.stdout == b"", r
    assert f"sandbox {sb.id} was deleted at ".encode() in r.stderr, r.stderr
    assert b"no egress log of it is kept" in r.stderr and b"network none" in r.stderr, r.stderr


@pytest.mark.parametrize("request_first", [True, False])
def test_follow_of_a_sandbox_whose_supervisor_is_killed(hutch, request_first):
    """--follow of a sandbox whose supervisor is killed -9 (no end line is
    ever written, its state dir stays until gc): the lines so far, then 66
    naming gc; it waited for ever before. Without a request yet the same,
    from the wait for the journal's first line."""
    sb = hutch.create("--instance-type", "nano")
    if request_first:
        assert sb.sh("echo one") == "one\n"
    rc, out, err = follow_then_signal(hutch, sb, signal.SIGKILL)
    assert rc == 66, (out, err)
    assert err == (f"hutch: sandbox {sb.id} is not running: its supervisor is gone (killed or "
                   "crashed; 'hutch doctor' checks the host); run 'hutch gc' to remove what it "
                   "left\n").encode(), err
    assert (b"echo one" in out) == request_first, out
    r = hutch("gc")
    assert r.returncode == 0 and b"removed 1 " in r.stdout, r


@pytest.mark.parametrize("remover", ["gc", "rm"])
def test_follow_of_a_sandbox_removed_meanwhile(hutch, remover):
    """--follow of a sandbox whose supervisor was killed and whose state
    dir gc (or rm) removed before the follower looked (it is stopped
    meanwhile): the lines so far, then 66 naming why and when it ended, as
    the other verbs say it. It exited 70 ('the journal ended without its
    end line') before. (rm of a live sandbox while followed ends 0 after the
    end line: test_follow_prints_until_the_end.)"""
    sb = hutch.create("--instance-type", "nano")
    assert sb.sh("echo one") == "one\n"
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    p = hutch.popen("journal", sb.id, "--follow")
    try:
        wait_watching(p)
        os.kill(p.pid, signal.SIGSTOP)
        try:
            os.kill(sup, signal.SIGKILL)
            assert wait_until(lambda: not supervisor_alive(hutch, sb.id), 10)
            r = hutch("rm", sb.id) if remover == "rm" else hutch("gc")
            assert r.returncode == 0 and hutch.ids() == [], r
        finally:
            os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 66, (out, err)
    words = ("ended: its supervisor died (killed or crashed) and hutch gc removed it"
             if remover == "gc" else "was deleted")
    assert err.startswith(f"hutch: sandbox {sb.id} {words} at ".encode()), err
    # gc (rm) wrote its end line (test_verify_of_a_sandbox_reaped_after_its_supervisor_died)
    assert err.endswith(b"; its journal's end line is hutch gc's or rm's (its supervisor died "
                        b"before writing one)\n"), err
    assert b"echo one" in out, out
    assert b"journal end: " in out and b"(written by hutch %s: its supervisor died" % \
        remover.encode() in out, out


@pytest.mark.parametrize("remover", ["gc", "rm"])
def test_verify_of_a_sandbox_reaped_after_its_supervisor_died(hutch, remover):
    """A supervisor killed writes no end line; gc (or rm) that reaps its
    sandbox writes it, continuing the chain, with the tombstone's reason
    and who wrote it: --verify says the chain is intact and ended (main's
    binary before this: 1, "broken: its end line is missing (cut)", which
    reads as tampering)."""
    sb = hutch.create("--instance-type", "nano")
    assert sb.sh("echo one") == "one\n"
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    os.kill(sup, signal.SIGKILL)
    assert wait_until(lambda: not supervisor_alive(hutch, sb.id), 10)
    r = hutch("rm", sb.id) if remover == "rm" else hutch("gc")
    assert r.returncode == 0 and hutch.ids() == [], r
    r = hutch("journal", sb.id, "--verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.decode().endswith("chain intact, ended\n"), r.stdout
    r = hutch("journal", sb.id, "--json")
    end = json.loads(r.stdout.decode().splitlines()[-1])
    assert end["journal"] == "end" and end["by"] == remover, end
    assert end["reason"] == ("supervisor-died" if remover == "gc" else "deleted"), end
    # a second gc leaves it as it is (one end line)
    assert hutch("gc").returncode == 0
    assert hutch("journal", sb.id, "--verify").returncode == 0


def test_usage_errors(hutch):
    """Each refusal exits with its class's code (docs/errors.md)."""
    r = hutch("journal")
    assert r.returncode == USAGE and b"missing sandbox id: hutch journal ID" in r.stderr, r
    assert hutch("journal", "zz").returncode == USAGE
    r = hutch("journal", "0123456789ab")
    assert r.returncode == NOT_FOUND and b"no sandbox" in r.stderr, r
    sb = hutch.create()
    # No request yet: nothing to replay (journal prints nothing; --verify
    # says "no lines yet"), and no sandbox made for it
    r = hutch("replay", sb.id)
    assert r.returncode == NOT_FOUND and r.stdout == b"", r
    assert b"has no journal lines yet (it starts at the first request)" in r.stderr, r
    assert hutch.ids() == [sb.id]
    r = hutch("journal", sb.id, "--verify", "--follow")
    assert r.returncode == USAGE and b"do not go together" in r.stderr
    assert hutch("journal", sb.id, "extra").returncode == USAGE
    assert b"--verify" in hutch("journal", "--help").stdout
    sb.rm()
    off = hutch.create("--journal-max", "0")
    r = hutch("journal", off.id)
    assert r.returncode == NOT_FOUND and b"--journal-max 0" in r.stderr, r
    off.rm()
    r = hutch("journal", off.id)  # ended without one: none kept either; gone, 66
    assert r.returncode == 66 and f"sandbox {off.id} was deleted at ".encode() in r.stderr, r
    assert b"no journal of it is kept" in r.stderr and b"--journal-max 0" in r.stderr, r


@pytest.fixture
def stranger():
    name = f"hj{os.getpid() % 100000}"
    subprocess.run(["useradd", "--system", "-M", "-d", "/nonexistent", "-s", "/bin/sh", name],
                   check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def run_as(user, rtdir, *argv):
    """argv as user (a pwd entry), with HUTCH_RUNTIME_DIR rtdir."""
    return subprocess.run(argv, user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd="/",
                          capture_output=True,
                          env={"PATH": "/usr/bin:/bin", "HUTCH_RUNTIME_DIR": rtdir})


def test_another_user_cannot_read_it(stranger):
    # A runtime dir open to everyone on the way (pytest's tmp dirs are
    # not): the file's own mode is what keeps it private.
    top = tempfile.mkdtemp(prefix="hutch-journal-")
    os.chmod(top, 0o755)
    h = Hutch(os.path.join(top, "rt"))
    try:
        sb = h.create()
        sb.sh("echo private")
        live = os.path.join(h.rtdir, sb.id, "journal.jsonl")
        st = os.stat(live)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()

        def as_stranger(*argv):
            return run_as(stranger, h.rtdir, *argv)

        for d in (h.rtdir, os.path.join(h.rtdir, sb.id)):
            os.chmod(d, 0o755)
        assert as_stranger("cat", live).returncode != 0
        r = as_stranger(HUTCH, "journal", sb.id)
        assert r.returncode == 69 and b"private" not in r.stdout, r  # not capable
        sb.rm()
        ended(h, sb.id)
        os.chmod(os.path.join(h.rtdir, ".gone"), 0o755)
        assert as_stranger("cat", gone_path(h, sb.id)).returncode != 0
        assert stat.S_IMODE(os.stat(gone_path(h, sb.id)).st_mode) == 0o600
    finally:
        h("rm", "--all")
        wait_until(lambda: h("gc").returncode == 0
                   and not os.path.exists(os.path.join(h.rtdir, ".lxcfs")), 10)
        shutil.rmtree(top, ignore_errors=True)


def test_change_summaries_on_command_lines(hutch):
    """A run or exec line carries its command's change list as counts (the
    lists themselves are in the results); a command that changed nothing,
    and every command of a sandbox with --change-lists off, has none."""
    sb = hutch.create()
    res = sb.run("echo a > /workspace/a; echo b > /tmp/b; mkdir /workspace/d")
    if "changes" not in res:
        sb.rm()
        pytest.skip("no change lists here: fanotify filesystem marks in a user namespace "
                    "need Linux 6.8")
    assert hutch("exec", sb.id, "--", "sh", "-c", "echo more >> /workspace/a; rm /tmp/b"
                 ).returncode == 0
    assert sb.run("cat /workspace/a")["exit_code"] == 0
    human = hutch("journal", sb.id).stdout.decode()
    js = lines(hutch, sb.id)
    cmds = [j for j in js if "command" in j]
    assert cmds[0]["changes"] == {"created": 3, "modified": 0, "deleted": 0, "omitted": 0}, cmds
    assert cmds[1]["changes"] == {"created": 0, "modified": 1, "deleted": 1, "omitted": 0}, cmds
    assert "changes" not in cmds[2], cmds
    assert "[+3 ~0 -0, 0 more]" in human and "[+0 ~1 -1, 0 more]" in human, human
    assert sb.rm().returncode == 0
    sb = hutch.create("--change-lists", "off")
    assert sb.run("echo a > /workspace/a")["exit_code"] == 0
    assert all("changes" not in j for j in lines(hutch, sb.id))
    assert sb.rm().returncode == 0


def test_a_request_is_on_the_journal_before_its_answer(hutch, tmp_path):
    """A request's line is written before its answer goes (POST /v1/run on
    api.sock, hutch exec on exec.sock), so that a `hutch journal` once the
    caller has its answer finds it: strace of the supervisor shows the
    journal's write before the answer's. It came after (at the stream's or
    connection's end) and a journal read right after missed it now and then."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    sb = hutch.create("--instance-type", "nano")
    try:
        sb.sh("true")  # the journal's file made, its first lines written
        with open(os.path.join(hutch.rtdir, sb.id, "state.json")) as f:
            pid = json.load(f)["supervisor_pid"]
        trace = str(tmp_path / "sup.trace")
        st = subprocess.Popen(["strace", "-f", "-p", str(pid), "-s", "300", "-yy", "-e",
                               "trace=write,writev,sendmsg,sendto", "-o", trace],
                              stderr=subprocess.PIPE)
        try:
            assert b"attached" in st.stderr.readline()
            assert sb.sh("echo one") == "one\n"
            r = hutch("exec", sb.id, "--", "echo", "two")
            assert r.returncode == 0 and r.stdout == b"two\n", r
        finally:
            st.terminate()
            st.wait()
        with open(trace) as f:
            lines = f.read().splitlines()
    finally:
        sb.rm()

    def first(*words):
        return next(i for i, line in enumerate(lines) if all(w in line for w in words))

    j1 = first("journal.jsonl>", '"command\\":\\"echo one')
    a1 = first('api.sock"]>, {msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base="HTTP/1.')
    assert j1 < a1, lines
    j2 = first("journal.jsonl>", '"command\\":\\"echo two')
    a2 = max(i for i, line in enumerate(lines) if 'exec.sock"]>' in line)
    assert j2 < a2, lines
