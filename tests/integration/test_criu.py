"""Full snapshots (processes and memory): CRIU's dump of a plain sandbox's
whole tree into the store (supervisor/fullsnap.c), refused where the CRIU
found (HUTCH_CRIU, else PATH) fails 'criu check' (runtime/criu.c) and for
what a restore could not remake, and restored into new sandboxes
(supervisor/fullrestore.c, docs/snapshots.md). The CRIUs of the refusal tests are small scripts
printing what the real ones print on this project's hosts (Debian 12's
3.17.1 on Linux 6.18, a 4.2 built from source); the dump is tried with a
real one where there is one, skipped with the reason otherwise (CI has
Debian's 3.17.1 only)."""
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tarfile
import time

import pytest

CRIU_317 = """#!/bin/sh
echo run >> "$0.runs"
case "$1" in
--version) echo 'Version: 3.17.1'; exit 0 ;;
esac
echo 'Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds' >&2
echo 'Error (criu/vdso.c:613): vdso: Failed to fill self vdso symtable' >&2
echo 'Error (criu/kerndat.c:1615): kerndat_vdso_fill_symtable failed when initializing kerndat.' >&2
echo 'Error (criu/crtools.c:260): Could not initialize kernel features detection.' >&2
exit 1
"""

CRIU_42 = """#!/bin/sh
echo run >> "$0.runs"
case "$1" in
--version) printf 'Version: 4.2\\nGitID: v4.2\\n'; exit 0 ;;
esac
echo "Warn  (criu/kerndat.c:1799): Hardware breakpoints don't seem to work (status=137f)" >&2
echo 'Looks good.'
"""

# Debian 12's 3.17.1 on its own kernel (6.1, the v2 VM): 'criu check' passes,
# the dump does not know an option hutch passes.
CRIU_317_ON_61 = """#!/bin/sh
echo run >> "$0.runs"
case "$1" in
--version) echo 'Version: 3.17.1'; exit 0 ;;
check) echo 'Looks good.'; exit 0 ;;
esac
echo 'Error (criu/config.c:1033): Invalid value for --network-lock: skip' >&2
exit 1
"""


def fake_criu(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def runs(path):
    p = str(path) + ".runs"
    return len(open(p).read().split()) if os.path.exists(p) else 0


def full_line(h, env=None, ok=False):
    r = h("doctor", "--json", env=env)
    assert r.returncode in (0, 69), r.stderr
    [c] = [c for c in json.loads(r.stdout) if c["check"] == "full snapshots"]
    assert c["ok"] is ok and c["required"] is False, c
    return c["detail"]


def refusal(h, env=None):
    # Refused before the sandbox is asked (so no sandbox is needed), exit 69.
    r = h("snapshot", "0123456789ab", "--full", env=env)
    assert r.returncode == 69, (r.returncode, r.stderr)
    return r.stderr.decode()


def test_no_criu_names_the_version_that_works(hutch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": f"{empty}:/usr/bin:/bin"}  # Debian's criu is in /usr/sbin
    for text in (refusal(hutch, env), full_line(hutch, env)):
        assert "need a CRIU that passes 'criu check'" in text, text
        assert "no criu in PATH and HUTCH_CRIU unset" in text, text
        assert "Unexpected rt vDSO area bounds" in text, text  # why Debian 12's will not do
        assert "CRIU 4.1 or later" in text and "set HUTCH_CRIU" in text, text
        assert "filesystem snapshots work" in text, text
    text = refusal(hutch, {"HUTCH_CRIU": "criu"})
    assert "HUTCH_CRIU='criu' is not an executable file's absolute path" in text, text


def test_criu_failing_its_check_is_quoted_and_cached(hutch, tmp_path):
    criu = fake_criu(tmp_path, "criu", CRIU_317)
    # No runtime dir yet: nothing is made for the cache, criu runs each time.
    refusal(hutch, {"HUTCH_CRIU": str(criu)})
    assert runs(criu) == 2 and not os.path.exists(hutch.rtdir)
    refusal(hutch, {"HUTCH_CRIU": str(criu)})
    assert runs(criu) == 4
    os.makedirs(hutch.rtdir)
    os.unlink(str(criu) + ".runs")
    env = {"HUTCH_CRIU": str(criu)}
    text = refusal(hutch, env)
    assert f"criu 3.17.1 at {criu} fails it on Linux {os.uname().release}: " \
           "vdso: Unexpected rt vDSO area bounds; vdso: Failed to fill self vdso symtable" in text, text
    assert "CRIU 4.1 or later" in text, text
    assert runs(criu) == 2  # --version, check
    # Cached per binary in the runtime dir: doctor does not run it again...
    assert "Unexpected rt vDSO area bounds" in full_line(hutch, env)
    assert runs(criu) == 2
    cache = open(os.path.join(hutch.rtdir, ".criu-check")).read().split("\n")
    assert cache[0].startswith(f"{criu} ") and cache[1] == "0" and cache[2] == "3.17.1", cache
    # ...until the binary changes (another size: another key whatever the mtime).
    criu.write_text(CRIU_42 + "\n")
    assert "criu 4.2 at" in full_line(hutch, env, ok=True)
    assert runs(criu) == 5  # --version, check, and the dump's option


def test_criu_that_passes_is_named_with_what_is_built(hutch, tmp_path):
    criu = fake_criu(tmp_path, "criu", CRIU_42)
    path = {"PATH": f"{tmp_path}:/usr/bin:/bin"}  # found in PATH this time
    os.makedirs(hutch.rtdir)
    text = full_line(hutch, path, ok=True)
    assert f"criu 4.2 at {criu} passes 'criu check' on Linux {os.uname().release}:" in text, text
    assert "'hutch snapshot --full' dumps a plain sandbox and 'hutch create --snapshot' " \
        "restores it into a new one, 'hutch fork --full' does both" in text, text
    assert "(cached)" in full_line(hutch, path, ok=True)
    assert runs(criu) == 3  # --version, check, dump --network-lock skip


def test_criu_that_refuses_hutchs_options_is_named(hutch, tmp_path):
    # A CRIU that passes 'criu check' but whose dump does not know
    # --network-lock skip (Debian 12's 3.17.1 on 6.1): refused at once, not
    # a dump failing later with nothing said ("criu dump failed (exit 1): "
    # in the v2 VM before), and doctor says why; the verdict cached.
    criu = fake_criu(tmp_path, "criu", CRIU_317_ON_61)
    os.makedirs(hutch.rtdir)
    env = {"HUTCH_CRIU": str(criu)}
    for text in (refusal(hutch, env), full_line(hutch, env)):
        assert f"criu 3.17.1 at {criu} passes 'criu check' on Linux {os.uname().release}, but " \
            "'criu dump --network-lock skip' says: Invalid value for --network-lock: skip" in text, text
        assert "set HUTCH_CRIU to it" in text and "filesystem snapshots work" in text, text
    assert runs(criu) == 3
    cache = open(os.path.join(hutch.rtdir, ".criu-check")).read().split("\n")
    assert cache[1] == "2" and cache[2] == "3.17.1", cache


def test_a_criu_that_is_not_one_makes_no_snapshot(hutch, tmp_path):
    # A 'criu' that passes check but dumps nothing: no snapshot is named.
    criu = fake_criu(tmp_path, "criu", CRIU_42)
    hutch.env["HUTCH_CRIU"] = str(criu)
    sb = hutch.create("--image", "host", "--change-lists", "off")
    r = hutch("snapshot", sb.id, "fake", "--full")
    assert r.returncode == 70, r.stderr
    assert b"criu dump exited 0 without an inventory.img" in r.stderr, r.stderr
    store = hutch.env["HUTCH_IMAGE_STORE"]
    assert os.listdir(os.path.join(store, "full")) == [] and os.listdir(os.path.join(store, "tmp")) == []
    sb.rm()


def test_full_snapshot_refuses_what_a_restore_cannot_remake(hutch, tmp_path):
    # Checked before CRIU is looked for: the same on every host (exit 64, 400).
    vol = tmp_path / "vol"
    vol.mkdir()
    for opts, want in (((), "--change-lists off"),
                       (("-v", f"{vol}:/mnt", "--change-lists", "off"), "volumes (-v)")):
        sb = hutch.create("--image", "host", *opts)
        r = hutch("snapshot", sb.id, "--full", env={"HUTCH_CRIU": sys.executable})
        if r.returncode == 69:  # the CLI's CRIU first: a real one is needed for the rest
            r = None
        st, res = sb.api("POST", "/v1/snapshot", {"type": "full"})
        assert st == 400, res
        assert want in res["error"]["message"], res
        assert r is None or r.returncode == 64, r.stderr
        sb.rm()
    sb = hutch.create("--image", "host", "--change-lists", "off")
    st, res = sb.api("POST", "/v1/snapshot", {"type": "full", "env": ["A=1"]})
    assert st == 400 and "'env' is for filesystem snapshots" in res["error"]["message"], res
    sb.rm()


def test_api_refusal_uses_the_criu_of_create(hutch, tmp_path):
    # The supervisor wipes its environment but keeps HUTCH_CRIU; its cache is
    # the sandbox's runtime dir's.
    criu = fake_criu(tmp_path, "criu", CRIU_317)
    hutch.env["HUTCH_CRIU"] = str(criu)
    sb = hutch.create("--image", "host", "--change-lists", "off")
    st, res = sb.api("POST", "/v1/snapshot", {"type": "full"})
    assert st == 501, res
    msg = res["error"]["message"]
    assert f"criu 3.17.1 at {criu} fails it" in msg and "Unexpected rt vDSO area bounds" in msg, msg
    assert runs(criu) == 2
    st, res = sb.api("POST", "/v1/snapshot", {"type": "full"})
    assert st == 501 and runs(criu) == 2, res
    assert "full snapshots" in full_line(hutch)  # PATH's (none) now: another key
    sb.rm()


def real_criu():
    """A CRIU that passes 'criu check' here (HUTCH_TEST_CRIU, HUTCH_CRIU, else
    PATH and the sbin dirs), or the exact reason there is none."""
    path = os.environ.get("HUTCH_TEST_CRIU") or os.environ.get("HUTCH_CRIU") or \
        shutil.which("criu", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if not path:
        return None, "no CRIU on this host (HUTCH_TEST_CRIU, HUTCH_CRIU, PATH, /usr/sbin, /sbin)"
    if os.geteuid() != 0:
        return None, "criu check needs root"
    r = subprocess.run([path, "check"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        err = [ln for ln in r.stderr.splitlines() if ln.startswith("Error")][:1]
        return None, f"{path} fails 'criu check' here: {err[0] if err else r.stderr.strip()}"
    return path, None


def test_a_real_criu_is_named_in_doctor(hutch):
    path, why = real_criu()
    if not path:
        pytest.skip(why)
    text = full_line(hutch, {"HUTCH_CRIU": path}, ok=True)
    assert f"at {path} passes 'criu check'" in text, text
    assert "'hutch create --snapshot' restores it into a new one" in text, text
    assert "'hutch fork --full' does both" in text, text


def test_a_sandbox_is_what_criu_can_dump(hutch):
    # What a dump of a sandbox's whole tree (init its root) needs of it, no
    # CRIU needed to check (docs/snapshots.md, "Full snapshots"): init leads
    # a session of its own (CRIU refuses a session led outside the pid
    # namespace), its socket to the supervisor lives in the sandbox's network
    # namespace (CRIU finds sockets only in the namespaces it dumps), and the
    # /proc views are private mounts (CRIU restores no peer group whose mounts
    # have different roots).
    sb = hutch.create()
    init = json.loads(hutch("inspect", sb.id).stdout)["init_pid"]
    stat = open(f"/proc/{init}/stat").read().rsplit(")", 1)[1].split()
    assert int(stat[3]) == init, stat  # session id (field 6) = init's host pid
    assert sb.sh("ps -o sid= -p 1").strip() == "1"
    socks = {os.readlink(f"/proc/{init}/fd/{fd}") for fd in os.listdir(f"/proc/{init}/fd")}
    inodes = {s[len("socket:["):-1] for s in socks if s.startswith("socket:[")}
    assert inodes, socks
    with open(f"/proc/{init}/net/unix") as f:  # the sandbox's network namespace's
        listed = {line.split()[6] for line in f.readlines()[1:]}
    assert inodes <= listed, (inodes, listed)
    with open(f"/proc/self/net/unix") as f:  # not the host's
        assert not inodes & {line.split()[6] for line in f.readlines()[1:]}
    views = [ln for ln in open(f"/proc/{init}/mountinfo") if " - fuse.lxcfs " in ln]
    assert all("shared:" not in ln.split(" - ")[0] for ln in views), views
    # A command's request as large as before the new socket still passes.
    big = {f"BIG{i}": "x" * 100000 for i in range(9)}  # one string: at most 128 KiB (execve)
    assert sb.sh("printenv | grep -c ^BIG", env=big).strip() == "9"
    sb.rm()


HOLDER = """
import hashlib, os, socket
buf = bytearray(os.urandom(20 << 20))
f = open('/workspace/log.txt', 'a')
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 8123))
s.listen(4)
n = 0
while True:
    c, _ = s.accept()
    n += 1
    f.write('n=%d\\n' % n)
    f.flush()
    c.sendall(('n=%d pos=%d sum=%s' % (n, f.tell(), hashlib.sha1(buf).hexdigest()[:12])).encode())
    c.close()
"""

ASK = "import socket; s = socket.create_connection(('127.0.0.1', 8123), timeout=5); print(s.recv(200).decode())"


def ask(sb):
    res = sb.run(argv=["python3", "-c", ASK])
    return res["stdout"].strip() if res["exit_code"] == 0 else ""


def holder(hutch, path):
    """A plain sandbox running the issue's process: 20 MiB of memory, a
    file open for appending, a TCP listener on loopback."""
    hutch.env["HUTCH_CRIU"] = path
    sb = hutch.create("--image", "host", "--change-lists", "off")
    r = hutch("exec", "-d", sb.id, "--", "python3", "-c", HOLDER)
    assert r.returncode == 0, r.stderr
    for _ in range(200):
        out = ask(sb)
        if out:
            return sb, out
        time.sleep(0.05)
    raise AssertionError("the holder never listened")


def dumpable(sb, hutch):
    # /proc/PID/status is owned by init's uid only while init is dumpable.
    init = json.loads(hutch("inspect", sb.id).stdout)["init_pid"]
    return os.stat(f"/proc/{init}/status").st_uid != 0


def test_full_snapshot_of_a_live_sandbox(hutch):
    path, why = real_criu()
    if not path:
        pytest.skip(why)
    sb, first = holder(hutch, path)
    assert first.startswith("n=1 pos=4 "), first
    runs_before = [ln for ln in open("/proc/self/mountinfo") if ln.split()[4] == "/run"]
    r = hutch("snapshot", sb.id, "mem1", "--full", "--json")
    assert r.returncode == 0, r.stderr
    # CRIU's kernel features' cache, which it keeps only on a tmpfs /run: the
    # dump had a /run of its own (the host's mounts are as they were) and
    # its cache is kept in the runtime dir for this binary, kernel and boot.
    assert [ln for ln in open("/proc/self/mountinfo") if ln.split()[4] == "/run"] == runs_before
    kdat = os.path.join(hutch.env["HUTCH_RUNTIME_DIR"], ".criu-kdat")
    st = os.stat(kdat)
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == 0 and st.st_size > 200, oct(st.st_mode)
    key = open(kdat, "rb").read().split(b"\n", 1)[0].decode()
    boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    assert key.startswith(path + " ") and key.endswith(os.uname().release + " " + boot), key
    # One CRIU finds stale (not its own) is replaced by the one it detects.
    with open(kdat, "wb") as f:
        f.write(key.encode() + b"\nnot CRIU's")
    out = json.loads(r.stdout)
    assert out["name"] == "mem1" and out["type"] == "full" and out["source"] == sb.id, out
    assert out["bytes"] > 20 << 20, out  # the holder's memory is in it
    # The source ran on, its state kept; init is not dumpable again.
    assert ask(sb) == "n=2 pos=8 " + first.split()[2], first
    r = hutch("snapshot", sb.id, "mem1b", "--full")
    assert r.returncode == 0, r.stderr
    healed = open(kdat, "rb").read()
    assert healed.startswith(key.encode() + b"\n") and not healed.endswith(b"not CRIU's"), healed[:200]
    assert len(healed) == st.st_size, (len(healed), st.st_size)
    assert hutch("snapshot", "rm", "mem1b").returncode == 0
    assert ask(sb) == "n=3 pos=12 " + first.split()[2], first
    assert not dumpable(sb, hutch)
    # Private to the store's owner: it holds memory.
    d = os.path.join(hutch.env["HUTCH_IMAGE_STORE"], "full", "mem1")
    for root, dirs, files in os.walk(d):
        assert os.stat(root).st_mode & 0o777 == 0o700, root
        for f in files:
            st = os.lstat(os.path.join(root, f))
            assert st.st_mode & 0o777 == 0o600 and st.st_uid == 0, (f, oct(st.st_mode))
    # The disk's files, read in CRIU's stop: the log as the memory has it.
    with tarfile.open(os.path.join(d, "files.tar")) as tf:
        log = tf.getmember("workspace/log.txt")
        assert log.size == 4 and tf.extractfile(log).read() == b"n=1\n", log
    assert sorted(os.listdir(d)) == ["files.tar", "images", "snapshot.json"], os.listdir(d)
    assert out["file_bytes"] >= 4, out
    meta = json.load(open(os.path.join(d, "snapshot.json")))
    assert meta["type"] == "full" and meta["source"] == sb.id, meta
    assert os.path.exists(os.path.join(d, "images", "inventory.img"))
    # Network none's namespace (lo, up) is not dumped: CRIU ran no ip or
    # iptables-save for it (--empty-ns net; the restore brings lo up).
    net = [f for f in os.listdir(os.path.join(d, "images"))
           if f.startswith(("ifaddr-", "route-", "route6-", "rule-", "iptables-", "ip6tables-",
                            "nftables-", "netdev-"))]
    assert not net and "--empty-ns" in meta["criu_args"], (net, meta["criu_args"])
    # Listed and inspected as a snapshot (CRIU's arguments left out).
    [row] = json.loads(hutch("snapshot", "ls", "--json").stdout)
    assert row["name"] == "mem1" and row["snapshot"]["type"] == "full", row
    assert "(full: processes)" in hutch("snapshot", "ls").stdout.decode()
    shown = json.loads(hutch("snapshot", "inspect", "mem1").stdout)
    assert shown["source"] == sb.id and "criu_args" not in shown, shown
    # The name is taken; rm forgets it.
    r = hutch("snapshot", sb.id, "mem1", "--full")
    assert r.returncode == 70 and b"a full snapshot called 'mem1' exists" in r.stderr, r.stderr
    assert hutch("snapshot", "rm", "mem1").returncode == 0
    assert not os.path.exists(d)
    sb.rm()


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError):
        return ""


def parent_of(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def dump_started(hutch):
    """A holder's sandbox, its supervisor's pid, the snapshot --full asked
    (a Popen) and the pid of the CRIU dumping it."""
    path, why = real_criu()
    if not path:
        pytest.skip(why)
    sb, _ = holder(hutch, path)
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    p = hutch.popen("snapshot", sb.id, "cut", "--full")
    return sb, sup, p, criu_child(p, sup)


def criu_child(p, sup):
    """The pid of the CRIU the supervisor sup runs for the snapshot p asked."""
    deadline = time.monotonic() + 30
    while p.poll() is None and time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            try:
                if pid.isdigit() and open(f"/proc/{pid}/comm").read().strip() == "criu" and \
                        int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]) == sup:
                    return int(pid)
            except OSError:
                pass
    raise AssertionError("criu never ran")


# A stand-in for the real CRIU (its path and the stage script's baked in):
# it says its pid (the real CRIU's once exec'ed) and adds an action script
# of its own that, at post-dump (every task dumped and still stopped: part
# way through the dump), says so and waits for this CRIU's end.
CRIU_STOPS = """#!/bin/sh
echo $$ > {mark}.pid
exec {criu} "$@" --action-script {stage}
"""

CRIU_STAGE = """#!/bin/sh
[ "$CRTOOLS_SCRIPT_ACTION" = post-dump ] || exit 0
pid=$(cat {mark}.pid)
setsid sh -c 'echo $$ > {mark}.escaped; exec sleep 300' </dev/null >/dev/null 2>&1 &
for i in $(seq 1000); do [ -s {mark}.escaped ] && break; sleep 0.01; done
touch {mark}
while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
exit 1
"""
# (CRIU runs its action scripts last given first: this one before hutch's.)
# The stand-in's action leaves a process in a session of its own (as
# coreutils' timeout, in hutch's action, leaves its process group): what a
# process group or a parent-death signal would not take along.


def run_cgroup(pid):
    """The cgroup of the CRIU run pid is in (hutch_cgroup_run_new(): the
    sandbox's directory plus "-run", in the freezer's hierarchy on v1, the
    unified one on v2), or None."""
    for ln in open(f"/proc/{pid}/cgroup").read().splitlines():
        _, ctrls, path = ln.split(":", 2)
        if re.search(r"/hutch-[^/]+-run$", path):
            return f"/sys/fs/cgroup/{ctrls}{path}" if ctrls else "/sys/fs/cgroup" + path
    return None


def run_procs(pid):
    """Every process of the CRIU run pid is in: its cgroup's directory and
    a pidfd of each (no pid reused is mistaken for one of them)."""
    d = run_cgroup(pid)
    assert d, ("CRIU does not run in a cgroup of its own", open(f"/proc/{pid}/cgroup").read())
    fds = {}
    for q in open(os.path.join(d, "cgroup.procs")).read().split():
        try:
            fds[int(q)] = os.pidfd_open(int(q))
        except ProcessLookupError:
            pass
    return d, fds


def run_ended(d, fds, seconds=30):
    """Until every process of a CRIU run (run_procs()) has ended and its
    cgroup is removed, bounded."""
    deadline = time.monotonic() + seconds
    left = dict(fds)
    while (left or os.path.exists(d)) and time.monotonic() < deadline:
        left = {q: fd for q, fd in left.items() if not select.select([fd], [], [], 0)[0]}
        time.sleep(0.05)
    for fd in fds.values():
        os.close(fd)
    assert not left, ("processes of the CRIU run outlived it", {q: cmdline(q) for q in left})
    assert not os.path.exists(d), f"the CRIU run's cgroup {d} is left"


def dump_stopped(hutch, tmp_path):
    """A holder's sandbox, its supervisor's pid, the snapshot --full asked
    (a Popen) through the stand-in CRIU, once the dump stands at its
    post-dump action; the pid of the CRIU dumping it and its run
    (run_procs(): the stand-in's escaped process among them)."""
    path, why = real_criu()
    if not path:
        pytest.skip(why)
    mark = tmp_path / "post-dump"
    stage = fake_criu(tmp_path, "stage.sh", CRIU_STAGE.format(mark=mark))
    stops = fake_criu(tmp_path, "criu", CRIU_STOPS.format(mark=mark, criu=path, stage=stage))
    sb, _ = holder(hutch, str(stops))
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    p = hutch.popen("snapshot", sb.id, "cut", "--full")
    deadline = time.monotonic() + 120
    while not mark.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), ("the dump never reached its post-dump action", p.communicate())
    criu = int(open(f"{mark}.pid").read())
    d, fds = run_procs(criu)
    escaped = int(open(f"{mark}.escaped").read())
    assert criu in fds and escaped in fds, (fds, escaped)
    return sb, sup, p, criu, (d, fds)


def test_full_snapshot_with_criu_killed(hutch, tmp_path):
    # kill -9 of CRIU part way through its dump (at its post-dump action,
    # every task stopped): every process of the run ends (its action, one
    # in a session of its own), the source runs on with its state, init is
    # not left dumpable, no snapshot and nothing in tmp/.
    sb, _, p, criu, run = dump_stopped(hutch, tmp_path)
    os.kill(criu, 9)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 70 and b"criu dump was killed (signal 9)" in err, err
    run_ended(*run)
    assert ask(sb).startswith("n=2 pos=8 ")
    assert not dumpable(sb, hutch)
    store = hutch.env["HUTCH_IMAGE_STORE"]
    assert os.listdir(os.path.join(store, "full")) == [] and os.listdir(os.path.join(store, "tmp")) == []
    sb.rm()


def watcher_of(sup, run):
    """The watcher of a CRIU run (runtime/criu.c): the supervisor's child,
    a fork of it (its command line), outside the run's cgroup."""
    kids = open(f"/proc/{sup}/task/{sup}/children").read().split()
    found = [int(k) for k in kids if int(k) not in run[1] and cmdline(k) == cmdline(sup)]
    assert len(found) == 1, (found, {k: cmdline(k) for k in kids})
    return found[0]


@pytest.mark.parametrize("when", ["running", "at post-dump", "with its watcher"])
def test_full_snapshot_with_its_supervisor_killed(hutch, tmp_path, when):
    # kill -9 of the sandbox's supervisor during the dump (CRIU running, or
    # at its post-dump action with a process of the run in a session of its
    # own): the sandbox ends with it (init's PDEATHSIG), every process of
    # the CRIU run too (its cgroup, killed by its watcher), before any gc;
    # its watcher killed first, the run's cgroup waits for gc, which kills
    # and removes it; the CLI says it is gone; gc leaves nothing (the
    # fixture's teardown checks state, cgroups and processes); no snapshot,
    # and the half-made directory in the store's tmp/ goes with the next
    # store writer.
    if when == "running":
        sb, sup, p, criu = dump_started(hutch)
        run = run_procs(criu)
    else:
        sb, sup, p, criu, run = dump_stopped(hutch, tmp_path)
    assert criu in run[1], run
    if when == "with its watcher":
        os.kill(watcher_of(sup, run), 9)
    os.kill(sup, 9)
    out, err = p.communicate(timeout=60)
    assert p.returncode in (66, 70), (p.returncode, err)
    if when == "with its watcher":
        time.sleep(1)
        assert os.path.exists(run[0]), "the run's cgroup went without its watcher"
        assert hutch("gc").returncode == 0
    run_ended(*run)
    assert hutch("gc").returncode == 0
    store = hutch.env["HUTCH_IMAGE_STORE"]
    assert os.listdir(os.path.join(store, "full")) == []
    assert hutch("image", "prune").returncode == 0
    assert os.listdir(os.path.join(store, "tmp")) == []


def init_of(hutch, sid):
    return json.loads(hutch("inspect", sid).stdout)["init_pid"]


def test_full_snapshot_restored_into_a_new_sandbox(hutch):
    # create --snapshot of a full snapshot: a new sandbox whose processes
    # carry on from the dump (the holder's counter, its open file's position,
    # its 20 MiB), with hutch's isolation made for it: a uid range of its own
    # (never the source's), its own cgroups, a host name of its own, init
    # not dumpable; the source runs on beside it, their states apart.
    path, why = real_criu()
    if not path:
        pytest.skip(why)
    sb, first = holder(hutch, path)
    r = hutch("snapshot", sb.id, "mem2", "--full")
    assert r.returncode == 0, r.stderr
    for refused in (["--network", "all"], ["-v", "/tmp:/mnt"]):
        r = hutch("create", "--snapshot", "mem2", *refused)
        assert r.returncode == 64 and b"restores a plain sandbox of network none" in r.stderr, r.stderr
    r = hutch("create", "--snapshot", "mem2")
    assert r.returncode == 0, r.stderr
    nid = r.stdout.decode().strip()
    run = lambda *argv: hutch("exec", nid, "--", *argv)
    out = run("python3", "-c", ASK).stdout.decode().strip()
    assert out == "n=2 pos=8 " + first.split()[2], (out, first)
    assert ask(sb) == "n=2 pos=8 " + first.split()[2]  # the source's own second
    assert run("cat", "/workspace/log.txt").stdout == b"n=1\nn=2\n"
    assert run("hostname").stdout.decode().strip() == "hutch-" + nid
    assert run("id", "-un").stdout.decode().strip() == "appuser"
    src, dst = init_of(hutch, sb.id), init_of(hutch, nid)
    maps = [open(f"/proc/{p}/uid_map").read().split() for p in (src, dst)]
    assert maps[0][0] == maps[1][0] == "0" and maps[0][1] != maps[1][1], maps
    cg = open(f"/proc/{dst}/cgroup").read()
    assert f"hutch-{nid}" in cg and f"hutch-{sb.id}" not in cg, cg
    assert os.stat(f"/proc/{dst}/status").st_uid == 0  # not dumpable
    for p in (src, dst):
        assert open(f"/proc/{p}/status").read().count("Seccomp:\t2") == 1
    assert {os.readlink(f"/proc/{dst}/ns/{n}") for n in ("user", "pid", "mnt", "net")}.isdisjoint(
        {os.readlink(f"/proc/{src}/ns/{n}") for n in ("user", "pid", "mnt", "net")})
    # The masks (read-only tmpfs that hutch made: /proc/acpi, /usr/local...)
    # are the new sandbox's own, named external at the dump rather than
    # archived by CRIU, and read-only still.
    d = os.path.join(hutch.env["HUTCH_IMAGE_STORE"], "full", "mem2")
    args = json.load(open(os.path.join(d, "snapshot.json")))["criu_args"]
    mounts = lambda pid: {ln.split()[4]: ln for ln in open(f"/proc/{pid}/mountinfo")}
    masks = [mp for mp, ln in mounts(src).items()
             if mp != "/" and " - tmpfs " in ln and re.match(r"ro(,|$)", ln.split()[5])]
    assert "/usr/local" in masks and "/proc/acpi" in masks, masks
    new = mounts(dst)
    for mask in masks:
        assert any(a.startswith(f"mnt[{mask}]:") for a in args), (mask, args)
        assert " - tmpfs " in new[mask] and re.match(r"ro(,|$)", new[mask].split()[5]), new[mask]
    # The pages (20 MiB) were read where the dump is, not copied: an
    # idmapped read-only bind; the store's files stay root's, 0600.
    ev = hutch("events", nid).stdout.decode()
    assert f"{in_place(d)} read in place" in ev, ev
    for f in os.listdir(os.path.join(d, "images")):
        st = os.lstat(os.path.join(d, "images", f))
        assert st.st_mode & 0o777 == 0o600 and st.st_uid == 0, (f, oct(st.st_mode), st.st_uid)
    # The snapshot is untouched; the state dir keeps no copy of its images.
    assert sorted(os.listdir(d)) == ["files.tar", "images", "snapshot.json"]
    rt = hutch.env["HUTCH_RUNTIME_DIR"]
    assert not os.path.exists(os.path.join(rt, nid, "criu"))
    assert hutch("rm", nid).returncode == 0
    assert hutch("snapshot", "rm", "mem2").returncode == 0
    sb.rm()


def in_place(d):
    """"N image(s)": the dump's images a restore reads in place (1 MiB or
    more: the pages; the holder's only here, init's too on Debian 12's 6.1)."""
    n = sum(1 for f in os.listdir(os.path.join(d, "images"))
            if f != "dump.log" and not f.startswith(("userns-", "utsns-"))
            and os.path.getsize(os.path.join(d, "images", f)) >= 1 << 20)
    assert n >= 1
    return f"{n} image{'' if n == 1 else 's'}"


@pytest.fixture
def shared_tmp(tmp_path):
    """The test's dir (its runtime dir and store) a shared mount of its own,
    as systemd makes "/" (the v2 VM's, most hosts'; not this one's):
    unmounted after the hutch fixture's checks, with whatever is left."""
    subprocess.run(["mount", "--bind", str(tmp_path), str(tmp_path)], check=True)
    try:
        subprocess.run(["mount", "--make-shared", str(tmp_path)], check=True)
        yield tmp_path
    finally:
        for _ in range(100):  # lxcfs, stopped by the teardown's gc, may still be ending
            r = subprocess.run(["umount", "-R", str(tmp_path)], capture_output=True, text=True)
            if r.returncode == 0:
                break
            time.sleep(0.1)
        assert r.returncode == 0, r.stderr


def test_full_restore_on_a_shared_mount(shared_tmp, hutch):
    # A runtime dir on a shared mount: the images a restore reads in place
    # (binds in its own mount namespace) never appear in the host's; the
    # restored sandbox's state dir keeps no criu/ and rm removes it all (the
    # fixture's teardown: no retired dir). Before, a clone of that mount was
    # its peer: the binds appeared under criu/images/ here, their removal
    # failed (EBUSY) and '.dead-ID' stayed (the v2 VM, issue 28).
    path = criu_or_skip()
    sb, first = holder(hutch, path)
    assert hutch("snapshot", sb.id, "mem3", "--full").returncode == 0
    r = hutch("create", "--snapshot", "mem3")
    assert r.returncode == 0, r.stderr
    nid = r.stdout.decode().strip()
    d = os.path.join(hutch.env["HUTCH_IMAGE_STORE"], "full", "mem3")
    assert f"{in_place(d)} read in place" in hutch("events", nid).stdout.decode()
    lxcfs = os.path.join(hutch.rtdir, ".lxcfs")  # the runtime dir's own, on the host
    under = [ln.split()[4] for ln in open("/proc/self/mountinfo")
             if ln.split()[4].startswith(str(shared_tmp) + "/")
             and not ln.split()[4].startswith(lxcfs)]
    assert under == [], under
    assert not os.path.exists(os.path.join(hutch.rtdir, nid, "criu"))
    assert hutch("exec", nid, "--", "python3", "-c", ASK).stdout.decode().strip() == \
        "n=2 pos=8 " + first.split()[2]
    assert hutch("rm", nid).returncode == 0
    assert hutch("snapshot", "rm", "mem3").returncode == 0
    sb.rm()


def test_full_restore_with_criu_killed(hutch):
    # kill -9 of CRIU part way through a restore: create fails saying so
    # (70), the half-restored sandbox is torn down (the fixture's teardown
    # checks state, cgroups and processes after gc), the snapshot and the
    # source intact; a snapshot.json without the files' roles (made before
    # restores were built) is refused with the fix.
    path, why = real_criu()
    if not path:
        pytest.skip(why)
    sb, first = holder(hutch, path)
    assert hutch("snapshot", sb.id, "cut2", "--full").returncode == 0
    d = os.path.join(hutch.env["HUTCH_IMAGE_STORE"], "full", "cut2")
    before = sorted(os.listdir(os.path.join(d, "images")))
    p = hutch.popen("create", "--snapshot", "cut2")
    deadline, criu = time.monotonic() + 60, None
    while criu is None and p.poll() is None and time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            # CRIU itself, not one of its forks (its arguments too: killed,
            # CRIU fails instead, "read: Cannot allocate memory" in kerndat)
            if pid.isdigit() and cmdline(pid).startswith(path + " restore ") and \
                    not cmdline(parent_of(pid)).startswith(path + " "):
                criu = int(pid)
    assert criu, "criu restore never ran"
    run = run_procs(criu)
    os.kill(criu, 9)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 70 and b"criu restore was killed (signal 9)" in err, err
    run_ended(*run)  # CRIU's helpers too
    assert hutch("gc").returncode == 0
    assert [i for i in os.listdir(hutch.env["HUTCH_RUNTIME_DIR"]) if not i.startswith(".")] == [sb.id]
    assert sorted(os.listdir(os.path.join(d, "images"))) == before
    assert ask(sb) == "n=2 pos=8 " + first.split()[2]
    meta = json.load(open(os.path.join(d, "snapshot.json")))
    del meta["files"]
    with open(os.path.join(d, "snapshot.json"), "w") as f:
        json.dump(meta, f)
    r = hutch("create", "--snapshot", "cut2")
    assert r.returncode == 64 and b"take it again with 'hutch snapshot --full'" in r.stderr, r.stderr
    assert hutch("snapshot", "rm", "cut2").returncode == 0
    sb.rm()


def criu_or_skip():
    path, why = real_criu()
    if not path:
        pytest.skip(why)
    return path


def fork_records(hutch):
    d = os.path.join(hutch.env["HUTCH_RUNTIME_DIR"], ".fork-full")
    return os.listdir(d) if os.path.isdir(d) else []


def full_dumps(hutch):
    d = os.path.join(hutch.env["HUTCH_IMAGE_STORE"], "full")
    return os.listdir(d) if os.path.isdir(d) else []


def test_full_fork_refuses_what_it_cannot_make(hutch, tmp_path):
    # Before anything is made, with the exit codes and messages of the
    # snapshot's and the restore's refusals (no real CRIU needed: the CLI's
    # is a script that passes 'criu check', the source's refusal comes
    # before its supervisor looks for one).
    hutch.env["HUTCH_CRIU"] = str(fake_criu(tmp_path, "criu", CRIU_42))
    sb = hutch.create("--image", "host", "--change-lists", "off")
    for opts, want in ((["--network", "all"], "drop a network but none"),
                       (["-v", f"{tmp_path}:/mnt"], "drop volumes (-v)"),
                       (["--no-limits"], "drop --no-limits")):
        r = hutch("fork", sb.id, "--full", *opts)
        assert r.returncode == 64 and want.encode() in r.stderr, r.stderr
        assert b"plain sandboxes of network none" in r.stderr, r.stderr
    r = hutch("fork", sb.id, "--full", "--image", "host")
    assert r.returncode == 64 and b"--image and --snapshot do not apply" in r.stderr, r.stderr
    # No usable CRIU: doctor's text, 69.
    hutch.env["HUTCH_CRIU"] = str(fake_criu(tmp_path, "criu317", CRIU_317))
    r = hutch("fork", sb.id, "--full")
    assert r.returncode == 69 and b"Unexpected rt vDSO area bounds" in r.stderr, r.stderr
    # The API's half: names and copy are a disk fork's; a disk fork needs
    # its disk size.
    st, res = sb.api("POST", "/fork", {"count": 1, "full": True, "names": ["fork-a.sock"]})
    assert st == 400 and "a full fork makes no disk" in res["error"]["message"], res
    st, res = sb.api("POST", "/fork", {"count": 1})
    assert st == 400 and "missing 'disk_bytes'" in res["error"]["message"], res
    sb.rm()
    # The source's own refusal (change lists on), as snapshot --full's: 64.
    hutch.env["HUTCH_CRIU"] = str(fake_criu(tmp_path, "criu42", CRIU_42))
    sb = hutch.create("--image", "host")
    r = hutch("fork", sb.id, "--full", "-n", "2")
    assert r.returncode == 64 and b"--change-lists off" in r.stderr, r.stderr
    assert b"nothing was made" in r.stderr, r.stderr
    assert hutch.ids() == [sb.id] and not fork_records(hutch) and not full_dumps(hutch)
    sb.rm()


def test_full_fork_of_a_live_sandbox(hutch):
    # fork --full -n 2: one dump of the source, two restores. Both forks
    # answer with the state at the fork (the holder's counter, its open
    # file's position, its memory) and then go their own ways; the source
    # runs on; each fork has its own id, uid range, cgroups with the limits
    # given, TTL and host name; the dump is gone from the store after.
    path = criu_or_skip()
    sb, first = holder(hutch, path)
    digest = first.split()[2]
    r = hutch("fork", sb.id, "--full", "-n", "2", "--json", "--instance-type", "small",
              "--ttl", "600")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["source"] == sb.id and out["method"] == "full" and out["snapshot"] is None, out
    assert out["bytes"] > 20 << 20 and out["dump_ms"] > 0 and out["restore_ms"] > 0, out
    a, b = out["forks"]
    assert len({a, b, sb.id}) == 3
    run = lambda sid, *argv: hutch("exec", sid, "--", *argv).stdout.decode().strip()
    assert run(a, "python3", "-c", ASK) == "n=2 pos=8 " + digest
    assert run(a, "python3", "-c", ASK) == "n=3 pos=12 " + digest
    assert run(b, "python3", "-c", ASK) == "n=2 pos=8 " + digest  # not a's third
    assert ask(sb) == "n=2 pos=8 " + digest  # the source's own second
    assert run(a, "cat", "/workspace/log.txt") == "n=1\nn=2\nn=3"
    assert run(b, "cat", "/workspace/log.txt") == "n=1\nn=2"
    assert sb.sh("cat /workspace/log.txt").strip() == "n=1\nn=2"
    inits = [init_of(hutch, s) for s in (sb.id, a, b)]
    bases = {open(f"/proc/{p}/uid_map").read().split()[1] for p in inits}
    assert len(bases) == 3, bases
    for sid, p in zip((a, b), inits[1:]):
        cg = open(f"/proc/{p}/cgroup").read()
        assert f"hutch-{sid}" in cg and f"hutch-{sb.id}" not in cg, cg
        assert run(sid, "hostname") == "hutch-" + sid
        st = json.loads(hutch("inspect", sid).stdout)
        assert st["config"]["instance_type"] == "small", st["config"]
        assert st["expires_at_unix"] - st["created_at_unix"] == 600, st
        [mem] = [ln.split() for ln in run(sid, "cat", "/proc/meminfo").splitlines()
                 if ln.startswith("MemTotal:")]
        assert int(mem[1]) == 1 << 20, mem  # small's 1 GiB, not the source's medium
    assert not full_dumps(hutch) and not fork_records(hutch)
    # Human output: the ids, one a line, and what it took on stderr.
    r = hutch("fork", sb.id, "--full")
    assert r.returncode == 0, r.stderr
    [c] = r.stdout.decode().split()
    assert b"1 fork of " + sb.id.encode() + b" with its processes and memory" in r.stderr, r.stderr
    assert run(c, "python3", "-c", ASK) == "n=3 pos=12 " + digest
    assert hutch("rm", a, b, c).returncode == 0
    assert not full_dumps(hutch) and not fork_records(hutch)
    sb.rm()


def fork_restore(hutch, path, p, src):
    """The pids of a criu restore of fork p (of source src) and of its
    supervisor (criu's parent: "hutch-supervisor ID", ID a sandbox of this
    test's runtime dir), once one runs."""
    rt = hutch.env["HUTCH_RUNTIME_DIR"]
    deadline = time.monotonic() + 120
    while p.poll() is None and time.monotonic() < deadline:
        for q in os.listdir("/proc"):
            if not q.isdigit() or not cmdline(q).startswith(path + " restore "):
                continue
            try:
                parent = int(open(f"/proc/{q}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            args = cmdline(parent).split()
            if len(args) == 2 and args[1] != src and os.path.isdir(os.path.join(rt, args[1])):
                return int(q), parent
    raise AssertionError("no restore of this fork ran")


def gone_but(hutch, keep, seconds=120):
    """Until every sandbox but keep is gone (a fork's half-made ones delete
    themselves once their creator is gone), bounded."""
    deadline = time.monotonic() + seconds
    while hutch.ids() != [keep] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hutch.ids() == [keep], hutch.ids()


@pytest.mark.parametrize("when", ["dump", "restore"])
def test_full_fork_with_its_cli_killed(hutch, when):
    # kill -9 of hutch fork --full during the dump, or during the restores:
    # the source runs on with its state, the half-made forks delete
    # themselves, and after gc no dump is left in the store nor its record
    # in the runtime dir (the fixture's teardown checks state, cgroups,
    # processes).
    path = criu_or_skip()
    sb, first = holder(hutch, path)
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    p = hutch.popen("fork", sb.id, "--full", "-n", "2")
    if when == "dump":
        criu_child(p, sup)
    else:
        fork_restore(hutch, path, p, sb.id)
    p.kill()
    p.communicate(timeout=60)
    assert fork_records(hutch), "the dump was not recorded"
    # The source's supervisor ends its dump (and publishes it) before it
    # serves the next request: its answer is after the dump.
    assert ask(sb) == "n=2 pos=8 " + first.split()[2]
    gone_but(hutch, sb.id)
    assert hutch("gc").returncode == 0
    assert not full_dumps(hutch), full_dumps(hutch)
    assert not fork_records(hutch), fork_records(hutch)
    sb.rm()


def test_full_fork_with_the_source_supervisor_killed(hutch):
    # kill -9 of the source's supervisor during the fork's dump: the source
    # ends, the fork says so and makes nothing; after gc nothing is left
    # (the half-made dump in the store's tmp/ goes with the next writer).
    path = criu_or_skip()
    sb, _ = holder(hutch, path)
    sup = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    p = hutch.popen("fork", sb.id, "--full", "-n", "2")
    criu_child(p, sup)
    os.kill(sup, 9)
    out, err = p.communicate(timeout=60)
    assert p.returncode in (66, 70), (p.returncode, err)
    deadline = time.monotonic() + 60
    while hutch.ids() and time.monotonic() < deadline:
        hutch("gc")
        time.sleep(0.1)
    assert hutch("gc").returncode == 0
    assert hutch.ids() == [] and not full_dumps(hutch) and not fork_records(hutch)
    assert hutch("image", "prune").returncode == 0
    assert os.listdir(os.path.join(hutch.env["HUTCH_IMAGE_STORE"], "tmp")) == []


def test_full_fork_with_a_fork_supervisor_killed(hutch):
    # kill -9 of a fork's supervisor during its restore: that fork's CRIU
    # (every process of its run), staging child and restored tree end with it, the fork fails (70) and
    # deletes the other fork; after gc no sandbox but the source, no dump,
    # no record (the fixture's teardown checks cgroups and processes).
    path = criu_or_skip()
    sb, first = holder(hutch, path)
    p = hutch.popen("fork", sb.id, "--full", "-n", "2")
    criu, sup = fork_restore(hutch, path, p, sb.id)
    run = run_procs(criu)
    os.kill(sup, 9)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 70 and b"failed; the forks made were deleted" in err, err
    run_ended(*run)  # every process of that restore, before any gc
    deadline = time.monotonic() + 120
    while hutch.ids() != [sb.id] and time.monotonic() < deadline:
        hutch("gc")
        time.sleep(0.1)
    assert hutch("gc").returncode == 0
    assert hutch.ids() == [sb.id] and not full_dumps(hutch) and not fork_records(hutch)
    assert ask(sb) == "n=2 pos=8 " + first.split()[2]
    sb.rm()


SHM_HOLDER = """
import mmap, os, socket
fd = os.open('/dev/shm/held', os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, 4096)
m = mmap.mmap(fd, 4096)
m[:5] = b'hello'
with open('/dev/shm/plain', 'w') as f:
    f.write('plain')
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 8124))
s.listen(4)
while True:
    c, _ = s.accept()
    c.sendall(bytes(m[:16]).rstrip(b'\\0') or b'-')
    c.close()
"""

ASK_SHM = "import socket; s = socket.create_connection(('127.0.0.1', 8124), timeout=5); print(s.recv(64).decode())"

DEV_USE = """
import os
assert open('/dev/zero', 'rb').read(4) == bytes(4)
assert len(open('/dev/urandom', 'rb').read(16)) == 16
with open('/dev/null', 'w') as f:
    f.write('x')
try:
    open('/dev/full', 'w').write('x')
except OSError as e:
    assert e.errno == 28, e
m, s = os.openpty()
print(os.ttyname(s), sorted(os.listdir('/dev')), os.stat('/dev/shm').st_mode & 0o7777 == 0o1777)
"""


@pytest.mark.parametrize("workspace", ["disk", "tmpfs"])
def test_full_fork_keeps_dev_and_shm(hutch, workspace):
    # /dev (what hutch made: device binds, devpts, links) and /dev/shm are
    # not archived by CRIU (a tar and gzip each at the dump, unpacked at the
    # restore): /dev is the new sandbox's own, /dev/shm's files travel in
    # files.tar, read in CRIU's stop. After a full fork a process's shared
    # mapping of a /dev/shm file is the fork's own file, its bytes as at the
    # dump; the device nodes and ptys work as in a created sandbox. A tmpfs
    # workspace's sandbox writes files.tar too (only /dev/shm's: CRIU
    # archives its tmpfs places), restored by create --snapshot and fork.
    path = criu_or_skip()
    hutch.env["HUTCH_CRIU"] = path
    sb = hutch.create("--image", "host", "--change-lists", "off", "--workspace", workspace)
    assert sb.status()["config"]["workspace"] == workspace
    sb.sh("printf w > /workspace/w")
    r = hutch("exec", "-d", sb.id, "--", "python3", "-c", SHM_HOLDER)
    assert r.returncode == 0, r.stderr
    shm = lambda sid: hutch("exec", sid, "--", "python3", "-c", ASK_SHM).stdout.decode().strip()
    for _ in range(200):
        if shm(sb.id) == "hello":
            break
        time.sleep(0.05)
    assert shm(sb.id) == "hello"
    r = hutch("snapshot", sb.id, "shm1", "--full")
    assert r.returncode == 0, r.stderr
    d = os.path.join(hutch.env["HUTCH_IMAGE_STORE"], "full", "shm1")
    tmpfs = [f for f in os.listdir(os.path.join(d, "images")) if f.startswith("tmpfs-")]
    # main's 4ecc0cc: tmpfs-dev-N.tar.gz.img for /dev and /dev/shm; a tmpfs
    # workspace's /workspace, /home/appuser and /tmp are CRIU's
    assert len(tmpfs) == (3 if workspace == "tmpfs" else 0), tmpfs
    args = json.load(open(os.path.join(d, "snapshot.json")))["criu_args"]
    assert any(a.startswith("mnt[/dev]:") for a in args), args
    assert any(a.startswith("mnt[/dev/shm]:") for a in args), args
    with tarfile.open(os.path.join(d, "files.tar")) as tf:
        held = tf.getmember("dev/shm/held")
        assert held.uid == 1000 and tf.extractfile(held).read(5) == b"hello", held
        names = tf.getnames()
    if workspace == "tmpfs":  # its tmpfs places are CRIU's
        assert not [n for n in names if n.startswith("workspace")], names
    run = lambda sid, *argv: hutch("exec", sid, "--", *argv).stdout.decode().strip()
    r = hutch("create", "--snapshot", "shm1", "--workspace", workspace)
    assert r.returncode == 0, r.stderr
    nid = r.stdout.decode().strip()
    assert shm(nid) == "hello" and run(nid, "cat", "/dev/shm/plain", "/workspace/w") == "plainw"
    assert hutch("rm", nid).returncode == 0
    assert hutch("snapshot", "rm", "shm1").returncode == 0
    r = hutch("fork", sb.id, "--full", "--json", "--workspace", workspace)
    assert r.returncode == 0, r.stderr
    [fk] = json.loads(r.stdout)["forks"]
    assert shm(fk) == "hello"
    assert run(fk, "cat", "/dev/shm/plain", "/workspace/w") == "plainw"
    assert run(fk, "stat", "-c", "%U %a %s", "/dev/shm/held") == "appuser 600 4096"
    # The restored mapping is the fork's file: written there, seen by it;
    # the source's stays as it was.
    put = "f = open('/dev/shm/held', 'r+b'); f.write(b'fork!'); f.close()"
    assert hutch("exec", fk, "--", "python3", "-c", put).returncode == 0
    assert shm(fk) == "fork!" and shm(sb.id) == "hello"
    want = run(sb.id, "python3", "-c", DEV_USE).split(" ", 1)[1]
    tty, got = run(fk, "python3", "-c", DEV_USE).split(" ", 1)
    assert tty.startswith("/dev/pts/") and got == want and got.endswith("True"), (tty, got, want)
    assert hutch("rm", fk).returncode == 0
    sb.rm()
