# SPDX-License-Identifier: Apache-2.0
"""hutch image build-default (issue 14): the default image, built here from
Debian packages with mmdebstrap, from this machine's Debian mirror (the one
network CI has), imported like any other image. One build per run (~2 min)."""
import json
import os
import shutil

import pytest

STORE_IDS = 0x0FFF0000  # image/image.h HUTCH_IMAGE_STORE_IDS
TOOLS = ["bash", "sh", "python3", "pip3", "git", "gh", "curl", "jq", "rg", "node", "npm",
         "pre-commit"]

pytestmark = pytest.mark.skipif(not shutil.which("mmdebstrap"),
                                reason="mmdebstrap is not installed (scripts/install-deps)")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from conftest import Hutch
    tmp = tmp_path_factory.mktemp("default")
    h = Hutch(tmp / "rt")
    h.env["HUTCH_IMAGE_STORE"] = str(tmp / "store")
    r = h("image", "build-default", timeout=900)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    yield h, tmp / "store", r


def test_build_default_is_an_image_of_the_store(built):
    h, store, r = built
    assert r.stdout.decode().startswith("hutch-default: 1 layers, ")
    info = json.loads(h("image", "inspect", "hutch-default").stdout)
    assert len(info["layers"]) == 1 and info["platform"].startswith("linux/")
    assert "LANG=C.UTF-8" in info["env"] and any(e.startswith("PATH=") for e in info["env"])
    assert info["workdir"] == "/workspace"
    # Nothing half-made is left in the store's tmp/.
    assert os.listdir(store / "tmp") == []


def test_build_default_carries_the_cloud_tools(built):
    h, store, _ = built
    info = json.loads(h("image", "inspect", "hutch-default").stdout)
    root = store / "layers" / info["layers"][0].split(":")[1]
    for t in TOOLS:
        p = root / "usr/bin" / t
        assert os.path.lexists(p) or os.path.lexists(root / "bin" / t), f"no {t} in the image"
    # pip works for appuser: no PEP 668 "externally-managed-environment".
    assert not list(root.glob("usr/lib/python3*/EXTERNALLY-MANAGED"))
    assert list(root.glob("usr/lib/python3/dist-packages/pip"))
    # Unpacked as every image: owned by the store's ids, never host root.
    assert os.lstat(root / "usr/bin/git").st_uid == STORE_IDS
    assert (root / "etc/os-release").read_text().count("bookworm") >= 1


def test_build_default_refusals(hutch, tmp_path):
    hutch.env["HUTCH_IMAGE_STORE"] = str(tmp_path / "store")
    r = hutch("image", "build-default", "bad name")
    assert r.returncode == 64 and b"invalid image name 'bad name'" in r.stderr, r.stderr
    # Without mmdebstrap: the error names the package.
    r = hutch("image", "build-default", env={"PATH": "/nonexistent"})
    assert r.returncode == 69, r.stderr
    assert b"build-default needs mmdebstrap (Debian: apt-get install mmdebstrap)" in r.stderr
    # A mirror that cannot be reached: a failure, and nothing is left.
    r = hutch("image", "build-default", env={"HUTCH_DEBIAN_MIRROR": "http://127.0.0.1:9/debian"},
              timeout=300)
    assert r.returncode == 70 and b"mmdebstrap failed" in r.stderr, r.stderr[-2000:]
    assert os.listdir(tmp_path / "store" / "tmp") == []
    assert json.loads(hutch("image", "ls", "--json").stdout) == []
