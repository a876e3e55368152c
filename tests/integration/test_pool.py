# SPDX-License-Identifier: Apache-2.0
"""The warm pool: `hutch pool start|stop|ls`, claims by create and run,
POST /claim, pooled sandboxes refusing work, keeper death and gc."""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess

import pytest

from conftest import HUTCH, UnixHTTPConnection, api, proc_comm, state_of, wait_until

USAGE, NOT_FOUND = 64, 65


def pooled_ids(h):
    r = h("ls", "--json")
    assert r.returncode == 0, r.stderr
    # a sandbox the keeper is making right now may not have its state yet
    return sorted(s["id"] for s in json.loads(r.stdout) if s.get("status") == "pooled")


def pools(h):
    r = h("pool", "ls", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def pool(hutch):
    """Starts nothing; stops every pool of this runtime dir at the end, and
    fails if a keeper outlives its stop."""
    yield hutch
    keepers = [p["keeper_pid"] for p in pools(hutch) if p["alive"]]
    hutch("pool", "stop", "--all")
    for pid in keepers:
        assert wait_until(lambda: proc_comm(pid) is None, timeout=30), f"keeper {pid} still runs"
    assert pools(hutch) == []


def start(h, *opts, size=2):
    r = h("pool", "start", "--size", str(size), *opts)
    assert r.returncode == 0, r.stderr
    return r


def test_create_takes_a_ready_sandbox_and_the_keeper_refills(pool):
    start(pool, size=2)
    ready = pooled_ids(pool)
    assert len(ready) == 2
    [p] = pools(pool)
    assert (p["size"], p["ready"], p["alive"]) == (2, 2, True)
    assert p["key"].startswith("medium-none-")
    assert proc_comm(p["keeper_pid"]) is not None

    r = pool("create", "--json", "--ttl", "120", "--idle-timeout", "30")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["id"] in ready  # handed over, not made
    st = api(info["socket"], "GET", "/status")[1]
    assert st["state"] == "running"
    assert st["config"]["ttl_seconds"] == 120 and st["config"]["idle_timeout_seconds"] == 30
    assert 110 <= st["expires_in_seconds"] <= 120  # the session starts at the claim
    # usable like any sandbox, as appuser
    s, res = api(info["socket"], "POST", "/v1/run", {"cmd": "id -u; echo ok > /workspace/f; cat /workspace/f"})
    assert s == 200 and res["stdout"] == "1000\nok\n", res
    # the keeper replaces it; the claimed one is never pooled again
    assert wait_until(lambda: len(pooled_ids(pool)) == 2, timeout=30)
    assert info["id"] not in pooled_ids(pool)
    assert pool("rm", info["id"]).returncode == 0


def test_pooled_sandbox_serves_nobody_until_claimed(pool):
    start(pool, size=1)
    [sid] = pooled_ids(pool)
    sock = os.path.join(pool.rtdir, sid, "api.sock")
    for method, path, body in [("POST", "/v1/run", {"cmd": "true"}),
                               ("POST", "/v1/start_process", {"cmd": "sleep 1"}),
                               ("POST", "/v1/write_file", {"path": "/workspace/x", "content": "x"}),
                               ("GET", "/files?path=/etc/passwd", None)]:
        s, res = api(sock, method, path, body)
        assert s == 409 and res["error"]["code"] == "sandbox_pooled", (path, s, res)
        assert "hutch create" in res["error"]["message"]
    assert api(sock, "GET", "/status")[1]["state"] == "pooled"
    assert api(sock, "GET", "/health")[0] == 200
    r = pool("exec", sid, "--", "true")
    assert r.returncode != 0 and "waits in a warm pool" in r.stderr.decode()


def test_a_refused_request_is_answered_after_its_body(pool):
    """The refusal waits for the whole body: the connection stays open for
    the next request instead of closing under a client still sending (a
    broken pipe CI once saw). Headers and body go in separate writes."""
    start(pool, size=1)
    [sid] = pooled_ids(pool)
    conn = UnixHTTPConnection(os.path.join(pool.rtdir, sid, "api.sock"))
    try:
        body = json.dumps({"cmd": "sleep 1", "pad": "x" * 60000}).encode()
        for _ in range(3):
            conn.putrequest("POST", "/v1/start_process")
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            conn.send(body)
            resp = conn.getresponse()
            res = json.loads(resp.read())
            assert resp.status == 409 and res["error"]["code"] == "sandbox_pooled", res
            assert not resp.will_close, "the refusal closed the connection"
        conn.request("GET", "/status")
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["state"] == "pooled"
    finally:
        conn.close()


@pytest.mark.parametrize("body,code,words", [
    ({"bogus": 1}, 400, "unknown field 'bogus'"),
    ({"ttl_seconds": 0}, 400, "invalid ttl_seconds '0'"),
    ({"ttl_seconds": "x"}, 400, "invalid ttl_seconds 'x'"),
    ({"region": "eu-west-1"}, 400, "only the default region"),
    ({"on_destroy": ["x"]}, 400, "wrong type"),
])
def test_claim_rejects_bad_options_and_stays_pooled(pool, body, code, words):
    start(pool, size=1)
    [sid] = pooled_ids(pool)
    sock = os.path.join(pool.rtdir, sid, "api.sock")
    s, res = api(sock, "POST", "/claim", body)
    assert s == code and words in res["error"]["message"], res
    assert api(sock, "GET", "/status")[1]["state"] == "pooled"


def test_a_sandbox_is_claimed_once(pool):
    start(pool, size=1)
    [sid] = pooled_ids(pool)
    sock = os.path.join(pool.rtdir, sid, "api.sock")
    assert api(sock, "POST", "/claim", {"ttl_seconds": 60})[0] == 200
    s, res = api(sock, "POST", "/claim", {})
    assert s == 409 and res["error"]["code"] == "not_pooled", res
    # a normal sandbox cannot be claimed either
    sb = pool.create()
    s, res = api(sb.sock, "POST", "/claim", {})
    assert s == 409 and "not a pooled sandbox" in res["error"]["message"]
    sb.rm()
    pool("rm", sid)


def test_only_matching_creations_are_served(own_net, pool, tmp_path):
    start(pool, "--instance-type", "small", size=1)
    [sid] = pooled_ids(pool)
    script = tmp_path / "s.sh"
    script.write_text("true\n")
    for opts in (["--instance-type", "medium"], ["--instance-type", "small", "--setup-script", str(script)],
                 ["--instance-type", "small", "--network", "all"],
                 ["--instance-type", "small", "--on-create", "true"]):
        r = pool("create", *opts)
        assert r.returncode == 0, r.stderr
        made = r.stdout.decode().strip()
        assert made != sid and pooled_ids(pool) == [sid], opts
        assert pool("rm", made).returncode == 0
    r = pool("create", "--instance-type", "small")
    assert r.stdout.decode().strip() == sid
    pool("rm", sid)


def test_run_uses_the_pool(pool):
    start(pool, size=1)
    [sid] = pooled_ids(pool)
    r = pool("run", "--", "sh", "-c", "hostname")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip() == f"hutch-{sid}"
    # run deleted it; the keeper made another
    assert wait_until(lambda: len(pooled_ids(pool)) == 1 and pooled_ids(pool) != [sid], timeout=30)
    assert not os.path.exists(os.path.join(pool.rtdir, sid))


def journal_routes(h, sid):
    """The routes of a deleted sandbox's journal, once its supervisor kept
    it (after the deletion's answer)."""
    path = os.path.join(h.rtdir, ".gone", sid + ".journal")
    assert wait_until(lambda: os.path.exists(path), timeout=10)
    with open(path) as f:
        return [json.loads(line).get("route") for line in f if '"route"' in line]


def test_run_claims_and_runs_in_one_message(pool):
    """A warm run claims on exec.sock with its command: the sandbox's
    journal has the claim and the command, and no DELETE / (the
    connection that claimed is the run's hand-over, as a cold run's)."""
    start(pool, size=1)
    [sid] = pooled_ids(pool)
    r = pool("run", "--ttl", "300", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert r.returncode == 3 and r.stdout == b"out\n" and r.stderr == b"err\n", r
    assert not os.path.exists(os.path.join(pool.rtdir, sid))  # gone when run returns
    assert journal_routes(pool, sid) == ["POST /claim", "POST /exec"]


def test_a_warm_run_into_an_older_supervisors_sandbox(pool):
    """A pooled sandbox of a supervisor that does not read the request form
    without JSON (a keeper of an older hutch after an upgrade) has no
    exec-forms.sock: the run claims by POST /claim and sends its command by
    POST /exec's JSON, the same bytes and exit out."""
    start(pool, size=1)
    [sid] = pooled_ids(pool)
    os.unlink(os.path.join(pool.rtdir, sid, "exec-forms.sock"))
    r = pool("run", "-e", b"V=\x01\xff", "--", "sh", "-c", 'printf "%s" "$V"; echo err >&2; exit 3')
    assert r.returncode == 3 and r.stdout == b"\x01\xff" and r.stderr == b"err\n", r
    routes = journal_routes(pool, sid)
    assert routes[:2] == ["POST /claim", "POST /exec"], routes


def test_a_killed_warm_run_deletes_its_sandbox(pool):
    """The run's hand-over: the CLI killed (SIGKILL, nothing said) while its
    command runs, the claimed sandbox is deleted, not left for its TTL."""
    start(pool, size=1)
    [sid] = pooled_ids(pool)
    p = pool.popen("run", "--", "sleep", "1000")
    try:
        assert wait_until(lambda: state_of(pool, sid) == "running", timeout=30)
        st = os.path.join(pool.rtdir, sid, "state.json")
        with open(st) as f:
            init = json.load(f)["init_pid"]
        p.kill()
        p.wait(10)
        assert wait_until(lambda: not os.path.exists(os.path.join(pool.rtdir, sid)), timeout=10)
        assert wait_until(lambda: proc_comm(init) is None, timeout=10)
        assert os.path.exists(os.path.join(pool.rtdir, ".gone", sid))
    finally:
        if p.poll() is None:
            p.kill()


def claim_on_exec_sock(h, sid, body):
    """exec.sock's claim by hand: the body with a socketpair's end; the
    answer frame's type and JSON."""
    a, b = socket.socketpair()
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(os.path.join(h.rtdir, sid, "exec.sock"))
        data = json.dumps(body).encode()
        socket.send_fds(s, [struct.pack(">I", len(data)) + data], [b.fileno()])
        s.settimeout(10)
        head = b""
        while len(head) < 5:
            head += s.recv(5 - len(head))
        kind, n = struct.unpack(">BI", head)
        payload = b""
        while len(payload) < n:
            payload += s.recv(n - len(payload))
        return kind, json.loads(payload)
    finally:
        for x in (a, b, s):
            x.close()


def test_exec_sock_claims_refused_as_post_claim(pool):
    start(pool, size=1)
    [sid] = pooled_ids(pool)
    kind, res = claim_on_exec_sock(pool, sid, {"argv": ["true"]})
    assert kind == 7 and res["status"] == 400 and "claim" in res["error"]["message"], res
    kind, res = claim_on_exec_sock(pool, sid, {"claim": {"ttl_seconds": 0}})
    assert kind == 7 and res["status"] == 400, res
    assert "invalid ttl_seconds '0'" in res["error"]["message"]
    assert state_of(pool, sid) == "pooled"
    r = pool("create", "--json")  # claimed over HTTP: no stream to bring
    assert json.loads(r.stdout)["id"] == sid
    kind, res = claim_on_exec_sock(pool, sid, {"claim": {}})
    assert kind == 7 and res["status"] == 409 and res["error"]["code"] == "not_pooled", res
    pool("rm", sid)


def test_stop_deletes_unclaimed_and_keeps_claimed(pool):
    start(pool, size=2)
    claimed = pool.create()
    assert wait_until(lambda: len(pooled_ids(pool)) == 2, timeout=30)
    waiting = pooled_ids(pool)
    keeper = pools(pool)[0]["keeper_pid"]
    r = pool("pool", "stop")
    assert r.returncode == 0 and "stopped 1 pool" in r.stdout.decode(), r.stderr
    # stop returns once the keeper is gone and its sandboxes with it
    assert proc_comm(keeper) is None
    assert pooled_ids(pool) == [] and all(not os.path.exists(os.path.join(pool.rtdir, s)) for s in waiting)
    assert pools(pool) == []
    assert claimed.run("echo still here")["stdout"] == "still here\n"
    claimed.rm()


def test_dead_keeper_pool_is_not_used_and_gc_drains_it(pool):
    start(pool, size=2)
    waiting = pooled_ids(pool)
    keeper = pools(pool)[0]["keeper_pid"]
    os.kill(keeper, signal.SIGKILL)
    assert wait_until(lambda: proc_comm(keeper) is None, timeout=10)
    assert pools(pool)[0]["alive"] is False
    r = pool("create")
    assert r.returncode == 0
    made = r.stdout.decode().strip()
    assert made not in waiting  # a dead pool is not served from
    assert pool("rm", made).returncode == 0
    r = pool("gc")
    assert r.returncode == 0, r.stderr
    assert pooled_ids(pool) == [] and pools(pool) == []
    assert all(not os.path.exists(os.path.join(pool.rtdir, s)) for s in waiting)


@pytest.mark.parametrize("args,code,words", [
    (["pool"], USAGE, ["usage: hutch pool"]),
    (["pool", "bogus"], USAGE, ["unknown pool command 'bogus'", "start, stop or ls"]),
    (["pool", "start", "--size", "0"], USAGE, ["invalid --size '0'", "from 1 to 256"]),
    (["pool", "start", "--size", "many"], USAGE, ["invalid --size 'many'"]),
    (["pool", "start", "--size"], USAGE, ["invalid --size ''"]),
    (["pool", "stop", "--size", "2"], USAGE, ["--size applies to 'hutch pool start' only"]),
    (["pool", "start", "--ttl", "5", "--size", "1", "--setup-script", "/etc/hostname"], USAGE,
     ["cannot hold sandboxes with a setup script"]),
    (["pool", "start", "--on-create", "true"], USAGE, ["on_create"]),
    (["pool", "start", "--instance-type", "huge"], USAGE, ["unknown --instance-type 'huge'"]),
    (["pool", "stop"], NOT_FOUND, ["no pool runs for this configuration", "hutch pool ls"]),
    (["pool", "ls", "extra"], USAGE, ["unexpected argument 'extra'"]),
    (["pool", "ls", "--network", "all"], USAGE, ["'--network' does not apply"]),
])
def test_pool_usage_errors(pool, args, code, words):
    r = pool(*args)
    assert r.returncode == code, (r.returncode, r.stderr)
    for w in words:
        assert w in r.stderr.decode(), (w, r.stderr)
    assert pooled_ids(pool) == []


def test_a_first_fill_that_fails_is_said_and_leaves_no_pool(pool):
    """The keeper's first fill refused (every fork after the keeper's own
    refused with EAGAIN, the process limit, injected by strace): 70 with the
    limit's words and fix, no pool left, no sandbox; the same start without
    the fault then works."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    forks = "clone,clone3,fork,vfork"
    env = dict(pool.env, HUTCH_LXCFS="none")
    r = subprocess.run(["strace", "-f", "-o", "/dev/null", "-e", "trace=" + forks,
                        "-e", f"inject={forks}:error=EAGAIN:when=2+", HUTCH, "pool", "start",
                        "--size", "1", "--instance-type", "nano"],
                       env=env, capture_output=True, timeout=120)
    err = r.stderr.decode()
    assert r.returncode == 70, err
    assert err.startswith("hutch: cannot start the pool: the sandbox's supervisor: cannot fork: "
                          "the process limit is reached"), err
    assert "remove sandboxes or raise the limit" in err, err
    assert pools(pool) == [] and pooled_ids(pool) == []
    start(pool, "--instance-type", "nano", size=1)
    assert len(pooled_ids(pool)) == 1


def test_second_start_of_the_same_pool_is_refused(pool):
    start(pool, size=1)
    r = pool("pool", "start", "--size", "3")
    assert r.returncode == USAGE and "runs already" in r.stderr.decode(), r.stderr
    assert len(pooled_ids(pool)) == 1


def test_foreground_keeper_is_a_service_main_process(pool, tmp_path):
    """pool start --foreground (hutch-pool@.service, Type=notify): this
    process is the keeper; READY=1 reaches $NOTIFY_SOCKET once the pool is
    full; SIGTERM deletes the sandboxes not taken, keeps the claimed one,
    and exits 0."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify")
    notify.bind(path)
    notify.settimeout(60)
    env = dict(pool.env, NOTIFY_SOCKET=path)
    p = subprocess.Popen([HUTCH, "pool", "start", "--foreground", "--size", "2",
                          "--instance-type", "nano"], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert notify.recv(4096) == b"READY=1"
        line = p.stdout.readline().decode()
        assert line.startswith("pool nano-") and f"2 sandboxes ready (keeper pid {p.pid})" in line
        # It is the keeper: no other process was left behind.
        assert pools(pool)[0]["keeper_pid"] == p.pid and p.poll() is None
        waiting = pooled_ids(pool)
        assert len(waiting) == 2
        # A second keeper of the same pool is refused, in the foreground too.
        r = pool("pool", "start", "--foreground", "--size", "1", "--instance-type", "nano")
        assert r.returncode == USAGE and "runs already" in r.stderr.decode(), r.stderr
        claimed = pool.create("--instance-type", "nano")
        assert claimed.id in waiting
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 0, p.stderr.read()
        assert notify.recv(4096) == b"STOPPING=1"
        assert pooled_ids(pool) == [] and pools(pool) == []
        assert claimed.run("echo still here")["stdout"] == "still here\n"
        claimed.rm()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        notify.close()


def test_foreground_refuses_a_pool_that_cannot_be(pool):
    r = pool("pool", "start", "--foreground", "--on-create", "true")
    assert r.returncode == USAGE and "on_create" in r.stderr.decode(), r.stderr
    assert pools(pool) == []
