# SPDX-License-Identifier: Apache-2.0
"""File endpoints (/write_file, /read_file, /delete_file, /make_dir,
/delete_dir, /list_dir, raw PUT/GET /files) and `hutch cp`: round trips,
every error path, a 1 GiB stream with flat supervisor memory, traversal and
symlink attacks that must stay inside the sandbox, a full tmpfs."""
import base64
import hashlib
import os
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest

from conftest import HUTCH, UnixHTTPConnection, proc_status_kib


def post(sb, path, body, **kw):
    return sb.api("POST", path, body, **kw)


def assert_error(status, res, want_status, want_code, *words):
    assert status == want_status, (status, res)
    assert isinstance(res, dict) and "error" in res, res
    assert res["error"]["code"] == want_code, res
    assert res["error"]["message"], res
    for w in words:
        assert w in res["error"]["message"], res


def raw_put(sb, path, data, query="", timeout=300):
    conn = UnixHTTPConnection(sb.sock, timeout=timeout)
    try:
        conn.request("PUT", "/files?path=" + urllib.parse.quote(path) + query, body=data)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def raw_get(sb, path, query="", timeout=300):
    conn = UnixHTTPConnection(sb.sock, timeout=timeout)
    try:
        conn.request("GET", "/files?path=" + urllib.parse.quote(path) + query)
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.getheader("Content-Type")
    finally:
        conn.close()


def names(sb, path="/workspace"):
    status, res = post(sb, "/v1/list_dir", {"path": path})
    assert status == 200, res
    return sorted(e["name"] for e in res["entries"])


# ---- JSON endpoints ----

def test_write_read_utf8_and_mode(sandbox):
    status, res = post(sandbox, "/v1/write_file", {"path": "dir/sub/hello.txt", "content": "héllo\n", "mode": "600"})
    assert status == 200, res
    assert res == {"path": "dir/sub/hello.txt", "size": len("héllo\n".encode())}
    status, res = post(sandbox, "/v1/read_file", {"path": "/workspace/dir/sub/hello.txt"})
    assert status == 200, res
    assert res["content"] == "héllo\n" and res["encoding"] == "utf-8" and res["size"] == 7
    out = sandbox.sh("stat -c '%a %U' dir/sub/hello.txt")
    assert out == "600 appuser\n"
    # Overwrite keeps the existing mode when none is given.
    assert post(sandbox, "/v1/write_file", {"path": "dir/sub/hello.txt", "content": "x"})[0] == 200
    assert sandbox.sh("stat -c %a dir/sub/hello.txt; cat dir/sub/hello.txt") == "600\nx"
    # Forcing base64 on a text file.
    status, res = post(sandbox, "/v1/read_file", {"path": "dir/sub/hello.txt", "encoding": "base64"})
    assert res["encoding"] == "base64" and base64.b64decode(res["content"]) == b"x"


def test_binary_roundtrip_json_base64(sandbox):
    data = os.urandom(300000) + b"\x00\xff"
    status, res = post(sandbox, "/v1/write_file", {"path": "bin.dat", "content": base64.b64encode(data).decode(), "encoding": "base64"})
    assert status == 200 and res["size"] == len(data), res
    status, res = post(sandbox, "/v1/read_file", {"path": "bin.dat"})
    assert status == 200 and res["encoding"] == "base64", res
    assert base64.b64decode(res["content"]) == data
    assert sandbox.sh("sha256sum bin.dat").split()[0] == hashlib.sha256(data).hexdigest()


def test_binary_roundtrip_raw(sandbox):
    data = os.urandom(5 << 20)
    status, body = raw_put(sandbox, "raw.bin", data)
    assert status == 200, body
    status, got, ctype = raw_get(sandbox, "raw.bin")
    assert status == 200 and ctype == "application/octet-stream"
    assert got == data
    status, got, _ = raw_get(sandbox, "empty")
    assert status == 404
    assert raw_put(sandbox, "empty", b"")[0] == 200
    status, got, _ = raw_get(sandbox, "empty")
    assert status == 200 and got == b""


def test_raw_put_mode(sandbox):
    assert raw_put(sandbox, "run.sh", b"#!/bin/sh\necho ran\n", query="&mode=755")[0] == 200
    assert sandbox.sh("./run.sh") == "ran\n"


def test_list_dir(sandbox):
    sandbox.sh("mkdir d && printf abc > f && ln -s f l && chmod 640 f && touch -d @1700000000 f")
    status, res = post(sandbox, "/v1/list_dir", {"path": "."})
    assert status == 200, res
    by = {e["name"]: e for e in res["entries"]}
    assert [e["name"] for e in res["entries"]] == ["d", "f", "l"]
    assert by["f"]["type"] == "file" and by["f"]["size"] == 3 and by["f"]["mode"] == "640"
    assert by["f"]["mtime"] == 1700000000
    assert by["d"]["type"] == "directory" and by["l"]["type"] == "symlink"
    # Default path: /workspace.
    status, res = post(sandbox, "/v1/list_dir", {})
    assert status == 200 and res["path"] == "/workspace" and len(res["entries"]) == 3


def test_make_and_delete(sandbox):
    assert post(sandbox, "/v1/make_dir", {"path": "a/b/c", "mode": "700"})[0] == 200
    assert post(sandbox, "/v1/make_dir", {"path": "a/b/c"})[0] == 200  # exists: fine
    assert sandbox.sh("stat -c %a a/b/c") == "700\n"
    sandbox.sh("touch a/b/c/f a/x && ln -s /workspace/keep a/b/link && mkdir keep && touch keep/k")
    assert post(sandbox, "/v1/delete_file", {"path": "a/x"})[0] == 200
    assert post(sandbox, "/v1/delete_dir", {"path": "a"})[0] == 200
    assert names(sandbox) == ["keep"]
    assert names(sandbox, "keep") == ["k"]  # the symlink was removed, not followed


@pytest.mark.parametrize("endpoint,body,status,code", [
    ("/v1/read_file", {"path": "missing"}, 404, "not_found"),
    ("/v1/read_file", {"path": "d"}, 400, "is_a_directory"),
    ("/v1/read_file", {"path": "f/x"}, 400, "not_a_directory"),
    ("/v1/read_file", {"path": "secret"}, 403, "permission_denied"),
    ("/v1/read_file", {"path": "/dev/zero"}, 400, "invalid_path"),
    ("/v1/write_file", {"path": "d", "content": "x"}, 400, "is_a_directory"),
    ("/v1/write_file", {"path": "f/x", "content": "x"}, 400, "not_a_directory"),
    ("/v1/write_file", {"path": "/etc/x", "content": "x"}, 403, "permission_denied"),
    ("/v1/write_file", {"path": "/usr/bin/x", "content": "x"}, 403, "permission_denied"),
    ("/v1/delete_file", {"path": "missing"}, 404, "not_found"),
    ("/v1/delete_file", {"path": "d"}, 400, "is_a_directory"),
    ("/v1/delete_file", {"path": "/etc/passwd"}, 403, "permission_denied"),
    ("/v1/delete_dir", {"path": "f"}, 400, "not_a_directory"),
    ("/v1/delete_dir", {"path": "missing"}, 404, "not_found"),
    ("/v1/make_dir", {"path": "f"}, 400, "not_a_directory"),
    ("/v1/make_dir", {"path": "/usr/newdir"}, 403, "permission_denied"),
    ("/v1/list_dir", {"path": "missing"}, 404, "not_found"),
    ("/v1/list_dir", {"path": "f"}, 400, "not_a_directory"),
])
def test_file_errors(sandbox, endpoint, body, status, code):
    sandbox.sh("mkdir -p d && echo hi > f && echo s > secret && chmod 000 secret")
    st, res = post(sandbox, endpoint, body)
    assert_error(st, res, status, code)
    assert res["error"]["path"] == body["path"]


@pytest.mark.parametrize("endpoint,body,words", [
    ("/v1/write_file", {"content": "x"}, ["missing 'path'"]),
    ("/v1/write_file", {"path": "x"}, ["missing 'content'"]),
    ("/v1/write_file", {"path": "x", "content": "x", "encoding": "latin1"}, ["encoding"]),
    ("/v1/write_file", {"path": "x", "content": "!!!", "encoding": "base64"}, ["base64"]),
    ("/v1/write_file", {"path": "x", "content": "x", "mode": "999"}, ["mode"]),
    ("/v1/write_file", {"path": "x", "content": "x", "mode": 644}, ["'mode' must be a string"]),
    ("/v1/write_file", {"path": "", "content": "x"}, ["empty"]),
    ("/v1/read_file", {"path": "x", "bogus": 1}, ["unknown field 'bogus'"]),
    ("/v1/read_file", {"path": 3}, ["'path' must be a string"]),
    ("/v1/delete_dir", {}, ["missing 'path'"]),
])
def test_invalid_requests(sandbox, endpoint, body, words):
    st, res = post(sandbox, endpoint, body)
    assert_error(st, res, 400, "invalid_request", *words)


def test_invalid_json_and_methods(sandbox):
    st, res = sandbox.api("POST", "/v1/read_file", raw=b'{"path": ')
    assert_error(st, res, 400, "invalid_request", "invalid JSON")
    st, res = sandbox.api("GET", "/v1/read_file")
    assert_error(st, res, 405, "method_not_allowed")
    st, res = sandbox.api("DELETE", "/files?path=x")
    assert_error(st, res, 405, "method_not_allowed")
    st, res = sandbox.api("GET", "/files")
    assert_error(st, res, 400, "invalid_request", "path")
    st, res = sandbox.api("GET", "/files?path=x&format=zip")
    assert_error(st, res, 400, "invalid_request", "format")
    st, res = sandbox.api("PUT", "/files?path=x&mode=abc", raw=b"data")
    assert_error(st, res, 400, "invalid_request", "mode")


@pytest.mark.parametrize("size", [3, 3 << 20])
def test_get_files_with_a_body_is_answered_400(sandbox, size):
    """A GET /files carrying a body (the path belongs in the query) gets a
    400 naming the fix, after its body, on a connection that stays usable;
    before, the connection closed without an answer (issue 18)."""
    sandbox.sh("echo kept > f")
    conn = UnixHTTPConnection(sandbox.sock, timeout=30)
    try:
        conn.request("GET", "/files?path=f", body=b"x" * size,
                     headers={"Content-Type": "application/octet-stream"})
        resp = conn.getresponse()
        body = resp.read().decode()
        assert resp.status == 400 and "GET /files takes no request body" in body, body
        conn.request("GET", "/files?path=f")          # the same connection goes on
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"kept\n")
    finally:
        conn.close()


def test_read_file_too_large_for_json(sandbox):
    sandbox.sh("head -c 9000000 /dev/zero > big")
    st, res = post(sandbox, "/v1/read_file", {"path": "big"})
    assert_error(st, res, 413, "too_large")
    st, body, _ = raw_get(sandbox, "big")
    assert st == 200 and len(body) == 9000000


def test_raw_errors(sandbox):
    sandbox.sh("mkdir d")
    st, body, _ = raw_get(sandbox, "missing")
    assert st == 404 and b"not_found" in body
    st, body, _ = raw_get(sandbox, "d")
    assert st == 400 and b"is_a_directory" in body
    st, body = raw_put(sandbox, "d", b"x" * 100000)
    assert st == 400 and b"is_a_directory" in body
    st, body = raw_put(sandbox, "/etc/x", b"x" * 3000000)
    assert st == 403 and b"permission_denied" in body
    assert sandbox.sh("echo ok") == "ok\n"  # still serving


def test_aborted_upload_leaves_nothing(sandbox):
    """A client that hangs up mid-upload publishes no file and no temp name."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sandbox.sock)
    s.sendall(b"PUT /files?path=partial.bin HTTP/1.1\r\nHost: s\r\nContent-Length: 50000000\r\n\r\n")
    s.sendall(os.urandom(3 << 20))
    time.sleep(0.3)
    s.close()
    # Chunked without the final chunk, too.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sandbox.sock)
    s.sendall(b"PUT /files?path=chunked.bin HTTP/1.1\r\nHost: s\r\nTransfer-Encoding: chunked\r\n\r\n")
    s.sendall(b"100000\r\n" + b"y" * 0x100000 + b"\r\n")
    time.sleep(0.3)
    s.close()
    deadline = time.monotonic() + 10
    while sandbox.status()["commands_running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert names(sandbox) == []
    assert sandbox.sh("ls -A /workspace") == ""


def test_slow_download_does_not_block_others(sandbox):
    """A client that stops reading a download holds its command, not the
    supervisor: other requests are served; hanging up ends the reader."""
    sandbox.sh("head -c 60000000 /dev/urandom > big")
    want = sandbox.sh("sha256sum big").split()[0]
    conn = UnixHTTPConnection(sandbox.sock, timeout=60)
    conn.request("GET", "/files?path=big")
    resp = conn.getresponse()
    first = resp.read(1 << 20)
    assert len(first) == 1 << 20
    assert sandbox.api("GET", "/health")[0] == 200
    assert sandbox.sh("echo ok") == "ok\n"
    rest = resp.read()
    conn.close()
    assert hashlib.sha256(first + rest).hexdigest() == want
    # Hang up in the middle: the reader is killed, nothing stays running.
    conn = UnixHTTPConnection(sandbox.sock, timeout=60)
    conn.request("GET", "/files?path=big")
    conn.getresponse().read(1 << 20)
    conn.close()
    deadline = time.monotonic() + 10
    while sandbox.status()["commands_running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox.status()["commands_running"] == 0


def test_tar_format(sandbox):
    sandbox.sh("mkdir -p t/s && echo 1 > t/a && echo 2 > t/s/b")
    st, body, ctype = raw_get(sandbox, "t", query="&format=tar")
    assert st == 200 and ctype == "application/x-tar"
    st, res = raw_put(sandbox, "copy/here", body, query="&format=tar")
    assert st == 200, res
    assert sandbox.sh("cat copy/here/a copy/here/s/b") == "1\n2\n"
    st, body, _ = raw_get(sandbox, "missing", query="&format=tar")
    assert st == 404
    st, body, _ = raw_get(sandbox, "t/a", query="&format=tar")
    assert st == 400 and b"not_a_directory" in body


# ---- containment ----

HOST_PROBES = ["/etc/hutch-escape", "/tmp/hutch-escape", "/root/hutch-escape"]


def host_snapshot():
    snap = {}
    for p in ["/etc/passwd", "/etc/hostname", "/etc/shadow"]:
        try:
            with open(p, "rb") as f:
                snap[p] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            snap[p] = None
    return snap


def test_traversal_and_symlinks_stay_inside(sandbox):
    before = host_snapshot()
    for p in HOST_PROBES:
        assert not os.path.exists(p)
    sandbox.sh("ln -s / rootlink && ln -s /proc/1/root initroot && ln -s /etc/shadow shadow "
               "&& ln -s ../../../../../../etc/passwd up")
    # ".." above /workspace ends at the sandbox's read-only root.
    st, res = post(sandbox, "/v1/write_file", {"path": "../../../../etc/hutch-escape", "content": "x"})
    assert_error(st, res, 403, "permission_denied")
    # /proc/1/root is the sandbox init's root, closed to appuser.
    st, res = post(sandbox, "/v1/write_file", {"path": "/proc/1/root/tmp/hutch-escape", "content": "x"})
    assert st in (403, 404), res
    st, res = post(sandbox, "/v1/read_file", {"path": "initroot/etc/passwd"})
    assert st in (403, 404), res
    # A symlink to / leads to the sandbox's /, whose /tmp is the sandbox tmpfs.
    st, res = post(sandbox, "/v1/write_file", {"path": "rootlink/tmp/hutch-escape", "content": "inside"})
    assert st == 200, res
    assert sandbox.sh("cat /tmp/hutch-escape") == "inside"
    st, res = raw_put(sandbox, "rootlink/tmp/hutch-escape2", b"x")
    assert st == 200
    # /etc/shadow does not exist in the sandbox, whatever the host has.
    for path in ["shadow", "/etc/shadow", "rootlink/etc/shadow", "../../etc/shadow"]:
        st, res = post(sandbox, "/v1/read_file", {"path": path})
        assert_error(st, res, 404, "not_found")
        st, body, _ = raw_get(sandbox, path)
        assert st == 404
    # /etc/passwd through a symlink is the sandbox's synthesized one.
    st, res = post(sandbox, "/v1/read_file", {"path": "up"})
    assert st == 200 and "appuser" in res["content"], res
    with open("/etc/passwd") as f:
        assert res["content"] != f.read()
    # Deleting through a symlink to / removes the link's target only as appuser can.
    st, res = post(sandbox, "/v1/delete_dir", {"path": "rootlink"})
    assert_error(st, res, 400, "not_a_directory")
    st, res = post(sandbox, "/v1/delete_file", {"path": "rootlink/etc/passwd"})
    assert_error(st, res, 403, "permission_denied")
    st, res = post(sandbox, "/v1/list_dir", {"path": "/proc/1/root"})
    assert st in (403, 404), res
    # Nothing changed on the host.
    for p in HOST_PROBES:
        assert not os.path.exists(p)
    assert host_snapshot() == before


def test_directory_copy_does_not_follow_symlinks_out(sandbox, hutch, tmp_path):
    sandbox.sh("mkdir d && ln -s / d/root && ln -s /etc/passwd d/pw && echo x > d/f")
    out = tmp_path / "out"
    r = hutch("cp", f"{sandbox.id}:d", str(out))
    assert r.returncode == 0, r.stderr
    assert os.readlink(out / "root") == "/" and os.readlink(out / "pw") == "/etc/passwd"
    assert (out / "f").read_text() == "x\n"


# ---- limits ----

def test_full_tmpfs_no_space_and_no_leftovers(hutch):
    # A tmpfs workspace (the disk's ENOSPC: test_disk.py)
    sb = hutch.create("--instance-type", "nano", "--workspace", "tmpfs")
    try:
        big = b"z" * (400 << 20)
        st, body = raw_put(sb, "huge.bin", big)
        assert st == 507, body
        assert b"no_space" in body and b"no space left on device" in body
        st, res = post(sb, "/v1/write_file", {"path": "small.txt", "content": "ok"})
        assert st == 200, res  # the sandbox recovered
        assert names(sb) == ["small.txt"]
        assert sb.sh("ls -A /workspace") == "small.txt\n"
        # JSON writes fail the same way once memory is taken.
        sb.sh("head -c 200000000 /dev/zero > /tmp/fill || true")
        content = base64.b64encode(os.urandom(5 << 20)).decode()
        results = []
        for i in range(20):
            st, res = post(sb, "/v1/write_file", {"path": f"f{i}", "content": content, "encoding": "base64"})
            results.append(st)
            if st != 200:
                assert_error(st, res, 507, "no_space", "no space left on device")
                break
        assert 507 in results, results
        assert not [n for n in names(sb) if n.startswith(".")]
    finally:
        sb.rm()


# ---- 1 GiB through PUT/GET ----

class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, False

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, proc_status_kib(self.pid, "VmRSS"))
            time.sleep(0.02)


def test_one_gib_stream_flat_memory(sandbox):
    size, block = 1 << 30, os.urandom(16 << 20)
    sup = sandbox.status()["supervisor_pid"]
    sampler = RssSampler(sup)
    sampler.start()
    h = hashlib.sha256()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sandbox.sock)
    s.sendall(b"PUT /files?path=g.bin HTTP/1.1\r\nHost: s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % size)
    t0 = time.monotonic()
    for _ in range(size // len(block)):
        s.sendall(block)
        h.update(block)
    resp = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        resp += b
    up = time.monotonic() - t0
    s.close()
    assert resp.startswith(b"HTTP/1.1 200"), resp
    want = h.hexdigest()
    conn = UnixHTTPConnection(sandbox.sock, timeout=300)
    conn.request("GET", "/files?path=g.bin")
    r = conn.getresponse()
    assert r.status == 200 and int(r.getheader("Content-Length")) == size
    h2, n, t0 = hashlib.sha256(), 0, time.monotonic()
    while True:
        b = r.read(8 << 20)
        if not b:
            break
        h2.update(b)
        n += len(b)
    down = time.monotonic() - t0
    conn.close()
    sampler.stop = True
    sampler.join()
    assert n == size and h2.hexdigest() == want
    assert sandbox.sh("sha256sum g.bin").split()[0] == want
    peak = max(sampler.peak, proc_status_kib(sup, "VmHWM"))
    print(f"1 GiB: upload {size / up / 1e6:.0f} MB/s, download {size / down / 1e6:.0f} MB/s, "
          f"supervisor peak RSS {peak / 1024:.1f} MiB (hashing in the test included)")
    assert peak < 64 * 1024, f"supervisor RSS peaked at {peak} KiB"


# ---- hutch cp ----

def test_cp_files_both_ways(sandbox, hutch, tmp_path):
    src = tmp_path / "src.bin"
    data = os.urandom(3 << 20)
    src.write_bytes(data)
    os.chmod(src, 0o750)
    r = hutch("cp", str(src), f"{sandbox.id}:in/copy.bin")
    assert r.returncode == 0, r.stderr
    assert sandbox.sh("stat -c %a in/copy.bin") == "750\n"
    dst = tmp_path / "back.bin"
    r = hutch("cp", f"{sandbox.id}:/workspace/in/copy.bin", str(dst))
    assert r.returncode == 0, r.stderr
    assert dst.read_bytes() == data
    # Into an existing directory, on both sides.
    sandbox.sh("mkdir -p box")
    r = hutch("cp", str(src), f"{sandbox.id}:box")
    assert r.returncode == 0, r.stderr
    assert names(sandbox, "box") == ["src.bin"]
    r = hutch("cp", f"{sandbox.id}:box/src.bin", str(tmp_path))
    assert r.returncode == 0 and (tmp_path / "src.bin").read_bytes() == data
    # Standard input and output.
    r = hutch("cp", "-", f"{sandbox.id}:piped.txt", input=b"from stdin\n")
    assert r.returncode == 0, r.stderr
    r = hutch("cp", f"{sandbox.id}:piped.txt", "-")
    assert r.returncode == 0 and r.stdout == b"from stdin\n"


def test_cp_directories_both_ways(sandbox, hutch, tmp_path):
    d = tmp_path / "tree"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("A")
    (d / "sub" / "b.bin").write_bytes(b"\x00\x01")
    os.symlink("a.txt", d / "link")
    r = hutch("cp", str(d), f"{sandbox.id}:tree")
    assert r.returncode == 0, r.stderr
    assert sandbox.sh("cat tree/a.txt; readlink tree/link; stat -c %U tree/sub/b.bin") == "Aa.txt\nappuser\n"
    sandbox.sh("echo new > tree/sub/c.txt")
    out = tmp_path / "out"
    r = hutch("cp", f"{sandbox.id}:tree", str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "a.txt").read_text() == "A" and (out / "sub" / "c.txt").read_text() == "new\n"
    assert (out / "sub" / "b.bin").read_bytes() == b"\x00\x01"
    r = hutch("cp", f"{sandbox.id}:tree", "-")
    assert r.returncode == 0
    listing = subprocess.run(["tar", "-tf", "-"], input=r.stdout, capture_output=True).stdout.decode()
    assert "./sub/c.txt" in listing


def test_cp_of_a_fifo_onto_a_directory(sandbox, hutch, tmp_path):
    """A source that cannot be read twice (a FIFO) onto a directory: its
    bytes went to the directory's path and were refused; 1 naming the fix
    (a trailing '/'), which then copies it into the directory."""
    import threading
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def cp_fed(dest):
        def feed():
            with open(fifo, "wb") as w:  # opens when hutch opens it
                w.write(b"hello")
        t = threading.Thread(target=feed)
        t.start()
        r = hutch("cp", str(fifo), f"{sandbox.id}:{dest}")
        t.join(30)
        assert not t.is_alive()
        return r
    r = cp_fed("/workspace")
    assert r.returncode == 1, r.stderr
    assert (f"'/workspace' is a directory in the sandbox, and '{fifo}' cannot be read again "
            f"(not a regular file): end the path with '/' ('ID:/workspace/')").encode() \
        in r.stderr, r.stderr
    assert sandbox.sh("ls -A /workspace") == ""
    r = cp_fed("/workspace/")
    assert r.returncode == 0, r.stderr
    assert sandbox.sh("cat /workspace/pipe") == "hello"


def test_cp_errors(sandbox, hutch, tmp_path):
    r = hutch("cp", "0123456789ab:x", str(tmp_path / "x"))
    assert r.returncode == 65 and b"no sandbox" in r.stderr
    r = hutch("cp", str(tmp_path / "missing"), f"{sandbox.id}:x")
    assert r.returncode == 1 and b"missing" in r.stderr
    r = hutch("cp", f"{sandbox.id}:missing", str(tmp_path / "x"))
    assert r.returncode == 1 and b"No such file" in r.stderr
    assert not (tmp_path / "x").exists()
    r = hutch("cp", "a", "b")
    assert r.returncode == 64 and b"ID:PATH" in r.stderr
    r = hutch("cp", f"{sandbox.id}:x", f"{sandbox.id}:y")
    assert r.returncode == 64
    r = hutch("cp", str(tmp_path), f"{sandbox.id}:")
    assert r.returncode == 64 and b"empty path" in r.stderr
    r = hutch("cp", "onlyone")
    assert r.returncode == 64 and b"give a source and a destination: hutch cp LOCAL ID:PATH" \
        in r.stderr, r.stderr
    r = hutch("cp", f"{sandbox.id}:x", f"{sandbox.id}:y")
    assert r.returncode == 64 and b"exactly one of" in r.stderr, r.stderr
    # A local destination that cannot be written: 1 before anything is read
    sandbox.sh("echo y > /workspace/g; mkdir -p /workspace/d; echo x > /workspace/d/f")
    r = hutch("cp", f"{sandbox.id}:g", str(tmp_path / "none" / "g"))
    assert r.returncode == 1 and b"cannot write '" in r.stderr, r.stderr
    assert b"No such file or directory" in r.stderr and not (tmp_path / "none").exists()
    # No tar on the host (PATH without one): 69, said before anything
    # travels, nothing made on either side (was 70 or 1 with tar's words)
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "f").write_text("x")
    for args in ([str(tmp_path / "up"), f"{sandbox.id}:up"],
                 [f"{sandbox.id}:d", str(tmp_path / "down")]):
        r = hutch("cp", *args, env={"PATH": "/nonexistent"})
        assert r.returncode == 69, (args, r.stderr)
        assert b"cannot run tar" in r.stderr and b"install it or put it in PATH" in r.stderr
    assert not (tmp_path / "down").exists()
    assert sandbox.sh("ls /workspace") == "d\ng\n"
    # A directory onto a local file: tar's refusal, the file kept as it was
    (tmp_path / "kept").write_bytes(b"kept")
    r = hutch("cp", f"{sandbox.id}:d", str(tmp_path / "kept"))
    assert r.returncode == 1 and b"extracting into '" in r.stderr, r.stderr
    assert (tmp_path / "kept").read_bytes() == b"kept"
    r = hutch("cp", "--help")
    assert r.returncode == 0 and b"usage: hutch cp" in r.stdout
    (tmp_path / "f").write_text("x")
    r = hutch("cp", str(tmp_path / "f"), f"{sandbox.id}:/etc/f")
    assert r.returncode == 1 and b"Read-only" in r.stderr


# ---- a hostile directory stream ----

def crafted_tar(outside):
    """Members a compromised sandbox can put into the tar stream of a
    directory copy (any process of appuser can write into the pipe of the
    sandbox's tar through /proc/PID/fd/1): every classic way out of the
    destination on the host."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        def add(name, data=b"pwned\n", **kw):
            info = tarfile.TarInfo(name)
            for k, v in kw.items():
                setattr(info, k, v)
            if info.type == tarfile.REGTYPE:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
            else:
                t.addfile(info)
        add("ok.txt", b"fine\n")
        add("../escape-dotdot")
        add(os.path.join(str(outside), "escape-absolute"))
        add("abs", type=tarfile.SYMTYPE, linkname=str(outside))
        add("abs/escape-through-symlink")
        add("up", type=tarfile.SYMTYPE, linkname="..")
        add("up/escape-through-dotdot-symlink")
        add("hard", type=tarfile.LNKTYPE, linkname=os.path.join(str(outside), "secret"))
        add("hard", b"overwritten through a hard link\n")
        add("suid", b"#!/bin/sh\n", mode=0o4755, uid=0, gid=0)
        add("dev", type=tarfile.CHRTYPE, devmajor=1, devminor=1)
    return buf.getvalue()


class FakeSandbox:
    """A sandbox entry in the runtime dir (held lock, api.sock) whose API
    answers a directory copy with a crafted tar stream."""

    def __init__(self, rtdir, body):
        import fcntl
        self.id = "f" * 12
        self.dir = os.path.join(rtdir, self.id)
        os.makedirs(self.dir, mode=0o700)
        self.lock = open(os.path.join(self.dir, "lock"), "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(os.path.join(self.dir, "api.sock"))
        self.srv.listen(8)
        self.body = body
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with c:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    head += chunk
                if b"format=tar" in head.split(b"\r\n", 1)[0] and callable(self.body):
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\n"
                              b"Connection: close\r\n\r\n")
                    try:
                        for chunk in self.body():
                            c.sendall(chunk)
                    except OSError:
                        pass  # the client stopped reading
                elif b"format=tar" in head.split(b"\r\n", 1)[0]:
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\n"
                              b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(self.body)
                              + self.body)
                else:
                    err = (b'{"error":{"code":"is_a_directory","message":"is a directory"}}')
                    c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(err) + err)

    def close(self):
        self.srv.close()
        self.lock.close()
        import shutil
        shutil.rmtree(self.dir)


def test_directory_copy_of_a_hostile_stream_stays_in_the_destination(hutch, tmp_path):
    """hutch cp ID:dir DEST extracts on the host what the sandbox sends: a
    crafted archive writes nothing outside DEST, no setuid bit, no device,
    and the file a hard link names outside keeps its content."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host secret\n")
    dest = tmp_path / "work" / "dest"
    (tmp_path / "work").mkdir()
    fake = FakeSandbox(hutch.rtdir, crafted_tar(outside))
    before = sorted(os.listdir(tmp_path)), sorted(os.listdir(outside))
    try:
        r = hutch("cp", f"{fake.id}:d", str(dest))
    finally:
        fake.close()
    # tar refuses some members, so the copy reports a failure; nothing escaped
    assert r.returncode == 1, r
    assert b"extracting into" in r.stderr and b"failed (tar exit 2)" in r.stderr, r.stderr
    assert (sorted(os.listdir(tmp_path)), sorted(os.listdir(outside))) == before
    assert (outside / "secret").read_text() == "host secret\n"
    assert sorted(os.listdir(tmp_path / "work")) == ["dest"]
    assert (dest / "ok.txt").read_text() == "fine\n"
    for name in ("abs", "up"):
        p = dest / name
        assert not p.exists() or p.is_symlink(), name   # a link at most, nothing behind it
    st = os.lstat(dest / "suid") if os.path.lexists(dest / "suid") else None
    assert st is None or not st.st_mode & 0o6000, oct(st.st_mode)
    # the CLI's tar runs without CAP_MKNOD: no device node (here /dev/mem)
    assert not os.path.lexists(dest / "dev"), oct(os.lstat(dest / "dev").st_mode)
    assert b"dev: Cannot mknod" in r.stderr, r.stderr
    for dirpath, dirs, files in os.walk(dest):
        for f in files + dirs:
            real = os.path.realpath(os.path.join(dirpath, f))
            if not os.path.islink(os.path.join(dirpath, f)):
                assert real.startswith(str(dest) + os.sep), real


def endless_tar():
    """A directory stream without end: the same 1 MiB member, forever."""
    import io
    import tarfile
    data = b"x" * (1 << 20)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        info = tarfile.TarInfo("blob")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    member = buf.getvalue()[:512 + len(data)]  # header + data, no end-of-archive blocks

    def gen():
        while True:
            yield member
    return gen


def test_cp_max_bytes_stops_an_endless_directory_stream(hutch, tmp_path):
    dest = tmp_path / "dest"
    fake = FakeSandbox(hutch.rtdir, endless_tar())
    try:
        r = hutch("cp", "--max-bytes", str(8 << 20), f"{fake.id}:d", str(dest), timeout=60)
    finally:
        fake.close()
    assert r.returncode == 1, r
    assert b"copy of 'd' stopped: the sandbox sent more than --max-bytes 8388608 bytes" in r.stderr
    # what was extracted before the stop stays, and it is bounded
    total = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    assert total <= 8 << 20, total


def test_cp_max_bytes_file(sandbox, hutch, tmp_path):
    sandbox.sh("head -c 3000000 /dev/urandom > big")
    out = tmp_path / "big"
    r = hutch("cp", "--max-bytes", "1000000", f"{sandbox.id}:big", str(out))
    assert r.returncode == 1, r
    assert b"copy of 'big' stopped: the sandbox sent more than --max-bytes 1000000 bytes" \
        in r.stderr, r.stderr
    assert not out.exists()   # a stopped file copy leaves nothing
    r = hutch("cp", "--max-bytes=3000000", f"{sandbox.id}:big", str(out))
    assert r.returncode == 0, r
    assert out.stat().st_size == 3000000
    # a sparse file takes no room in the sandbox but would fill the host:
    # its length is over the bound, so nothing is written at all
    sandbox.sh("truncate -s 1T sparse")
    r = hutch("cp", "--max-bytes", str(1 << 30), f"{sandbox.id}:sparse", str(tmp_path / "sp"))
    assert r.returncode == 1, r
    assert b"more than --max-bytes 1073741824 bytes" in r.stderr, r.stderr
    assert not (tmp_path / "sp").exists()


@pytest.mark.parametrize("args, message", [
    (["--max-bytes"], b"--max-bytes needs a number of bytes"),
    (["--max-bytes", "0", "ID:big", "out"], b"invalid --max-bytes '0': expected a number of bytes"),
    (["--max-bytes=12k", "ID:big", "out"], b"invalid --max-bytes '12k'"),
    (["--max-bytes", "10", "LOCAL", "ID:x"], b"--max-bytes bounds a copy out of a sandbox"),
])
def test_cp_max_bytes_usage_errors(sandbox, hutch, tmp_path, args, message):
    local = tmp_path / "local"
    local.write_text("x")
    args = [a.replace("ID", sandbox.id).replace("LOCAL", str(local))
            .replace("out", str(tmp_path / "out")) for a in args]
    r = hutch("cp", *args)
    assert r.returncode == 64, r
    assert message in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_directory_copy_refused_when_tar_would_keep_cap_mknod(sandbox, hutch, tmp_path):
    """Root without CAP_SETPCAP cannot take CAP_MKNOD from the extracting
    tar: cp refuses before anything is transferred (exit 69), naming the
    way out."""
    sandbox.sh("mkdir d && echo x > d/f")
    out = tmp_path / "out"
    r = subprocess.run(["setpriv", "--bounding-set=-setpcap", HUTCH, "cp", f"{sandbox.id}:d",
                        str(out)], capture_output=True, env=hutch.env, timeout=60)
    assert r.returncode == 69, r
    assert b"cannot take CAP_MKNOD away from the tar that extracts 'd'" in r.stderr, r.stderr
    assert b"copy to '-' and extract yourself" in r.stderr
    assert not out.exists()
    # the same copy works with CAP_SETPCAP
    r = hutch("cp", f"{sandbox.id}:d", str(out))
    assert r.returncode == 0 and (out / "f").read_text() == "x\n", r
