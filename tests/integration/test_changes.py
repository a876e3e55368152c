# SPDX-License-Identifier: Apache-2.0
"""Change lists per command (issue 29): what a command created, modified and
deleted in /workspace, /home/appuser and /tmp, checked against a ground
truth: a walk of those trees before and after the command (type, mode,
owner, size, SHA-256 of the content or the link's target), taken by
commands of their own, which change nothing. On every root of the matrix
(roots.py). A kernel without fanotify filesystem marks in a user namespace
(before 6.8) gives no lists: skipped, saying so."""
import json
import os
import subprocess

import pytest

from conftest import HUTCH, Sandbox, wait_until

pytestmark = pytest.mark.usefixtures("root")

AREAS = ["/workspace", "/home/appuser", "/tmp"]

SNAP = r"""
import hashlib, json, os, stat, sys
out = {}
for top in %r:
    for d, dirs, files in os.walk(top):
        for n in [d] + [os.path.join(d, f) for f in dirs + files]:
            st = os.lstat(n)
            if stat.S_ISREG(st.st_mode):
                with open(n, 'rb') as f:
                    h = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                h = os.readlink(n)
            else:
                h = ''
            out[n] = [stat.S_IFMT(st.st_mode), st.st_mode & 0o7777, st.st_uid, st.st_gid,
                      st.st_size if not stat.S_ISDIR(st.st_mode) else 0, h]
json.dump(out, sys.stdout)
""" % (AREAS,)


def snap(sb):
    res = sb.run(argv=["python3", "-c", SNAP])
    assert res["exit_code"] == 0, res
    assert "changes" not in res, res["changes"]  # the walk itself changes nothing
    return json.loads(res["stdout"])


def truth(before, after):
    created = {p: after[p][4] for p in after.keys() - before.keys()}
    deleted = set(before.keys() - after.keys())
    modified = {p: after[p][4] for p in after.keys() & before.keys() if after[p] != before[p]}
    return created, modified, deleted


def listed(res):
    ch = res.get("changes") or {"created": [], "modified": [], "deleted": [], "omitted": 0,
                                "complete": True}
    assert ch["omitted"] == 0 and ch["complete"], ch
    created = {e["path"]: e["size"] if e["type"] != "dir" else 0 for e in ch["created"]}
    modified = {e["path"]: e["size"] if e["type"] != "dir" else 0 for e in ch["modified"]}
    return created, modified, {e["path"] for e in ch["deleted"]}


def check(sb, cmd):
    """Run cmd; its list must be the ground truth's difference."""
    before = snap(sb)
    res = sb.run(cmd)
    assert res["exit_code"] == 0, res
    after = snap(sb)
    assert listed(res) == truth(before, after), (cmd, res.get("changes"))
    return res


def sandbox(hutch, root):
    sb = root.create(hutch)
    res = sb.run("touch /workspace/.probe")
    if "changes" not in res:
        sb.rm()
        pytest.skip("no change lists here: fanotify filesystem marks in a user namespace "
                    "need Linux 6.8")
    sb.sh("rm /workspace/.probe")
    return sb


PY_WRITE = ("python3 -c \"import os; open('/workspace/p', 'w').write('x' * 5000); "
            "os.makedirs('/workspace/pd/q'); open('/workspace/pd/q/z', 'wb').write(b'1')\"")
PY_MMAP = ("python3 -c \"import mmap; f = open('/workspace/m', 'r+b'); "
           "m = mmap.mmap(f.fileno(), 0); m[0:4] = b'ZZZZ'; m.close(); f.close()\"")
PY_TMPFILE = ("python3 -c \"import os; fd = os.open('/workspace', os.O_TMPFILE | os.O_WRONLY, 0o640); "
              "os.write(fd, b'anonymous'); os.link('/proc/self/fd/%d' % fd, '/workspace/tmpf', "
              "src_dir_fd=os.open('/', os.O_RDONLY), follow_symlinks=True)\"")  # linkat(FOLLOW)


def test_change_lists_match_the_ground_truth(hutch, root):
    sb = sandbox(hutch, root)
    check(sb, "echo a > /workspace/s1; printf b > /home/appuser/s2; mkdir -p /tmp/d1/d2; "
              "echo c > /tmp/d1/d2/f; echo gone > /tmp/gone; rm /tmp/gone")
    check(sb, PY_WRITE)
    check(sb, "head -c 8192 /dev/zero > /workspace/m; echo old > /workspace/e; "
              "mkdir -p /workspace/dd/sub && echo in > /workspace/dd/sub/x")
    if sb.run("python3 -c 'import mmap'")["exit_code"] == 0:  # not in the small image
        check(sb, PY_MMAP)                                   # same size, content only
    check(sb, "echo new > /workspace/t && mv /workspace/t /workspace/e")   # rename over
    check(sb, "ln /workspace/e /workspace/hl; ln -s e /workspace/sl")     # links
    check(sb, "chmod 600 /workspace/e; chmod 700 /workspace/pd")
    # the one chown appuser may make in its user namespace: to itself (no change)
    check(sb, "python3 -c \"import os; os.chown('/workspace/p', 1000, 1000)\"")
    check(sb, "mv /workspace/dd /workspace/ee")             # a tree moved
    check(sb, "rm -rf /workspace/pd /tmp/d1 /workspace/ee")  # trees deleted
    check(sb, PY_TMPFILE)                                    # O_TMPFILE + linkat
    res = check(sb, "echo x > /workspace/s1")                # content, same inode
    assert [e["what"] for e in res["changes"]["modified"]] == [["content"]], res["changes"]
    res = check(sb, "chmod 640 /workspace/s1")
    assert [e["what"] for e in res["changes"]["modified"]] == [["mode"]], res["changes"]
    assert sb.rm().returncode == 0


def test_a_command_that_changes_nothing_has_no_list(hutch, root):
    sb = sandbox(hutch, root)
    res = sb.run("cat /etc/passwd > /dev/null; ls -la /workspace /tmp")
    assert "changes" not in res, res
    assert sb.rm().returncode == 0


def test_the_list_is_capped_with_a_count_past_it(hutch, root):
    sb = sandbox(hutch, root)
    res = sb.run("mkdir /workspace/many && cd /workspace/many && "
                 "i=0; while [ $i -lt 1100 ]; do i=$((i + 1)); : > f$i; done")
    ch = res["changes"]
    assert len(ch["created"]) == 1000 and ch["omitted"] == 101 and ch["complete"], (
        len(ch["created"]), ch["omitted"])
    assert sb.rm().returncode == 0


def test_cli_exec_of_a_long_list_gets_its_counts(hutch, root):
    """hutch exec's EXIT frame holds at most 4 KiB: a longer list comes as its
    counts (omitted), the command's exit status intact (it was 70 before)."""
    sb = sandbox(hutch, root)
    r = hutch("exec", "--json", sb.id, "--", "sh", "-c",
              "i=0; while [ $i -lt 200 ]; do i=$((i + 1)); : > /workspace/cli-$i; done; exit 3")
    assert r.returncode == 3, r
    ch = json.loads(r.stdout)["changes"]
    assert ch["created"] == [] and ch["omitted"] == 200, ch
    assert sb.rm().returncode == 0


def test_background_process_has_its_list_at_its_end(hutch, root):
    sb = sandbox(hutch, root)
    st, p = sb.api("POST", "/v1/start_process",
                   {"cmd": "read x; echo bg > /workspace/bg", "stdin": True})
    assert st in (200, 201), p
    # a command while it runs: each gets what changed meanwhile, marked shared
    res = sb.run("echo fg > /workspace/fg")
    assert [e["path"] for e in res["changes"]["created"]] == ["/workspace/fg"]
    assert res["changes"]["shared"] is True
    st, _ = sb.api("POST", f"/process_stdin?id={p['id']}&eof=true", raw=b"go\n")
    assert st in (200, 204)

    def ended():
        st, ls = sb.api("GET", "/v1/list_processes")
        mine = [q for q in ls["processes"] if q["id"] == p["id"]]
        return mine[0] if mine and mine[0]["status"] != "running" else None

    assert wait_until(ended, 30)
    ch = ended()["changes"]
    assert sorted(e["path"] for e in ch["created"]) == ["/workspace/bg", "/workspace/fg"], ch
    assert ch["shared"] is True
    assert sb.rm().returncode == 0


def fanotify_fds(pid):
    fds = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:[fanotify]":
                fds.append(fd)
        except OSError:
            pass  # closed meanwhile
    return fds


@pytest.mark.parametrize("workspace", ["disk", "tmpfs"])
def test_the_supervisor_holds_the_group_too(hutch, root, workspace):
    """The change lists' fanotify group, init's, is held by the supervisor
    too (issue 31): the group's last close waits for an SRCU grace period
    (fsnotify_destroy_group(): 7-15 ms at load), which init's exit paid
    before a run's or an rm's answer; the supervisor closes its copy
    after answering. The disk's group is the supervisor's (sent with
    GO), a tmpfs's init's own (sent before READY). Off: none."""
    assert sandbox(hutch, root).rm().returncode == 0  # skips without change lists
    for opts, held in (((), 1), (("--change-lists", "off"), 0)):
        sb = root.create(hutch, "--workspace", workspace, *opts)
        with open(os.path.join(hutch.rtdir, sb.id, "state.json")) as f:
            st = json.load(f)
        assert len(fanotify_fds(st["supervisor_pid"])) == held, (opts, st)
        assert len(fanotify_fds(st["init_pid"])) == held, (opts, st)
        assert sb.rm().returncode == 0


def test_change_lists_off(hutch, root):
    """--change-lists off: no result carries changes (the same writes that
    give a list with it on), the config says so; a bad value is refused."""
    sb = sandbox(hutch, root)  # on by default, where the kernel allows it
    st, status = sb.api("GET", "/status")
    assert status["config"]["change_lists"] is True
    assert sb.rm().returncode == 0
    sb = root.create(hutch, "--change-lists", "off")
    st, status = sb.api("GET", "/status")
    assert status["config"]["change_lists"] is False
    res = sb.run("echo a > /workspace/off; mkdir /tmp/d; rm /workspace/off")
    assert res["exit_code"] == 0 and "changes" not in res, res
    r = hutch("exec", "--json", sb.id, "--", "sh", "-c", "echo b > /home/appuser/off")
    assert r.returncode == 0 and "changes" not in json.loads(r.stdout), r
    assert sb.rm().returncode == 0
    r = hutch("create", "--change-lists", "maybe")
    assert r.returncode == 64 and b"on or off" in r.stderr, r


def refuse_fanotify():
    """A seccomp filter of this process and all it starts (the supervisor,
    init): fanotify_init() refused with EPERM, as a container's default
    seccomp profile refuses it to a hutch run inside it."""
    import ctypes
    import struct
    prog = b"".join(struct.pack("HBBI", *ins) for ins in (
        (0x20, 0, 0, 4),                    # ld [arch]
        (0x15, 0, 3, 0xc000003e),           # jeq AUDIT_ARCH_X86_64, else allow
        (0x20, 0, 0, 0),                    # ld [nr]
        (0x15, 0, 1, 300),                  # jeq __NR_fanotify_init
        (0x06, 0, 0, 0x00050000 | 1),       # ret ERRNO(EPERM)
        (0x06, 0, 0, 0x7fff0000)))          # ret ALLOW
    buf = ctypes.create_string_buffer(prog)
    fprog = struct.pack("HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        raise OSError(ctypes.get_errno(), "seccomp")


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter's syscall number is x86-64's")
def test_a_disk_that_cannot_be_watched_is_said(hutch, root):
    """The supervisor's fanotify group for the disk's change lists refused
    (fanotify_init() EPERM: a seccomp profile around hutch): the sandbox
    works, its commands' change lists are missing, and its events log says
    why and the fix (the supervisor's own log goes nowhere: it said nothing
    before); a sandbox whose disk is watched has no such line."""
    assert sandbox(hutch, root).rm().returncode == 0  # skips without change lists
    opts = root.use(hutch)
    r = subprocess.run([HUTCH, "create", "--json", *opts], env=hutch.env, capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL, preexec_fn=refuse_fanotify)
    assert r.returncode == 0, r.stderr
    sb = Sandbox(hutch, json.loads(r.stdout))
    assert json.loads(hutch("inspect", sb.id).stdout)["config"]["workspace"] == "disk"
    warn = [ln for ln in hutch("events", sb.id).stdout.decode().splitlines() if "warning:" in ln]
    assert len(warn) == 1 and "warning: change lists: the disk is not watched, what each command " \
        "changes is not listed: fanotify: Operation not permitted (allow hutch fanotify_init: " \
        "its container's seccomp profile; raise fs.fanotify.max_user_groups)" in warn[0], warn
    res = sb.run("echo a > /workspace/a")
    assert res["exit_code"] == 0, res
    assert sb.rm().returncode == 0
    sb = root.create(hutch)
    assert "warning:" not in hutch("events", sb.id).stdout.decode()
    assert sb.rm().returncode == 0
