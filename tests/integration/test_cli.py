# SPDX-License-Identifier: Apache-2.0
"""The CLI: every error path has its exit code and a message naming the
fix; --help everywhere; Ctrl-C and SIGTERM to run and exec."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import HUTCH, cgroup_dirs_named, paths_gone, proc_comm, wait_until
from netfake import read_sysctl

USAGE, NOT_FOUND, GONE, NOT_CAPABLE, FAILURE = 64, 65, 66, 69, 70


def check(r, code, *words):
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err)
    for w in words:
        assert w in err, err
    # One message, prefixed, no stack of errors.
    assert err.startswith("hutch: "), err
    # The CLI names its flags, never the API's field names (issue 17).
    for field in ("ttl_seconds", "idle_timeout_seconds", "max_output_bytes", "instance_type",
                  "setup_script_timeout_seconds"):
        assert field not in err, err


@pytest.mark.parametrize("args,code,words", [
    (["bogus"], USAGE, ["unknown command 'bogus'", "hutch --help"]),
    (["create", "--bogus"], USAGE, ["unknown option '--bogus'", "hutch create --help"]),
    (["run", "-x", "--", "true"], USAGE, ["unknown option '-x'", "hutch run --help"]),
    (["create", "--ttl"], USAGE, ["'--ttl' needs a value"]),
    (["ls", "--ttl", "5"], USAGE, ["'--ttl' does not apply to 'ls'", "hutch ls --help"]),
    (["create", "--cwd", "/tmp"], USAGE, ["'--cwd' does not apply to 'create'"]),
    (["create", "extra"], USAGE, ["unexpected argument 'extra'"]),
    (["create", "--instance-type", "huge"], USAGE,
     ["unknown --instance-type 'huge'", "nano, micro, small, medium, large, xlarge, 2xlarge"]),
    (["create", "--ttl", "abc"], USAGE, ["invalid --ttl 'abc'", "whole number of seconds"]),
    (["create", "--ttl", "0"], USAGE, ["invalid --ttl '0'"]),
    (["create", "--ttl", "-5"], USAGE, ["invalid --ttl '-5'"]),
    (["create", "--ttl", "99999999999"], USAGE, ["invalid --ttl"]),
    (["create", "--idle-timeout", "x"], USAGE, ["invalid --idle-timeout 'x'"]),
    (["create", "--max-output", "0"], USAGE, ["invalid --max-output '0'"]),
    (["create", "--host-port", "8080"], USAGE,
     ["--host-port needs a network", "--network all or --network allow:HOST"]),
    (["run", "--network", "none", "--host-port", "8080", "--", "true"], USAGE,
     ["--host-port needs a network"]),
    (["create", "--network", "all", "--host-port", "0"], USAGE,
     ["invalid host port '0'", "from 1 to 65535"]),
    (["create", "--network", "all", "--host-port", "http"], USAGE, ["invalid host port 'http'"]),
    (["create", "--network", "all"] + [a for p in range(1, 18) for a in ("--host-port", str(8000 + p))],
     USAGE, ["too many host ports: at most 16"]),
    (["create", "--network", "allow:example.com", "--host-port", "443"], USAGE,
     ["--host-port 443 clashes with the allow list", "another port"]),
    (["create", "--network", "allow:example.com:8443", "--host-port", "8443"], USAGE,
     ["--host-port 8443 clashes"]),
    (["create", "--network", "allow:example.com", "--host-port", "53"], USAGE,
     ["--host-port 53 clashes"]),
    (["create", "--network", "bogus"], USAGE, ["bogus"]),
    (["create", "--region", "eu-west-1"], USAGE,
     ["only the default region, nl-north-1, can block traffic; in region eu-west-1 the "
      "sandbox runs only with network all"]),
    (["run", "--region", "us-east-2", "--", "true"], USAGE, ["in region us-east-2"]),
    (["create", "--region", "EU_West"], USAGE, ["invalid --region 'EU_West'", "nl-north-1"]),
    (["run"], USAGE, ["missing command"]),
    (["run", "--"], USAGE, ["missing command"]),
    (["exec"], USAGE, ["missing sandbox id"]),
    (["exec", "abcdefabcdef", "--", "true"], NOT_FOUND, ["no sandbox 'abcdefabcdef'", "hutch ls"]),
    (["exec", "abc", "--", "true"], NOT_FOUND, ["no sandbox 'abc'"]),
    (["exec", "not-an-id!", "--", "true"], USAGE, ["not a sandbox id", "12 lowercase hex"]),
    (["rm"], USAGE, ["missing sandbox id", "--all"]),
    (["rm", "abcdefabcdef"], NOT_FOUND, ["no sandbox 'abcdefabcdef'"]),
    (["rm", "--all", "abcdefabcdef"], USAGE, ["ids or --all, not both"]),
    (["inspect"], USAGE, ["missing sandbox id"]),
    (["inspect", "abcdefabcdef"], NOT_FOUND, ["no sandbox"]),
    (["version", "extra"], USAGE, ["unexpected argument 'extra'"]),
    (["rm", "--all=1"], USAGE, ["option '--all=1' takes no value", "hutch rm --help"]),
    # (diff's own here: test_diff.py runs each test on every root)
    (["port"], USAGE, ["missing sandbox id: hutch port ID [PORT]"]),
    (["port", "0123456789ab", "70000"], USAGE,
     ["invalid port '70000'", "1 to 65535 (80 or 80/tcp)"]),
    (["port", "0123456789ab", "80/udp"], USAGE, ["invalid port '80/udp'"]),
    (["port", "0123456789ab"], NOT_FOUND, ["no sandbox '0123456789ab'"]),
    (["net-log"], USAGE, ["missing sandbox id: hutch net-log ID"]),
    (["net-log", "0123456789ab", "--since", "-1"], USAGE,
     ["--since takes a record's number (its seq, 0 or more), not '-1'"]),
    (["diff"], USAGE, ["missing sandbox id: hutch diff ID"]),
    (["diff", "0123456789ab", "--process", ""], USAGE, ["empty --process", "hutch ps ID"]),
    (["diff", "0123456789ab", "--since", "1", "--process", "p1"], USAGE,
     ["--since and --process do not go together"]),
])
def test_error_paths(hutch, args, code, words):
    r = hutch(*args)
    check(r, code, *words)
    assert r.stdout == b""
    assert hutch.ids() == []


@pytest.mark.parametrize("args,words", [
    (["run", "--env-file", "BIN", "--", "true"],
     ["--env-file 'BIN': not a text file of at most 1 MiB"]),
    (["create", "--setup-script", "BIN"], ["--setup-script 'BIN' is not a text file"]),
])
def test_option_value_errors(hutch, tmp_path, args, words):
    """An option given a value it takes none of, a file that is not text:
    usage, nothing made, the file untouched."""
    binary = tmp_path / "binary"
    binary.write_bytes(b"A=1\0B=2\n")
    args = [str(binary) if a == "BIN" else a for a in args]
    check(hutch(*args), USAGE, *[w.replace("BIN", str(binary)) for w in words])
    assert hutch.ids() == []
    assert binary.read_bytes() == b"A=1\0B=2\n"


@pytest.mark.parametrize("args", [
    ["exec", "ID", "--", "true"], ["cp", "ID:f", "LOCAL"], ["cp", "LOCAL", "ID:f"],
    ["set-timeout", "ID", "60"], ["ps", "ID"], ["logs", "ID", "p1"], ["kill", "ID", "p1"],
    ["diff", "ID"], ["snapshot", "ID"], ["rollback", "ID", "snap"], ["fork", "ID"],
    ["stats", "--no-stream", "ID"], ["port", "ID"],
    ["journal", "ID"], ["events", "ID"], ["net-log", "ID"],  # without records: gone too
])
def test_a_dead_sandbox_is_gone_and_gc_removes_it(hutch, tmp_path, args):
    """A sandbox whose supervisor is gone (here: a state directory no
    supervisor holds): 66, naming gc as the fix; the local file and the
    directory stay until gc."""
    sid = "aaaaaaaaaaa1"
    os.makedirs(os.path.join(hutch.rtdir, sid))
    local = tmp_path / "local"
    local.write_bytes(b"kept")
    r = hutch(*[a.replace("ID", sid).replace("LOCAL", str(local)) for a in args])
    check(r, GONE, f"sandbox {sid} is not running: its supervisor is gone",
          "run 'hutch gc' to remove what it left")
    assert local.read_bytes() == b"kept" and hutch.ids() == [sid]
    r = hutch("gc")
    assert r.returncode == 0 and b"removed 1 " in r.stdout
    assert hutch.ids() == []


def test_no_arguments_prints_usage(hutch):
    r = hutch()
    assert r.returncode == USAGE
    assert b"usage: hutch COMMAND" in r.stderr


def test_exec_needs_a_command(hutch, sandbox):
    check(hutch("exec", sandbox.id), USAGE, "missing command")
    check(hutch("exec", sandbox.id, "--"), USAGE, "missing command")
    check(hutch("exec", sandbox.id, "--timeout", "soon", "--", "true"), USAGE,
          "invalid --timeout 'soon'")
    check(hutch("exec", sandbox.id, "--env", "NOEQUALS", "--", "true"), USAGE,
          "write it as NAME=VALUE")
    check(hutch("exec", sandbox.id, "--env", "1X=y", "--", "true"), USAGE,
          "invalid environment variable name '1X'")
    check(hutch("exec", sandbox.id, "--instance-type", "nano", "--", "true"), USAGE,
          "does not apply to 'exec'")


@pytest.mark.parametrize("json_opt", [[], ["--json"]])
def test_create_whose_id_cannot_be_written_deletes_it(hutch, json_opt):
    """create's id (or --json's text) goes out before the hand-over: a
    stdout that takes no bytes (/dev/full) is 70 naming why, and the
    sandbox goes (its supervisor sees its creator gone without the
    hand-over)."""
    with open("/dev/full", "wb") as full:
        r = subprocess.run([HUTCH, "create", "--instance-type", "nano", *json_opt], stdout=full,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=hutch.env,
                           timeout=120)
    check(r, 70, "write the id of sandbox", "No space left on device", "deleting it")
    assert wait_until(lambda: hutch.ids() == [], 30), hutch.ids()


def test_too_large_is_the_limit_class_s(hutch, sandbox):
    """A 413 answer is the limit class's exit code, 70 (docs/errors.md's one
    table), not usage's 64 (the CLI's own map of statuses said 64)."""
    big = ["x" * (100 << 10)] * 12  # 1.2 MiB, each under the host's 128 KiB per argument
    r = hutch("exec", sandbox.id, "--", "true", *big)
    check(r, 70, "command and environment are larger than")
    assert hutch("exec", sandbox.id, "--", "true").returncode == 0


def test_ambiguous_prefix(hutch):
    # Two dead sandbox directories sharing a prefix; gc removes them.
    for sid in ("aaaaaaaaaaa1", "aaaaaaaaaaa2"):
        os.makedirs(os.path.join(hutch.rtdir, sid))
    check(hutch("exec", "aaaa", "--", "true"), USAGE, "'aaaa' matches several sandboxes",
          "give more of the id")
    check(hutch("rm", "aaaaaaaaaaa"), USAGE, "matches several")
    r = hutch("gc")
    assert r.returncode == 0 and b"removed 2 " in r.stdout
    assert hutch.ids() == []


def as_nobody(*args):
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           HUTCH, *args], capture_output=True, timeout=30,
                          stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin", "HUTCH_RUNTIME_DIR": "/nonexistent/rt"})


@pytest.mark.parametrize("verb", [["create"], ["run", "--", "true"], ["ls"]])
def test_non_root_needs_a_runtime_dir_of_its_own(verb):
    """Rootless (test_rootless.py has the rest): a runtime dir the user
    cannot make is said before anything else."""
    r = as_nobody(*verb)
    check(r, NOT_CAPABLE, "create runtime dir '/nonexistent/rt'", "Permission denied",
          "set HUTCH_RUNTIME_DIR or XDG_RUNTIME_DIR to a directory of yours")
    assert not os.path.exists("/nonexistent/rt")


VERBS = ["run", "create", "exec", "ls", "inspect", "rm", "gc", "doctor", "version"]


@pytest.mark.parametrize("verb", VERBS)
def test_help_on_every_command(hutch, verb):
    r = hutch(verb, "--help")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert out.startswith(f"usage: hutch {verb}"), out
    assert r.stderr == b""
    if verb in ("run", "create"):
        assert "--instance-type" in out and "--ttl" in out and "--network" in out
    if verb in ("run", "exec"):
        assert "--cwd" in out and "--env" in out and "--timeout" in out
    assert hutch.ids() == []


def test_main_help_lists_commands_and_exit_codes(hutch):
    r = hutch("--help")
    assert r.returncode == 0
    out = r.stdout.decode()
    for verb in VERBS:
        assert f"  {verb}" in out
    for code in ("64", "65", "66", "69", "70", "124"):
        assert code in out


def test_version(hutch):
    r = hutch("version")
    assert r.returncode == 0 and r.stdout.startswith(b"hutch ")
    v = json.loads(hutch("version", "--json").stdout)["version"]
    assert v and v in r.stdout.decode()


@pytest.mark.parametrize("json_", [False, True])
def test_version_to_a_stdout_it_cannot_write(json_):
    """version writes its line with write(2), not stdio (issue 31: CLI
    start): a stdout that refuses it is said, not dropped at exit."""
    args = [HUTCH, "version"] + (["--json"] if json_ else [])
    with open("/dev/full", "wb") as full:
        r = subprocess.run(args, stdout=full, stderr=subprocess.PIPE, timeout=30)
    check(r, FAILURE, "cannot write the version to stdout", "No space left on device",
          "give the command a stdout it can write to")
    r = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30,
                       preexec_fn=lambda: os.close(1))
    check(r, FAILURE, "cannot write the version to stdout", "Bad file descriptor")


def test_doctor_json(hutch):
    r = hutch("doctor", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)  # the failing check is on stdout
    checks = json.loads(r.stdout)
    names = {c["check"] for c in checks}
    assert {"mode", "user namespaces", "namespaces", "cgroups", "seccomp",
            "HTTP server"} <= names
    for c in checks:
        assert set(c) >= {"check", "ok", "required", "detail"}
        if c["required"]:
            assert c["ok"] is True, c
    views = next(c for c in checks if c["check"] == "/proc views")
    assert views["ok"] == (shutil.which("lxcfs") is not None and os.getuid() == 0), views
    r = hutch("doctor")
    assert r.returncode == 0 and r.stdout


def test_doctor_says_libnl_is_missing(hutch, tmp_path):
    """libnl is loaded at run time by network all and allow (netpolicy.h):
    ldd does not show it, doctor tries it and names the packages."""
    libnl = next(c for c in json.loads(hutch("doctor", "--json").stdout)
                 if c["check"] == "libnl")
    assert libnl["ok"] is True and libnl["required"] is False, libnl
    broken = tmp_path / "lib"
    broken.mkdir()
    (broken / "libnl-route-3.so.200").write_bytes(b"")  # found first, not a library
    r = hutch("doctor", "--json", env={"LD_LIBRARY_PATH": str(broken)})
    assert r.returncode == 0, r.stderr  # not required: none works without it
    libnl = next(c for c in json.loads(r.stdout) if c["check"] == "libnl")
    assert libnl["ok"] is False and "apt-get install libnl-route-3-200" in libnl["detail"], libnl


# ---- signals to the CLI ----

def only_sandbox(hutch):
    ids = hutch.ids()
    return ids[0] if len(ids) == 1 else None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_run_deletes_the_sandbox(hutch, sig):
    p = hutch.popen("run", "--", "sh", "-c", "touch /tmp/started; sleep 1000")
    try:
        assert wait_until(lambda: only_sandbox(hutch), timeout=20)
        sid = only_sandbox(hutch)
        assert wait_until(lambda: hutch("exec", sid, "--", "test", "-e", "/tmp/started")
                          .returncode == 0, timeout=10)
        st = json.loads(hutch("inspect", sid).stdout)
        cgroups = cgroup_dirs_named(sid)
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + int(sig), err
    # run returns after the delete: the sandbox's processes are dead and it
    # is gone; the supervisor removes the cgroups right after, then exits.
    assert hutch.ids() == []
    assert proc_comm(st["init_pid"]) is None
    assert paths_gone(cgroups)
    assert wait_until(lambda: proc_comm(st["supervisor_pid"]) is None, 5)


def maps_library(pid, name):
    with open("/proc/%d/maps" % pid) as f:
        return name in f.read()


def test_run_command_goes_with_the_handover_and_its_api_starts_on_demand(hutch):
    """hutch run sends its command with the hand-over ("E"), not through
    POST /exec: a run's supervisor loads libmicrohttpd only when a client
    connects to its socket, and serves that client."""
    p = hutch.popen("run", "-i", "--", "sh", "-c", "echo started; read x; echo got $x",
                    stdin=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"started\n"
        sid = only_sandbox(hutch)
        with open(os.path.join(hutch.rtdir, sid, "state.json")) as f:
            sup = json.load(f)["supervisor_pid"]
        assert not maps_library(sup, "libmicrohttpd")
        r = hutch("exec", sid, "--", "echo", "hi")
        assert r.returncode == 0 and r.stdout == b"hi\n", r.stderr
        assert maps_library(sup, "libmicrohttpd")
        out, err = p.communicate(b"x\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert out == b"got x\n"
    assert hutch.ids() == []


def test_run_command_larger_than_the_socket_goes_after_the_answer(hutch):
    """hutch run sends its command with the create, before the answer, when
    the request fits the socketpair at once; a larger one (an environment of
    600 KB here: more than a socket's default buffer) goes with the acknowledgement instead, and runs the same."""
    env = []
    for i in range(5):  # one argument holds at most 128 KiB
        env += ["-e", "BIG%d=%s" % (i, "x" * 120000)]
    r = hutch("run", *env, "--", "sh", "-c", 'echo $((${#BIG0} + ${#BIG4}))')
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"240000\n"
    r = hutch("run", "--", "sh", "-c", "echo small; exit 7")
    assert r.returncode == 7 and r.stdout == b"small\n", r.stderr
    assert hutch.ids() == []


def test_run_refusals_are_exec_s(hutch):
    """What POST /exec refuses, a run's hand-over refuses the same way: the
    message and the exit code (a REFUSED frame), the journal's line."""
    r = hutch("run", "--access", "files", "--", "true")
    assert r.returncode == 69  # not_capable (403 access_denied), as exec
    assert b'created with access "files": it reads and writes files and runs no commands' \
        in r.stderr
    gone = os.path.join(hutch.rtdir, ".gone")

    def journals():
        return [f for f in os.listdir(gone) if f.endswith(".journal")] \
            if os.path.isdir(gone) else []
    # kept in .gone by the teardown after the answer
    assert wait_until(journals, timeout=20)
    [journal] = journals()
    with open(os.path.join(gone, journal)) as f:
        lines = [json.loads(line) for line in f]
    assert [(x.get("route"), x.get("status")) for x in lines if "route" in x] == \
        [("POST /exec", 403)]
    r = hutch("run", "--", "no-such-program-x")
    assert r.returncode == 127
    assert b"cannot execute 'no-such-program-x'" in r.stderr
    assert hutch.ids() == []


def test_sigint_to_exec_kills_only_that_command(hutch, sandbox):
    p = hutch.popen("exec", sandbox.id, "--", "sh", "-c", "echo first; sleep 1000")
    try:
        # Output streams as it comes: the first line arrives while the
        # command still runs.
        assert p.stdout.readline() == b"first\n"
        # sh forks and execs sleep after it wrote "first".
        assert wait_until(lambda: sandbox.count("sleep") == 1, timeout=5), sandbox.procs()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err
    assert wait_until(lambda: sandbox.count("sleep") == 0, timeout=5), sandbox.procs()
    r = hutch("exec", sandbox.id, "--", "echo", "next")
    assert r.returncode == 0 and r.stdout == b"next\n"
    assert hutch.ids() == [sandbox.id]


@pytest.mark.parametrize("delay_ms", [0, 5, 10, 20, 30, 50])
def test_sigint_to_run_during_create_leaves_nothing(hutch, delay_ms):
    # Wherever the signal lands (before, during or after create), once the
    # CLI has exited no sandbox is left running. The delay is what varies.
    p = hutch.popen("run", "--", "sleep", "1000")
    time.sleep(delay_ms / 1000)
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode in (130, -signal.SIGINT), p.returncode
    assert hutch.ids() == []


@pytest.mark.parametrize("var,value,words", [
    ("HUTCH_RESOLVER", "dns.example", ["HUTCH_RESOLVER=dns.example", "invalid resolver",
                                       "IPv4 address with an optional port"]),
    ("HUTCH_RESOLVER", "192.0.2.53:0", ["invalid resolver '192.0.2.53:0'"]),
    ("HUTCH_NET_POOL", "10.200.0.0", ["HUTCH_NET_POOL=10.200.0.0"]),
    ("HUTCH_NET_POOL", "10.200.0.0/33", ["HUTCH_NET_POOL=10.200.0.0/33"]),
])
def test_bad_network_environment(hutch, var, value, words):
    r = hutch("create", "--network", "all", env={var: value})
    assert r.returncode == USAGE, r.stderr
    for w in words:
        assert w in r.stderr.decode(), (w, r.stderr)
    assert hutch.ids() == []


def test_doctor_names_a_firewall_that_drops_forwarding(own_net, hutch):
    """A base chain of another table that drops forwarded packets by policy
    (Docker's FORWARD) would silently cut network all off: doctor says so,
    naming the chain and the fix. (In a netns of the test's own: in the
    machine's, the chain cut off every sandbox of mode all there.)"""
    table = f"hutch_doctor_test_{os.getpid()}"
    r = subprocess.run(["nft", "-f", "-"], input=(
        f"table ip {table} {{\n chain blockfwd {{\n"
        "  type filter hook forward priority 100; policy drop;\n }\n}\n"
    ).encode(), capture_output=True)
    assert r.returncode == 0, r.stderr
    try:
        r = hutch("doctor", "--json")
        assert r.returncode == 0, (r.stdout, r.stderr)  # a warning, not a failure
        [fw] = [c for c in json.loads(r.stdout) if c["check"] == "forwarding"]
        assert fw["ok"] is False and fw["required"] is False, fw
        assert f"table ip {table} chain blockfwd" in fw["detail"] and "DOCKER-USER" in fw["detail"], fw
    finally:
        subprocess.run(["nft", "delete", "table", "ip", table], check=True)
    [fw] = [c for c in json.loads(hutch("doctor", "--json").stdout) if c["check"] == "forwarding"]
    assert fw["ok"] is True, fw


def test_forwarding_record_is_the_netns_own(own_net, hutch):
    """ip_forward, the table and the links are a network namespace's own,
    so is hutch's record that it turned forwarding on: a gc in another
    namespace (the machine's) neither takes it nor writes that namespace's
    knob back; the last sandbox out of this one turns this one's off."""
    rec = f"/run/hutch-net/forwarding-{os.stat('/proc/thread-self/ns/net').st_ino}"
    fwd = lambda: read_sysctl("net.ipv4.ip_forward")
    assert fwd() == "0" and not os.path.exists(rec)  # a new namespace's
    sb = hutch.create("--network", "all")
    assert fwd() == "1" and os.path.exists(rec)
    with own_net.outside():
        assert hutch("gc").returncode == 0
    assert fwd() == "1" and os.path.exists(rec)
    assert sb.rm().returncode == 0
    assert wait_until(lambda: fwd() == "0" and not os.path.exists(rec), 20), (fwd(), rec)


def test_rm_is_idempotent(hutch):
    """rm of a sandbox that already ended succeeds quietly; -f also passes
    over ids that name no sandbox; without -f those stay an error
    (issue 17)."""
    sb = hutch.create("--instance-type", "nano")
    assert hutch("rm", sb.id).returncode == 0
    r = hutch("rm", sb.id)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b""), r
    r = hutch("rm", "-f", "abcdef123456")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b""), r
    r = hutch("rm", "abcdef123456")
    check(r, NOT_FOUND, "no sandbox 'abcdef123456'")
    # A live one among them is still removed, and named.
    sb2 = hutch.create("--instance-type", "nano")
    r = hutch("rm", "-f", "abcdef123456", sb.id, sb2.id)
    assert r.returncode == 0 and r.stdout.decode().split() == [sb2.id], r
    assert hutch.ids() == []


def test_one_json_schema_for_a_sandbox(hutch):
    """create --json, ls --json and inspect describe a sandbox with the same
    keys and values (issue 17: they said status vs state, Unix integers vs
    ISO strings); a dead one says status "dead" (issue 18 #5)."""
    r = hutch("create", "--json", "--instance-type", "nano")
    created = json.loads(r.stdout)
    sid = created["id"]
    listed = json.loads(hutch("ls", "--json").stdout)[0]
    inspected = json.loads(hutch("inspect", sid).stdout)
    keys = ["id", "status", "live", "created_at", "created_at_unix", "expires_at",
            "expires_at_unix", "socket"]
    for view in (created, listed, inspected):
        assert [view.get(k) for k in keys] == [created.get(k) for k in keys], view
        assert view["config"]["instance_type"] == "nano"
    assert created["status"] == "running" and created["live"] is True
    assert created["created_at"].endswith("Z") and isinstance(created["created_at_unix"], int)
    assert created["expires_at_unix"] - created["created_at_unix"] == 86400
    # Its supervisor killed: ls says dead, not running.
    os.kill(inspected["supervisor_pid"], signal.SIGKILL)
    assert wait_until(lambda: json.loads(hutch("ls", "--json").stdout)[0]["live"] is False, 10)
    dead = json.loads(hutch("ls", "--json").stdout)[0]
    assert (dead["status"], dead["live"]) == ("dead", False), dead
    assert hutch("gc").returncode == 0


def doctor_check(r, name):
    assert r.returncode in (0, 69), r.stderr
    return next(c for c in json.loads(r.stdout) if c["check"] == name)


def test_doctor_user_namespaces_in_a_chroot(hutch, tmp_path):
    # Outside: user namespaces work (pass). In a chroot the kernel refuses
    # them although the sysctl allows them: doctor says the chroot is why
    # (fail), not "user namespaces are off".
    assert doctor_check(hutch("doctor", "--json"), "user namespaces")["ok"]
    root = tmp_path / "root"
    for d in ("usr", "proc", "hutch"):
        (root / d).mkdir(parents=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink("/" + link):
            os.symlink(os.readlink("/" + link), root / link)
    hutch_dir = os.path.dirname(os.path.realpath(HUTCH))
    script = (f"mount --rbind /usr {root}/usr && mount -t proc proc {root}/proc && "
              f"mount --bind {hutch_dir} {root}/hutch && "
              f"exec chroot {root} /hutch/{os.path.basename(HUTCH)} doctor --json")
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "HUTCH_RUNTIME_DIR": hutch.rtdir})
    c = doctor_check(r, "user namespaces")
    assert not c["ok"] and "chroot" in c["detail"] and "are off" not in c["detail"], c


def test_a_runtime_dir_too_long(hutch, tmp_path):
    """A runtime directory over HUTCH_RUNTIME_DIR_MAX (512 bytes, the bound
    of a sandbox's paths, runtime/state.h): usage, naming the variable as
    the fix, before anything is made in it (main: 70, a socket's name)."""
    rt = str(tmp_path / ("a" * 200) / ("b" * 200) / ("c" * 150))
    r = hutch("create", "--no-limits", "--workspace", "tmpfs", env={"HUTCH_RUNTIME_DIR": rt})
    check(r, USAGE, "bytes long, over 512: set HUTCH_RUNTIME_DIR to a shorter one")
    assert not os.path.exists(rt)
    os.makedirs(os.path.join(rt, "aaaaaaaaaaa1"))
    r = hutch("exec", "aaaaaaaaaaa1", "--", "true", env={"HUTCH_RUNTIME_DIR": rt})
    check(r, USAGE, "over 512: set HUTCH_RUNTIME_DIR to a shorter one")
