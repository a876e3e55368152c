# SPDX-License-Identifier: Apache-2.0
"""Volumes (issue 28): `-v HOST:PATH[:ro|rw]` and named volumes (`hutch
volume`, `-v NAME:PATH`). The directory's owner is appuser inside (idmapped
mounts), other owners are nobody; read-only unless rw; nothing outside the
directory is reachable (symlinks and '..' refused, mounts below it left
out); a named volume is shared by sandboxes, kept after them, and not
removed while one uses it; every bad spec is refused naming the fix. Each
test owns its runtime dir and image store (the hutch fixture); host
directories are under the test's tmp_path."""
import json
import os
import subprocess

import pytest
from conftest import lxcfs_mounts_under

from conftest import wait_until

USAGE, NOT_FOUND, NOT_CAPABLE, FAILURE = 64, 65, 69, 70
OWNER, OTHER = 4242, 4343  # host ids no account here has


@pytest.fixture
def hostdir(tmp_path):
    """A directory of OWNER's with a file of OWNER's and one of OTHER's."""
    d = tmp_path / "proj"
    d.mkdir()
    (d / "mine.txt").write_text("mine\n")
    (d / "theirs.txt").write_text("theirs\n")
    os.chmod(d, 0o755)
    os.chown(d, OWNER, OWNER)
    os.chown(d / "mine.txt", OWNER, OWNER)
    os.chown(d / "theirs.txt", OTHER, OTHER)
    return d


def test_owner_is_appuser_read_only_by_default(hutch, hostdir):
    sb = hutch.create("-v", f"{hostdir}:/data")
    out = sb.sh("stat -c '%u:%g %n' /data /data/mine.txt /data/theirs.txt; cat /data/mine.txt")
    assert out.splitlines() == ["1000:1000 /data", "1000:1000 /data/mine.txt",
                                "65534:65534 /data/theirs.txt", "mine"]
    res = sb.run("echo x > /data/new")
    assert res["exit_code"] != 0 and "Read-only file system" in res["stderr"], res
    res = sb.run("rm /data/mine.txt")
    assert res["exit_code"] != 0, res
    assert sorted(os.listdir(hostdir)) == ["mine.txt", "theirs.txt"]
    cfg = json.loads(hutch("inspect", sb.id).stdout)["config"]
    assert cfg["volumes"] == [f"{hostdir}:/data:ro"]
    sb.rm()


def test_rw_writes_land_as_the_owner(hutch, hostdir):
    sb = hutch.create("-v", f"{hostdir}:/workspace/proj:rw")
    sb.sh("cd /workspace/proj && echo new > new.txt && mkdir sub && echo more >> mine.txt")
    st = os.stat(hostdir / "new.txt")
    assert (st.st_uid, st.st_gid) == (OWNER, OWNER)
    assert os.stat(hostdir / "sub").st_uid == OWNER
    assert (hostdir / "mine.txt").read_text() == "mine\nmore\n"
    # another owner's file: not appuser's, so not writable; chown refused
    res = sb.run("echo x >> /workspace/proj/theirs.txt")
    assert res["exit_code"] != 0, res
    res = sb.run("chown 65534 /workspace/proj/new.txt")
    assert res["exit_code"] != 0, res
    # the rest of /workspace is still the sandbox's own tmpfs
    sb.sh("echo t > /workspace/local.txt")
    assert not (hostdir / "local.txt").exists()
    sb.rm()
    assert (hostdir / "new.txt").read_text() == "new\n"


def test_nothing_outside_the_directory(hutch, hostdir, tmp_path):
    (tmp_path / "secret").write_text("host secret\n")
    sub = hostdir / "sub"
    sub.mkdir()
    # a mount below the directory stays out (open_tree without AT_RECURSIVE)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "hutch-vol-test", str(sub)],
                   check=True)
    try:
        (sub / "below").write_text("on the submount\n")
        sb = hutch.create("-v", f"{hostdir}:/data:rw")
        try:
            out = sb.sh("ls -A /data/sub; ls /data/..; cat /data/../secret 2>&1 || true")
            assert "below" not in out and "host secret" not in out, out
            # a symlink planted inside leads nowhere outside: it resolves in the sandbox
            sb.sh("ln -s /etc /data/esc && ln -s ../../secret /data/up")
            res = sb.run("cat /data/up")
            assert res["exit_code"] != 0 and "host secret" not in res["stdout"], res
        finally:
            sb.rm()
    finally:
        subprocess.run(["umount", str(sub)], check=True)
    # ... and a later -v through it is refused, not followed
    r = hutch("create", "-v", f"{hostdir}/esc:/x")
    assert r.returncode == USAGE and b"symlink" in r.stderr and b"realpath" in r.stderr, r.stderr
    assert hutch.ids() == []


@pytest.mark.parametrize("spec, code, words", [
    ("{d}", USAGE, "no PATH"),
    ("{d}:", USAGE, "must be absolute"),
    ("{d}:data", USAGE, "must be absolute"),
    ("{d}:/", USAGE, "would hide the sandbox's root"),
    ("{d}:/proc/x", USAGE, "under /proc"),
    ("{d}:/sys", USAGE, "under /sys"),
    ("{d}:/dev/shm", USAGE, "under /dev"),
    ("{d}:/data:rx", USAGE, "ro (the default) or rw"),
    ("{d}:/a:b:rw", USAGE, "too many ':'"),
    ("{d}/../proj:/data", USAGE, "'..' part"),
    ("{d}:/data/../etc", USAGE, "'..' part"),
    ("./proj:/data", USAGE, "$PWD/proj"),
    ("proj dir:/data", USAGE, "nor a volume name"),
    (":/data", USAGE, "SRC is empty"),
    ("{d}/nope:/data", NOT_FOUND, "mkdir -p it first"),
    ("{d}/mine.txt:/data", USAGE, "not a directory"),
    ("{d}:/bin/x", USAGE, "'bin' on the way is a symlink"),
    ("{d}:/etc/passwd", USAGE, "not a directory"),
])
def test_bad_specs_name_the_fix(hutch, hostdir, spec, code, words):
    r = hutch("create", "-v", spec.format(d=hostdir))
    assert r.returncode == code, r.stderr
    assert words in r.stderr.decode(), r.stderr
    assert hutch.ids() == []
    # Refused, it leaves nothing running: not the /proc views' lxcfs
    # either (one refused in the supervisor's setup did, until a gc).
    assert lxcfs_mounts_under(hutch.rtdir) == []


def test_targets_given_twice_or_nested(hutch, hostdir, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for a, b in (("/data", "/data"), ("/data", "/data/x"), ("/data/x", "/data")):
        r = hutch("create", "-v", f"{hostdir}:{a}", "-v", f"{other}:{b}")
        assert r.returncode == USAGE, r.stderr
        assert b"twice" in r.stderr or b"one inside the other" in r.stderr, r.stderr
    sb = hutch.create("-v", f"{hostdir}:/data", "-v", f"{other}:/data2:rw")
    sb.sh("test -f /data/mine.txt && touch /data2/ok")
    assert (other / "ok").exists()
    sb.rm()


def test_named_volume_shared_kept_and_refused_in_use(hutch):
    r = hutch("volume", "create", "work")
    assert r.returncode == 0 and r.stdout == b"work\n", r.stderr
    a = hutch.create("-v", "work:/workspace:rw")
    b = hutch.create("-v", "work:/shared")  # read-only in this one
    a.sh("echo from-a > /workspace/note && mkdir -p /workspace/src")
    assert b.sh("cat /shared/note") == "from-a\n"
    assert b.run("touch /shared/x")["exit_code"] != 0
    assert a.sh("stat -c %U /workspace/note") == "appuser\n"
    ls = json.loads(hutch("volume", "ls", "--json").stdout)
    assert [(v["name"], v["in_use"]) for v in ls] == [("work", True)]
    r = hutch("volume", "rm", "work")
    assert r.returncode == FAILURE, r.stderr
    assert f"in use by sandbox {a.id} {b.id}".encode() in r.stderr or \
        f"in use by sandbox {b.id} {a.id}".encode() in r.stderr, r.stderr
    a.rm()
    assert hutch("volume", "rm", "work").returncode == FAILURE  # b still has it
    b.rm()
    # kept after every sandbox went: a new one sees the files
    c = hutch.create("-v", "work:/w")
    assert c.sh("cat /w/note; ls /w") == "from-a\nnote\nsrc\n"
    c.rm()
    # the use ends before the DELETE answer (teardown's first phase, nothing
    # of the sandbox left running): free at once after rm
    info = json.loads(hutch("volume", "inspect", "work").stdout)
    assert info[0]["in_use"] is False and info[0]["path"].endswith("/volumes/work/data")
    assert os.path.isfile(os.path.join(info[0]["path"], "note"))
    r = hutch("volume", "rm", "work")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(info[0]["path"])
    assert json.loads(hutch("volume", "ls", "--json").stdout) == []


def test_named_volume_made_on_first_use_and_errors(hutch):
    sb = hutch.create("-v", "cache:/cache:rw")
    sb.sh("echo 1 > /cache/x")
    sb.rm()
    assert hutch("volume", "ls", "-q").stdout == b"cache\n"
    r = hutch("volume", "create", "_bad")
    assert r.returncode == USAGE and b"invalid volume name" in r.stderr, r.stderr
    r = hutch("volume", "rm", "nope")
    assert r.returncode == NOT_FOUND and b"no volume 'nope'" in r.stderr, r.stderr
    r = hutch("volume", "inspect", "nope")
    assert r.returncode == NOT_FOUND, r.stderr
    r = hutch("volume", "rm")
    assert r.returncode == USAGE, r.stderr
    r = hutch("volume", "frob")
    assert r.returncode == USAGE, r.stderr
    assert hutch("volume", "rm", "cache").returncode == 0


def test_run_and_dockers_mount(hutch, hostdir):
    r = hutch("run", "-v", f"{hostdir}:/data", "--", "cat", "/data/mine.txt")
    assert r.returncode == 0 and r.stdout == b"mine\n", r.stderr
    # --mount: the same mount, read-only unless readonly=false (docker: read-write)
    r = hutch("run", "--mount", f"type=bind,src={hostdir},dst=/data", "--", "sh", "-c",
              "cat /data/mine.txt; touch /data/x")
    assert r.returncode != 0 and r.stdout == b"mine\n", r.stderr
    assert b"Read-only file system" in r.stderr, r.stderr
    r = hutch("run", "--mount", f"type=bind,source={hostdir},target=/data,readonly=false",
              "--", "touch", "/data/x")
    assert r.returncode == 0, r.stderr
    assert os.stat(hostdir / "x").st_uid == OWNER
    for bad, words in (("type=tmpfs,dst=/x", b"only bind and volume"),
                       (f"src={hostdir}", b"source=SRC,target=PATH"),
                       (f"src={hostdir},dst=/x,bind-propagation=rshared", b"'bind-propagation'"),
                       ("src=,dst=/x", b"src has no value"),
                       (f"src={hostdir},dst=/proc", b"under /proc")):
        r = hutch("create", "--mount", bad)
        assert r.returncode == USAGE and words in r.stderr, (bad, r.stderr)
    assert hutch.ids() == []


def test_every_root(hutch, root, hostdir):
    """Host-derived, the small image and hutch-default: the same mounts (a
    host directory; named volumes live in the store, the roots' shared one)."""
    sb = root.create(hutch, "-v", f"{hostdir}:/srv/proj:rw", "-v", f"{hostdir}:/workspace/ro")
    out = sb.sh("stat -c '%u %n' /srv/proj/mine.txt; cat /workspace/ro/mine.txt; "
                "echo {} > /srv/proj/from-{}".format(root.name, root.name))
    assert out == "1000 /srv/proj/mine.txt\nmine\n", out
    assert sb.run("touch /workspace/ro/x")["exit_code"] != 0
    sb.rm()
    assert os.stat(hostdir / f"from-{root.name}").st_uid == OWNER


def test_named_volume_freed_when_the_supervisor_is_killed(hutch):
    """kill -9 of the supervisor: the use (a flock) ends with it, the
    volume and its files stay, rm works once the sandbox is gone."""
    import signal
    from conftest import wait_until
    sb = hutch.create("-v", "kept:/w:rw")
    sb.sh("echo x > /w/f")
    pid = json.loads(hutch("inspect", sb.id).stdout)["supervisor_pid"]
    os.kill(pid, signal.SIGKILL)

    def info():
        return json.loads(hutch("volume", "inspect", "kept").stdout)[0]
    # its fds close as it dies (a zombie's too): bounded wait, no sleep
    assert wait_until(lambda: info()["in_use"] is False, 10), info()
    info = info()
    assert open(os.path.join(info["path"], "f")).read() == "x\n"
    hutch("rm", sb.id)
    assert hutch("volume", "rm", "kept").returncode == 0


@pytest.mark.parametrize("verb", ["create", "inspect", "rm"])
def test_volume_verbs_need_a_name(hutch, verb):
    """64, pointing to the listing of the names (taken, for create)."""
    r = hutch("volume", verb)
    assert r.returncode == USAGE and r.stdout == b"", r
    assert f"volume {verb} needs a NAME".encode() in r.stderr, r.stderr
    assert b"'hutch volume ls'" in r.stderr, r.stderr
    assert not os.path.exists(hutch.env["HUTCH_IMAGE_STORE"])
