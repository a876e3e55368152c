# SPDX-License-Identifier: Apache-2.0
"""What an operator watching many sandboxes uses (issue 32 #8): hutch
events -f (one sandbox until it ends; every sandbox, new ones included),
events across sandboxes, ls newest first, stats --format."""
import contextlib
import json
import os
import signal

from conftest import wait_until


@contextlib.contextmanager
def following(hutch, *args):
    """A hutch events -f ...: killed if the test leaves it running."""
    p = hutch.popen("events", *args)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _line(p):
    """The next line of a following hutch, or b"" at its end."""
    return p.stdout.readline()


def _lines_until(p, pred):
    seen = []
    while True:
        ln = _line(p)
        assert ln, (seen, p.stderr.read() if p.poll() is not None else b"")
        seen.append(ln.decode())
        if pred(seen[-1]):
            return seen


def test_events_follow_one_until_it_ends(hutch):
    sb = hutch.create("--instance-type", "nano")
    with following(hutch, "-f", sb.id[:6]) as p:
        first = _lines_until(p, lambda ln: "handed over" in ln)
        assert "created: instance type nano" in first[0], first
        assert hutch("rm", sb.id).returncode == 0
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    rest = [ln.split(" ", 1)[1] for ln in out.decode().splitlines()]
    assert rest[-2:] == ["ending: deleted", "torn down: deleted"], rest
    # The same lines as the log kept afterwards, nothing twice.
    kept = hutch("events", sb.id).stdout.decode().splitlines()
    assert kept == first_lines(first) + out.decode().splitlines()


def first_lines(lines):
    return [ln.rstrip("\n") for ln in lines]


def test_events_follow_ends_when_the_supervisor_is_killed(hutch):
    """-f of a sandbox whose supervisor is killed -9 (no end will come):
    66 naming gc, as journal --follow (test_journal.py); it ended 0."""
    sb = hutch.create("--instance-type", "nano")
    pid = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    with following(hutch, "--follow", sb.id) as p:
        _lines_until(p, lambda ln: "handed over" in ln)
        os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 66, err
    assert err == (f"hutch: sandbox {sb.id} is not running: its supervisor is gone (killed or "
                   "crashed; 'hutch doctor' checks the host); run 'hutch gc' to remove what it "
                   "left\n").encode(), err
    assert hutch("gc").returncode == 0


def test_events_of_every_sandbox_in_time_order_and_followed(hutch):
    a = hutch.create("--instance-type", "nano")
    b = hutch.create("--instance-type", "nano")
    assert hutch("rm", a.id).returncode == 0
    assert wait_until(lambda: os.path.exists(os.path.join(hutch.rtdir, ".gone", a.id + ".events")), 10)
    r = hutch("events")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert [ln[:24] for ln in lines] == sorted(ln[:24] for ln in lines), lines
    ids = [ln.split(" ")[1] for ln in lines]
    assert set(ids) == {a.id, b.id}, lines
    mine = [ln.split(" ", 2)[2] for ln in lines if ln.split(" ")[1] == a.id]
    alone = [ln.split(" ", 1)[1] for ln in hutch("events", a.id).stdout.decode().splitlines()]
    assert mine == alone and alone[-1] == "torn down: deleted", (mine, alone)

    # -f: the history, then new lines of live sandboxes and new ones.
    with following(hutch, "-f") as p:
        _lines_until(p, lambda ln: ln.split(" ")[1] == b.id and "handed over" in ln)
        c = hutch.create("--instance-type", "nano")
        _lines_until(p, lambda ln: ln.split(" ")[1] == c.id and "handed over" in ln)
        assert hutch("rm", b.id, c.id).returncode == 0
        seen = _lines_until(p, lambda ln: ln.split(" ")[1] == c.id and "torn down" in ln)
        if not any(ln.split(" ")[1] == b.id and "torn down" in ln for ln in seen):
            _lines_until(p, lambda ln: ln.split(" ")[1] == b.id and "torn down" in ln)
        assert p.poll() is None  # without an id: until Ctrl-C
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)


def test_events_errors(hutch, tmp_path):
    r = hutch("events", "abcdef123456", "-f")
    assert r.returncode == 65 and b"no sandbox 'abcdef123456'" in r.stderr, r
    r = hutch("events", "--since", "1h")
    assert r.returncode == 64 and b"--since" in r.stderr, r
    r = hutch("events", "a", "b")
    assert r.returncode == 64, r
    # Nothing made there yet: plain events prints nothing, -f says why.
    none = str(tmp_path / "none")
    r = hutch("events", env={"HUTCH_RUNTIME_DIR": none})
    assert r.returncode == 0 and r.stdout == b"", r
    r = hutch("events", "-f", env={"HUTCH_RUNTIME_DIR": none})
    assert r.returncode == 65 and b"no sandbox was made there yet" in r.stderr, r


def test_ls_newest_first(hutch):
    sbs = [hutch.create("--instance-type", "nano") for _ in range(3)]
    listed = json.loads(hutch("ls", "--json").stdout)
    order = [(-s["created_at_unix"], s["id"]) for s in listed]
    assert order == sorted(order), listed
    assert {s["id"] for s in listed} == {s.id for s in sbs}
    assert hutch("ls", "-q").stdout.decode().split() == [s["id"] for s in listed]
    rows = hutch("ls").stdout.decode().splitlines()[1:]
    assert [r.split()[0] for r in rows] == [s["id"] for s in listed]


def test_stats_format(hutch):
    sb = hutch.create("--instance-type", "nano")
    r = hutch("stats", "--no-stream", "--format", "{{.ID}} {{.PIDs}} {{.MemPerc}}", sb.id)
    assert r.returncode == 0, r.stderr
    ident, pids, mem = r.stdout.decode().split()
    assert ident == sb.id and int(pids) >= 1 and mem.endswith("%"), r.stdout
    r = hutch("stats", "--no-stream", "--format", "table {{.Container}}\\t{{.CPUPerc}}", sb.id)
    assert r.returncode == 0, r.stderr
    head, row = r.stdout.decode().splitlines()
    assert head.split() == ["CONTAINER", "CPU", "%"] and row.split()[0] == sb.id, r.stdout
    # json: each sample as stats --json gives it, one line each.
    r = hutch("stats", "--no-stream", "--format", "json", sb.id)
    assert r.returncode == 0, r.stderr
    one = json.loads(r.stdout)
    assert one["id"] == sb.id and "cpu_percent" in one and "memory" in one, one
    # Refused before anything is measured, naming the fields.
    r = hutch("stats", "--no-stream", "--format", "{{.Nope}}", sb.id)
    assert r.returncode == 64 and b"unknown field '.Nope'" in r.stderr and b".CPUPerc" in r.stderr
    r = hutch("stats", "--no-stream", "--format", "{{.ID}}", "--json", sb.id)
    assert r.returncode == 64 and b"not both" in r.stderr, r


def test_events_follow_of_a_sandbox_removed_meanwhile(hutch):
    """-f of a sandbox whose supervisor was killed and whose state dir gc
    removed while the follower was stopped (as journal --follow's test,
    7207b94): it ends at once, 0 as after a kill (the test above), its
    last line gc's, the log kept beside the tombstone read to its end; no
    70, no wait."""
    sb = hutch.create("--instance-type", "nano")
    pid = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    with following(hutch, "-f", sb.id) as p:
        _lines_until(p, lambda ln: "handed over" in ln)
        os.kill(p.pid, signal.SIGSTOP)
        try:
            os.kill(pid, signal.SIGKILL)
            assert wait_until(lambda: hutch("gc").returncode == 0 and hutch.ids() == [], 10)
        finally:
            os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert out.decode().splitlines()[-1].endswith(
        " gc: its supervisor was gone (killed or crashed); what it left is removed"), out
