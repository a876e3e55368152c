# SPDX-License-Identifier: Apache-2.0
"""hutch build (issue 28's builder, docs/snapshots.md "The builder"): a
build file (JSON: image, name, workdir, env, files, copy, run) made into a
snapshot in a sandbox of its own. The files and modes copied are the
host's, the env is seen by `create --snapshot NAME`, a failing command
ends the build with its output and exit 71 and nothing made, every error
of the command line names the fix and leaves nothing, and a builder
killed with SIGKILL leaves no sandbox (its supervisor deletes it: it was
never handed over) and no snapshot.

On the image roots (the small test image and hutch-default), each test
with a store of its own (a hard-linked copy of the root's, as
test_snapshot.py); the host-derived root is refused, tested as such.
"""
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile

import pytest

from conftest import HUTCH, wait_until
from test_snapshot import snap  # noqa: F401 (a fixture: a store of the test's own)


def snapshots(h):
    r = h("snapshot", "ls", "--json")
    assert r.returncode == 0, r.stderr.decode()
    return sorted(s["name"] for s in json.loads(r.stdout))


def store_tmp(h):
    d = os.path.join(h.env["HUTCH_IMAGE_STORE"], "tmp")
    return os.listdir(d) if os.path.isdir(d) else []


def host_tree(top):
    """relative path -> (kind, mode, content) of a host tree."""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            content = open(p, "rb").read().hex() if stat.S_ISREG(st.st_mode) else ""
            out[os.path.relpath(p, top)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                            content)
    return out


SANDBOX_TREE = r'''
import json, os, stat, sys
out = {}
top = sys.argv[1]
for d, dirs, files in os.walk(top):
    for n in dirs + files:
        p = os.path.join(d, n)
        st = os.lstat(p)
        c = open(p, "rb").read().hex() if stat.S_ISREG(st.st_mode) else ""
        out[os.path.relpath(p, top)] = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), c]
print(json.dumps(out))
'''


def sandbox_tree(sb, top):
    got = json.loads(sb.sh(f"python3 -c '{SANDBOX_TREE}' {top}"))
    return {k: tuple(v) for k, v in got.items()}


def project(tmp_path):
    """A host project to copy: modes of every kind a build keeps (none
    group- or other-writable: appuser's tar applies its umask, as hutch cp)."""
    src = tmp_path / "proj" / "src"
    (src / "pkg" / "deep").mkdir(parents=True)
    files = {"main.py": (b"print('main')\n", 0o644), "run.sh": (b"#!/bin/sh\necho ran\n", 0o755),
             "pkg/secret.txt": (b"s3cr3t\n", 0o600), "pkg/deep/data.bin": (os.urandom(3000), 0o640),
             "empty": (b"", 0o444)}
    for rel, (data, mode) in files.items():
        (src / rel).write_bytes(data)
        os.chmod(src / rel, mode)
    os.chmod(src / "pkg" / "deep", 0o750)
    tool = tmp_path / "proj" / "tool"
    tool.write_bytes(b"#!/bin/sh\necho tool\n")
    os.chmod(tool, 0o750)
    return tmp_path / "proj"


def test_build_files_modes_env(snap, tmp_path):
    h, image = snap
    proj = project(tmp_path)
    spec = {
        "name": "built",
        "image": image,
        "workdir": "/workspace/app",
        "env": {"APP_MODE": "test", "GREETING": "hello world"},
        "files": {"/workspace/app/settings.toml": "debug = false\nname = 'ünï'\n",
                  "notes.txt": "relative to /workspace\n"},
        "copy": [{"src": "src", "dst": "/workspace/app/src"},
                 {"src": str(proj / "tool"), "dst": "/home/appuser/bin/tool"}],
        "run": ["echo step-one-output; echo \"$APP_MODE\" > mode.txt",
                {"command": "pwd > /tmp/where; ./run.sh > ran.txt", "cwd": "/workspace/app/src",
                 "timeout": 300}],
    }
    (proj / "app.json").write_text(json.dumps(spec))
    r = h("build", str(proj / "app.json"), "--json", timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    out = json.loads(r.stdout)
    assert out["name"] == "built" and out["base"] == image
    assert out["steps"] == 2 + 1 + 2 + 2 + 2 and out["bytes"] > 3000
    err = r.stderr.decode()
    # progress, one line a step, and the commands' output, on stderr
    assert "[1/9] sandbox from" in err and "[9/9] snapshot built" in err
    assert "step-one-output" in err and "step-one-output" not in r.stdout.decode()
    wait_until(lambda: h.ids() == [], timeout=30)
    assert h.ids() == [], "the build sandbox was left"
    assert snapshots(h) == ["built"] and store_tmp(h) == []
    sb = h.create("--snapshot", "built")
    # the env in every command of a spawn
    assert sb.sh("echo \"$APP_MODE|$GREETING\"") == "test|hello world\n"
    assert sb.sh("cat /workspace/app/mode.txt") == "test\n"
    assert sb.sh("cat /tmp/where /workspace/app/src/ran.txt") == "/workspace/app/src\nran\n"
    assert sb.sh("cat /workspace/app/settings.toml") == "debug = false\nname = 'ünï'\n"
    assert sb.sh("stat -c %a /workspace/app/settings.toml /workspace/notes.txt") == "644\n644\n"
    # the copies: files and modes equal
    want = host_tree(proj / "src")
    got = sandbox_tree(sb, "/workspace/app/src")
    got.pop("ran.txt")
    assert got == want
    assert sb.sh("stat -c %a /home/appuser/bin/tool; /home/appuser/bin/tool") == "750\ntool\n"
    # a sandbox of the base has none of it
    base = h.create("--image", image)
    assert base.sh("test ! -e /workspace/app && echo \"[$APP_MODE]\"") == "[]\n"


def test_build_from_stdin_with_tag(snap, tmp_path):
    h, image = snap
    spec = json.dumps({"name": "ignored", "image": image, "run": ["echo hi > /workspace/hi"]})
    r = h("build", "-", "-t", "tagged", input=spec.encode(), timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode() == "tagged\n"
    assert snapshots(h) == ["tagged"]
    assert h.create("--snapshot", "tagged").sh("cat /workspace/hi") == "hi\n"


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_build_failing_command_makes_nothing(snap, tmp_path):
    h, image = snap
    spec = tmp_path / "b.json"
    spec.write_text(json.dumps({"name": "never", "image": image, "files": {"f": "x"},
                                "run": ["echo before-the-fail; echo to-stderr >&2; exit 3",
                                        "echo not-reached"]}))
    r = h("build", str(spec), timeout=600)
    err = r.stderr.decode()
    assert r.returncode == 71, err
    assert "before-the-fail" in err and "to-stderr" in err and "not-reached" not in err
    assert "build command 1/2 exited 3" in err and "no snapshot made" in err
    assert r.stdout == b""
    assert wait_until(lambda: h.ids() == [], timeout=30), h.ids()
    assert snapshots(h) == [] and store_tmp(h) == []


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_build_refusals_name_the_fix(snap, tmp_path):
    """Every error of the command line, before anything is made."""
    h, image = snap

    def build(spec, *args, raw=None):
        f = tmp_path / "b.json"
        f.write_text(raw if raw is not None else json.dumps(spec))
        return h("build", str(f), *args)

    cases = [
        (h("build"), 64, "give one build file"),
        (h("build", str(tmp_path / "missing.json")), 65, "no build file"),
        (build(None, raw="{not json"), 64, "not JSON"),
        (build(None, raw="[1]"), 64, "must be a JSON object"),
        (build(None, raw="# syntax\nFROM debian\nRUN true\n"), 64, "is a Dockerfile"),
        (build({"name": "x", "image": image, "command": ["true"]}), 64, "unknown key 'command'"),
        (build({"name": "x", "image": image, "run": [{"cmd": "true"}]}), 64,
         "'run' entry 1 must be"),
        (build({"name": "x", "image": image, "run": [3]}), 64, "'run' entry 1 must be"),
        (build({"name": "x", "image": image, "env": {"1BAD": "v"}}), 64, "'env' name '1BAD'"),
        (build({"name": "x", "image": image, "env": {"A": 1}}), 64, "must be a string"),
        (build({"name": "x", "image": image, "files": {"f": 1}}), 64, "'files' value of 'f'"),
        (build({"name": "x", "image": image, "copy": [{"src": "a"}]}), 64, "'copy' entry 1"),
        (build({"image": image}), 64, "-t NAME"),
        (build({"name": "x"}), 64, "give the base image"),
        (build({"name": "x", "image": "host"}), 64, "host-derived root"),
        (build({"name": "../x", "image": image}), 64, "invalid snapshot name"),
        (build({"name": "x", "image": image, "copy": [{"src": "nope", "dst": "/workspace"}]}),
         65, "'copy' entry 1: cannot read"),
        (build({"name": image, "image": image}), 70, "snapshot rm"),
        # not found, as create's --image and docs/snapshots.md say (64 until issue 25)
        (build({"name": "x", "image": "no-such-image"}), 65, "no such image in the store"),
        (build({"name": "x", "image": "no-such:1.0"}), 65, "never a short name"),
        (build({"name": "x", "image": image}, "--instance-type", "huge"), 64, "huge"),
    ]
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.write(b'{"files": {"f": "' + b"x" * (16 << 20) + b'"}}')
    cases.append((h("build", str(big)), 64, "more than"))
    cases.append((h("build", "-", input=big.read_bytes()), 64, "more than"))  # from stdin too
    for r, code, text in cases:
        err = r.stderr.decode()
        assert (r.returncode, text in err) == (code, True), (r.args, err)
    assert h.ids() == [] and snapshots(h) == [] and store_tmp(h) == []


@pytest.mark.parametrize("snap", ["image"], indirect=True)
def test_build_killed_leaves_nothing(snap, tmp_path):
    """kill -9 of the builder while a command runs: its sandbox is deleted
    by its supervisor (never handed over), no snapshot, nothing after gc."""
    h, image = snap
    spec = tmp_path / "b.json"
    spec.write_text(json.dumps({"name": "half", "image": image, "files": {"a": "1"},
                                "run": [": > /tmp/started; exec sleep 600"]}))
    cli = h.popen("build", str(spec))

    def started():
        ids = h.ids()
        return len(ids) == 1 and h("exec", ids[0], "--", "sh", "-c",
                                   "[ -e /tmp/started ]").returncode == 0
    if not wait_until(started, timeout=120):
        cli.kill()
        pytest.fail(repr(cli.communicate()))
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    assert wait_until(lambda: h.ids() == [], timeout=60), h.ids()
    assert h("gc").returncode == 0
    assert snapshots(h) == [] and store_tmp(h) == []
    # (the fixture's teardown: the runtime dir clean, no cgroup or loop left)


def test_build_from_the_host_root_is_refused(hutch, tmp_path):
    spec = tmp_path / "b.json"
    spec.write_text(json.dumps({"name": "x", "run": ["true"]}))
    r = hutch("build", str(spec), "--image", "host")
    assert r.returncode == 64 and "hutch-default" in r.stderr.decode(), r.stderr
    assert hutch.ids() == []


@pytest.mark.parametrize("spec,code,words", [
    (None, 64, ["is a directory: give the build file (JSON) itself"]),  # 70 before
    ({"name": "x", "image": "a..b"}, 64, ["build file: 'image': invalid image 'a..b'",
                                          "give 'host', a registry reference"]),
])
def test_build_file_refusals_without_a_store(hutch, tmp_path, spec, code, words):
    """Refused before a store or a sandbox is made, naming the fix."""
    path = tmp_path / "proj"
    path.mkdir()
    if spec is not None:
        path = path / "b.json"
        path.write_text(json.dumps(spec))
    r = hutch("build", str(path))
    err = r.stderr.decode()
    assert r.returncode == code and r.stdout == b"", (r.returncode, err)
    assert all(w in err for w in words), err
    assert hutch.ids() == [] and not os.path.exists(hutch.env["HUTCH_IMAGE_STORE"])
