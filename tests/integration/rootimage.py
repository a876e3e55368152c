# SPDX-License-Identifier: Apache-2.0
"""A small root for the --image tests, made from this host's own files (no
registry, no download): dash as /bin/sh, a few coreutils, tar, mount, and
Debian's python3 with the part of its standard library that the tests'
imports load; every binary's libraries as ldd finds them. Merged /usr, so
/bin, /lib and /lib64 are symlinks. Built once per test session into an
uncompressed tar layer (see layer())."""
import os
import subprocess
import tarfile

import ociimage as o

PYTHON = "/usr/bin/python3"
BINARIES = ["dash", "bash", "ls", "cat", "env", "id", "sleep", "mkdir", "rm", "touch", "stat",
            "head", "tail", "sha256sum", "tar", "true", "false", "echo", "base64", "chmod",
            "mount", "umount", "readlink", "wc", "dd", "sort", "grep", "ln", "cp", "mv",
            "printenv", "nproc", "df", "sed", "which", "ps", "kill", "mktemp"]
# What `python3 -c "import ..."` of the tests loads, besides the built-ins.
PY_IMPORTS = ("os, sys, json, subprocess, socket, pathlib, hashlib, base64, tempfile, shutil, "
              "ctypes, encodings.idna, stringprep")


def _which(name):
    for d in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return os.path.realpath(p)
    return None


def _libs(paths):
    out = subprocess.run(["ldd", *paths], capture_output=True, text=True).stdout
    libs = set()
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            libs.add(parts[2])
        elif parts and parts[0].startswith("/") and not parts[0].endswith(":"):
            libs.add(parts[0])
    return libs


def _python_files():
    """The standard library files PY_IMPORTS loads (module origins), and
    the whole encodings package."""
    code = (f"import {PY_IMPORTS}, sys\n"
            "for m in list(sys.modules.values()):\n"
            "    f = getattr(m, '__file__', None)\n"
            "    if f and f.startswith('/usr/lib/python3'): print(f)\n")
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True).stdout
    files = set(out.split())
    enc = subprocess.run([PYTHON, "-c", "import encodings, os; print(os.path.dirname("
                          "encodings.__file__))"], capture_output=True, text=True,
                         check=True).stdout.strip()
    files |= {os.path.join(enc, n) for n in os.listdir(enc) if n.endswith(".py")}
    return files


def _add_file(t, path, arcname=None, mode=None):
    arcname = (arcname or path).lstrip("/")
    ti = t.gettarinfo(path, arcname)
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    ti.mtime = 1700000000
    if mode is not None:
        ti.mode = mode
    with open(path, "rb") as fh:
        t.addfile(ti, fh)


def _add_dirs(t, path, seen):
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        d = "/".join(parts[:i])
        if d not in seen:
            seen.add(d)
            ti, _ = o.d(d)
            t.addfile(ti)


def build(path):
    """Write the root's layer (an uncompressed tar) to path."""
    bins = [b for b in (_which(n) for n in BINARIES) if b]
    pyexe = os.path.realpath(PYTHON)
    files = {b: "/usr/bin/" + os.path.basename(b) for b in bins}
    files[pyexe] = "/usr/bin/" + os.path.basename(pyexe)
    pyfiles = _python_files()
    exts = [f for f in pyfiles if f.endswith(".so")]
    for lib in _libs(bins + [pyexe] + exts) | {"/lib64/ld-linux-x86-64.so.2"}:
        real = os.path.realpath(lib)
        files[real] = "/usr/lib/x86_64-linux-gnu/" + os.path.basename(lib)
        if lib.startswith("/lib64/"):
            files[real] = "/usr/lib64/" + os.path.basename(lib)
    for f in pyfiles:
        files[f] = f
    seen = set()
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for ti, _ in [o.d("usr"), o.d("usr/bin"), o.d("usr/lib"), o.d("usr/lib64"),
                      o.d("usr/lib/x86_64-linux-gnu"), o.d("etc"), o.d("tmp", mode=0o1777),
                      o.d("root", mode=0o700), o.d("var"), o.d("var/tmp", mode=0o1777),
                      o.sym("bin", "usr/bin"), o.sym("lib", "usr/lib"), o.sym("lib64", "usr/lib64"),
                      o.sym("sbin", "usr/bin")]:
            seen.add(ti.name)
            t.addfile(ti)
        for src, dst in sorted(files.items(), key=lambda kv: kv[1]):
            _add_dirs(t, dst, seen)
            _add_file(t, src, dst)
        py = "usr/bin/" + os.path.basename(pyexe)
        for ti, _ in [o.sym("usr/bin/sh", "dash"), o.sym("usr/bin/python3", os.path.basename(pyexe))]:
            if ti.name != py:
                t.addfile(ti)
        for ti, data in [o.f("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
                                           "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
                                           "node:x:1000:1000::/home/node:/bin/sh\n"),
                         o.f("etc/group", "root:x:0:\ndaemon:x:1:\nnode:x:1000:\n"),
                         o.f("etc/os-release", "ID=hutch-test\n")]:
            t.addfile(ti, __import__("io").BytesIO(data))
    return path


_CACHE = {}


def layer(tmp_path_factory):
    """The root's layer bytes, built once per session."""
    if "layer" not in _CACHE:
        path = tmp_path_factory.mktemp("rootimage") / "root.tar"
        build(str(path))
        with open(path, "rb") as fh:
            _CACHE["layer"] = fh.read()
    return _CACHE["layer"]
