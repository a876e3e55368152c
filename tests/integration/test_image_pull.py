# SPDX-License-Identifier: Apache-2.0
"""hutch image pull (issue 14): skopeo against a registry on loopback
(Debian's docker-registry) serving images this test builds and pushes
itself: a pull, a second pull that unpacks nothing, a multi-arch index
from which this machine's platform is taken, a reference by a digest the
registry does not have."""
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

import ociimage as o

REGISTRY = shutil.which("docker-registry")
SKOPEO = shutil.which("skopeo")
pytestmark = pytest.mark.skipif(not REGISTRY or not SKOPEO,
                                reason="needs skopeo and docker-registry (scripts/install-deps)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path):
    """A registry on 127.0.0.1 only, its storage under tmp_path."""
    port = free_port()
    cfg = tmp_path / "registry.yml"
    cfg.write_text(f"""version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: {tmp_path / 'registry'}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
""")
    proc = subprocess.Popen([REGISTRY, "serve", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "registry did not start"
            time.sleep(0.05)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def push(layout, tag, ref, all_=False):
    cmd = [SKOPEO, "copy", "--dest-tls-verify=false"] + (["--all"] if all_ else [])
    subprocess.run(cmd + [f"oci:{layout}:{tag}", f"docker://{ref}"], check=True,
                   capture_output=True, timeout=60)


@pytest.fixture
def store(tmp_path, hutch):
    path = tmp_path / "store"
    hutch.env["HUTCH_IMAGE_STORE"] = str(path)
    return path


def test_pull_then_cache_hit(hutch, store, registry, tmp_path):
    lay = o.layout(str(tmp_path / "lay"), [o.tar([o.d("etc"), o.f("etc/hello", "world")]),
                                           o.tar([o.f("etc/second", "2")])],
                   env=["PATH=/usr/bin:/bin", "FROM=registry"])
    push(lay, "latest", f"{registry}/test/img:1")
    r = hutch("image", "pull", f"{registry}/test/img:1", timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"2 layers (0 cached)" in r.stdout
    info = json.loads(hutch("image", "inspect", f"{registry}/test/img:1").stdout)
    assert "FROM=registry" in info["env"] and len(info["layers"]) == 2
    layer = store / "layers" / info["layers"][0][7:]
    assert (layer / "etc/hello").read_text() == "world"
    # Again: skopeo finds every blob in the store's layout (the files are
    # not written again), nothing is unpacked.
    blobs = store / "oci" / "blobs" / "sha256"
    before = {n: os.stat(blobs / n).st_ino for n in os.listdir(blobs)}
    r = hutch("image", "pull", f"{registry}/test/img:1", "again", timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"2 layers (2 cached)" in r.stdout
    after = {n: os.stat(blobs / n).st_ino for n in os.listdir(blobs)}
    assert {n: i for n, i in after.items() if n in before} == before


def test_pull_multiarch_takes_this_platform(hutch, store, registry, tmp_path):
    lay = o.multiarch_layout(str(tmp_path / "multi"), {
        "arm64": [o.tar([o.f("arch", "arm64")])],
        "amd64": [o.tar([o.f("arch", "amd64")])],
    })
    push(lay, "latest", f"{registry}/test/multi:1", all_=True)
    r = hutch("image", "pull", f"{registry}/test/multi:1", "multi", timeout=120)
    assert r.returncode == 0, r.stderr
    info = json.loads(hutch("image", "inspect", "multi").stdout)
    assert info["platform"] == "linux/amd64"
    assert (store / "layers" / info["layers"][0][7:] / "arch").read_text() == "amd64"


def test_pull_wrong_digest_refused(hutch, store, registry, tmp_path):
    lay = o.layout(str(tmp_path / "lay"), [o.tar([o.f("x", "1")])])
    push(lay, "latest", f"{registry}/test/img:1")
    wrong = "sha256:" + "0" * 64
    r = hutch("image", "pull", f"{registry}/test/img@{wrong}", "wrong", timeout=120)
    assert r.returncode != 0
    assert b"skopeo could not" in r.stderr
    assert hutch("image", "inspect", "wrong").returncode == 65
    assert not (store / "layers").exists() or os.listdir(store / "layers") == []


def test_pull_refuses_bad_references(hutch, store):
    for ref in ("-x", "--src-creds=a:b", "a b", "docker.io/../x", ""):
        r = hutch("image", "pull", ref, "n")
        assert r.returncode == 64, (ref, r.stderr)
