# SPDX-License-Identifier: Apache-2.0
"""Unix sockets at a runtime dir of any length: sun_path holds 108 bytes,
and a HUTCH_RUNTIME_DIR of ~200 bytes puts every sandbox's api.sock and
exec.sock beyond it. The supervisor binds them, and the CLI connects to
them, through an O_PATH fd of their directory ("/proc/self/fd/N/NAME",
base/fdutil.c's hutch_unix_addr()): create, exec, cp, ls, events,
journal, run and rm all work there (before, create failed "listen on
'.../api.sock': File name too long", and a supervisor of a shorter dir
reached by a longer name was "alive but does not answer"). The Python
client's side is in clients/python/tests/test_client.py, the ordinary
user's in test_rootless.py.
"""
import json
import os

import pytest

from conftest import hutch_in

SUN_PATH = 108


def long_dir(top, length=200):
    """A directory under top whose path is length bytes long (made)."""
    d = str(top)
    while len(d) < length:
        d = os.path.join(d, "d" * min(60, length - len(d) - 1))
    os.makedirs(d)
    return d


@pytest.fixture
def long_hutch(tmp_path):
    yield from hutch_in(os.path.join(long_dir(tmp_path, 196), "rt"))


def test_every_verb_at_a_long_runtime_dir(long_hutch, tmp_path):
    h = long_hutch
    assert len(h.rtdir) >= 199
    sb = h.create()
    assert len(sb.sock) > SUN_PATH and sb.sock.startswith(h.rtdir + "/")
    r = h("exec", sb.id, "--", "sh", "-c", "echo hi; exit 3")
    assert (r.returncode, r.stdout) == (3, b"hi\n"), r.stderr
    r = h("ls", "-q")
    assert r.stdout.decode().split() == [sb.id], r.stderr
    assert json.loads(h("inspect", sb.id).stdout)["id"] == sb.id
    src = tmp_path / "in.txt"
    src.write_bytes(b"long paths\n")
    r = h("cp", str(src), f"{sb.id}:/workspace/in.txt")
    assert r.returncode == 0, r.stderr
    r = h("cp", f"{sb.id}:/workspace/in.txt", str(tmp_path / "out.txt"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.txt").read_bytes() == b"long paths\n"
    r = h("events", sb.id)
    assert r.returncode == 0 and b"ready" in r.stdout, r.stderr
    r = h("journal", sb.id)
    assert r.returncode == 0 and b"/workspace/in.txt" in r.stdout, r.stderr
    r = h("stats", "--no-stream", sb.id)
    assert r.returncode == 0, r.stderr
    r = h("rm", sb.id)
    assert r.returncode == 0, r.stderr
    assert h.ids() == []
    r = h("run", "--", "echo", "ran")
    assert (r.returncode, r.stdout) == (0, b"ran\n"), r.stderr
