# SPDX-License-Identifier: Apache-2.0
"""Progress of the image verbs and their interruption (issue 14): a bar on
a terminal (a real pty), plain lines otherwise, nothing with --quiet; and
an import interrupted at a known point of its unpacking (the test hook
HUTCH_TEST_UNPACK_STOP_AFTER stops the unpacker after N entries) by
SIGINT, SIGTERM or SIGKILL leaves no half-written layer in layers/, no
image naming a missing layer, and nothing in tmp/ after the next import."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

import ociimage as o
from test_tty import term  # noqa: F401 (the fixture: the CLI on a pty of ours)

BAR = (rb"\r\x1b\[K(layer (\d+)/(\d+) sha256:[0-9a-f]{12} (?:\[[=> ]+\] )?"
       rb"([\d.]+)/([\d.]+) (kB|MB)(?:, total ([\d.]+)/([\d.]+) (?:kB|MB))?)")


@pytest.fixture
def store(tmp_path, hutch):
    path = tmp_path / "store"
    hutch.env["HUTCH_IMAGE_STORE"] = str(path)
    return path


def two_layers(tmp_path, big=1000000, files=1):
    """A small layer, then one of `big` random bytes (gzip cannot shrink
    them: the blob is as large) in `files` files."""
    data = os.urandom(big)
    step = big // files
    l2 = o.tar([o.f(f"big{i}", data[i * step:(i + 1) * step]) for i in range(files)])
    return o.layout(str(tmp_path / "lay"), [o.tar([o.d("etc"), o.f("etc/small", "1")]), l2])


def test_bar_on_a_terminal(hutch, store, tmp_path, term):
    lay = two_layers(tmp_path)
    # Every report drawn (0 ms): the bar's steps can be counted.
    hutch.env["HUTCH_PROGRESS_INTERVAL_MS"] = "0"
    t = term("image", "import", lay, "img", cols=80)
    assert t.wait(60) == 0, t.out
    out = t.out
    bars = re.findall(BAR, out)
    second = [b for b in bars if b[1] == b"2"]
    assert len(second) >= 3, out[-2000:]
    reads = [float(b[3]) for b in second]
    assert reads == sorted(reads) and reads[0] == 0.0
    assert second[-1][3] == second[-1][4] == b"1.0" and second[-1][5] == b"MB"
    # The total runs over both layers' blobs.
    assert float(second[-1][6]) == float(second[-1][7]) >= 1.0
    # Never wider than the terminal (a bar that wraps cannot be redrawn).
    for seg in re.split(rb"\r\x1b\[K|\r\n", out):
        assert len(seg) <= 79, seg
    # One line per layer stays, the bar taken off first.
    assert re.search(rb"\r\x1b\[Klayer 1/2 sha256:[0-9a-f]{12}: [\d.]+ kB unpacked\r\n", out)
    assert re.search(rb"\r\x1b\[Klayer 2/2 sha256:[0-9a-f]{12}: 1\.0 MB unpacked\r\n", out)
    assert b"img: 2 layers (0 cached)" in out
    # A narrow terminal: a narrower bar, still one line.
    t = term("image", "import", lay, "img2", "--store", str(tmp_path / "s2"), cols=50)
    assert t.wait(60) == 0, t.out
    for seg in re.split(rb"\r\x1b\[K|\r\n", t.out):
        assert len(seg) <= 49, seg
    # The total goes first, the bar stays.
    assert re.search(rb"layer 2/2 sha256:[0-9a-f]{12} \[=+\] 1\.0/1\.0 MB\r", t.out), t.out


def test_quiet_on_a_terminal(hutch, store, tmp_path, term):
    t = term("image", "import", two_layers(tmp_path), "img", "--quiet")
    assert t.wait(60) == 0, t.out
    assert t.out == b""
    assert json.loads(hutch("image", "inspect", "img").stdout)["name"] == "img"


def test_plain_lines_without_a_terminal(hutch, store, tmp_path):
    lay = two_layers(tmp_path)
    r = hutch("image", "import", lay, "img", env={"HUTCH_PROGRESS_INTERVAL_MS": "0"})
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stderr and b"\r" not in r.stderr
    lines = r.stderr.decode().splitlines()
    assert re.fullmatch(r"layer 1/2 sha256:[0-9a-f]{12}: [\d.]+ kB unpacked", lines[0]), lines
    assert re.fullmatch(r"layer 2/2 sha256:[0-9a-f]{12}: 1\.0 MB unpacked", lines[-1]), lines
    # With 0 ms, the big layer's bytes lines (every 5 s by default) come on
    # every report, each a whole line.
    read = [ln for ln in lines[1:-1] if ln.endswith(" read")]
    assert read and all(re.fullmatch(r"layer 2/2 sha256:[0-9a-f]{12}: [\d.]+/1\.0 MB read",
                                     ln) for ln in read), lines
    # By default a layer this small gives no bytes line.
    r = hutch("image", "import", lay, "img2", "--store", str(tmp_path / "s2"))
    assert r.returncode == 0 and len(r.stderr.decode().splitlines()) == 2, r.stderr
    r = hutch("image", "import", lay, "img3", "--quiet", "--store", str(tmp_path / "s3"))
    assert r.returncode == 0 and r.stdout == b"" and r.stderr == b"", r.stderr


def test_create_image_progress(hutch, store, tmp_path):
    """create --image PATH fetches with the same lines; --progress never
    makes it silent. (The image has no shell: create fails after the fetch,
    which is what this test looks at.)"""
    lay = two_layers(tmp_path, big=64 << 10)
    r = hutch("create", "--image", lay, "--progress", "never", "--json")
    assert r.returncode == 64 and b"no /bin/sh" in r.stderr, r.stderr
    assert b"layer" not in r.stderr and b"importing" not in r.stderr, r.stderr
    assert hutch("image", "rm", "local" + os.path.realpath(lay)).returncode == 0
    assert hutch("image", "prune").returncode == 0
    r = hutch("create", "--image", lay, "--json")
    assert r.returncode == 64 and b"no /bin/sh" in r.stderr, r.stderr
    assert b"hutch: importing " in r.stderr
    assert re.search(rb"layer 2/2 sha256:[0-9a-f]{12}: [0-9.]+ kB unpacked", r.stderr), r.stderr


def children(pid):
    """(pid, state) of the processes whose parent is pid."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            stat = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            out.append((int(p), fields[0]))
    return out


def wait_for(cond, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def gone(pid):
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.parametrize("sig,whom", [(signal.SIGINT, "group"), (signal.SIGTERM, "group"),
                                      (signal.SIGKILL, "hutch")])
def test_interrupted_import_leaves_no_half_layer(hutch, store, tmp_path, sig, whom):
    lay = two_layers(tmp_path, big=4 << 20, files=40)
    hutch.env["HUTCH_TEST_UNPACK_STOP_AFTER"] = "20"
    p = hutch.popen("image", "import", lay, "img", start_new_session=True)
    try:
        # The first layer has 2 entries: the hook stops the second layer's
        # unpacker after 20 of its 40 files, a known point halfway.
        wait_for(lambda: any(s == "T" for _, s in children(p.pid)),
                 "the unpacker did not stop at its 20th entry")
        (unpacker,) = [c for c, _ in children(p.pid)]
        assert len(os.listdir(store / "layers")) == 1
        (half,) = os.listdir(store / "tmp")
        assert 10 <= len(os.listdir(store / "tmp" / half)) < 40
        if whom == "group":  # as a terminal's Ctrl-C does
            os.killpg(p.pid, sig)
        else:
            os.kill(p.pid, sig)
        p.wait(timeout=30)
        assert p.returncode == -sig
        # The unpacker dies with its parent, even stopped.
        wait_for(lambda: gone(unpacker), "the unpacker outlived hutch")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    del hutch.env["HUTCH_TEST_UNPACK_STOP_AFTER"]
    # Only the whole first layer is in layers/; no image names a missing one.
    (first,) = os.listdir(store / "layers")
    assert (store / "layers" / first / "etc/small").read_text() == "1"
    assert hutch("image", "inspect", "img").returncode == 65
    assert json.loads(hutch("image", "ls", "--json").stdout) == []
    # The next import cleans tmp/ and finishes, the first layer cached.
    r = hutch("image", "import", lay, "img")
    assert r.returncode == 0, r.stderr
    assert b"2 layers (1 cached)" in r.stdout
    assert os.listdir(store / "tmp") == []
    info = json.loads(hutch("image", "inspect", "img").stdout)
    for layer in info["layers"]:
        assert (store / "layers" / layer[7:]).is_dir()
    assert len(os.listdir(store / "layers" / info["layers"][1][7:])) == 40


def test_ctrl_c_on_a_terminal_ends_the_bar_line(hutch, store, tmp_path, term):
    lay = two_layers(tmp_path, big=4 << 20, files=40)
    hutch.env["HUTCH_TEST_UNPACK_STOP_AFTER"] = "20"
    t = term("image", "import", lay, "img")
    t.expect(rb"\r\x1b\[Klayer 2/2 sha256:[0-9a-f]{12} \[")
    wait_for(lambda: any(s == "T" for _, s in children(t.p.pid)),
             "the unpacker did not stop at its 20th entry")
    t.send(b"\x03")  # Ctrl-C: SIGINT to the terminal's foreground group
    assert t.wait(30) == -signal.SIGINT
    # The shell's prompt gets a line of its own: the bar's line was ended
    # (after the terminal's echo of ^C).
    assert b"unpacked" not in t.out
    # Where the bar stood: short of the whole (the reader runs ahead of the
    # stopped unpacker by what the pipe and its blocks hold, ~1 MB).
    m = t.expect(rb"\] (\d\.\d)/4\.2 MB, total (\d\.\d)/4\.2 MB(\^C)?\r\n", timeout=5)
    assert float(m[1]) < 4.2 and abs(float(m[2]) - float(m[1])) <= 0.1, m[0]
    assert [n for n in os.listdir(store / "layers")] and hutch("image", "inspect",
                                                                 "img").returncode == 65


def test_archive_bar(hutch, store, tmp_path, term):
    """A docker-save archive is unpacked whole first: its own bar, then
    its layers'."""
    arch = o.docker_archive(str(tmp_path / "img.tar"), [o.tar([o.f("big", os.urandom(500000))])])
    hutch.env["HUTCH_PROGRESS_INTERVAL_MS"] = "0"
    t = term("image", "import", arch, "img")
    assert t.wait(60) == 0, t.out
    size = os.path.getsize(arch) / 1000
    assert re.search(rb"\r\x1b\[Karchive \[=+\] %.1f/%.1f kB\r" % (size, size), t.out), t.out
    assert re.search(rb"\r\x1b\[Klayer 1/1 sha256:[0-9a-f]{12}: 50[0-9.]+ kB unpacked\r\n", t.out)
