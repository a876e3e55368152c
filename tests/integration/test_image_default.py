# SPDX-License-Identifier: Apache-2.0
"""hutch image build-default (issues 14, 27): the default image, built here
from its recipe (image/default.recipe): Debian packages with mmdebstrap, from
this machine's Debian mirror, and Node 22, npm, corepack and pnpm from the
npm registry (the two networks CI has), imported like any other image. One
build per run (3 to 12 min measured on a 2-core machine at load 4 to 10)."""
import json
import os
import shutil

import pytest

STORE_IDS = 0x0FFF0000  # image/image.h HUTCH_IMAGE_STORE_IDS
TOOLS = ["bash", "sh", "python3", "pip3", "git", "gh", "curl", "jq", "rg", "node", "npm",
         "npx", "pnpm", "corepack", "pre-commit"]
# What the sandbox reports, as docs/images.md's table says (the recipe's pins)
VERSIONS = {"node -v": "v22.23.5", "npm -v": "10.9.9", "pnpm -v": "12.24.0",
            "corepack --version": "0.36.0", "python3 -V": "Python 3.11.2"}

pytestmark = pytest.mark.skipif(not shutil.which("mmdebstrap"),
                                reason="mmdebstrap is not installed (scripts/install-deps --test)")


@pytest.fixture(scope="module")
def built(tmp_path_factory, default_root):
    """The session's default image (roots.py: built once, or CI's cache)."""
    from conftest import Hutch
    if default_root.why_not:
        pytest.skip(default_root.why_not)
    h = Hutch(tmp_path_factory.mktemp("default") / "rt", store=default_root.store)
    yield h, default_root.store, getattr(default_root, "build_output", None)


def test_build_default_is_an_image_of_the_store(built):
    h, store, out = built
    if out is not None:  # (None: HUTCH_TEST_DEFAULT_STORE, built by an earlier run)
        assert out.startswith("hutch-default: 1 layers, "), out
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
        assert any(os.path.lexists(root / d / t) for d in ("usr/bin", "bin", "usr/local/bin")), \
            f"no {t} in the image"
    # what it was built from: the recipe's digest, the base and the packages
    labels = json.loads((store / "blobs" / "sha256" / info["config"].split(":")[1])
                        .read_text())["config"]["Labels"]
    assert labels["run.hutch.base"] == "bookworm" and "python3-venv" in labels["run.hutch.packages"]
    assert labels["run.hutch.recipe"].startswith("sha256:")
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
    # the first build failed: the store it made is taken back (94caab1)
    assert not (tmp_path / "store").exists()
    assert json.loads(hutch("image", "ls", "--json").stdout) == []
    assert not (tmp_path / "store").exists()


def test_build_default_recipe_refusals(hutch, tmp_path):
    hutch.env["HUTCH_IMAGE_STORE"] = str(tmp_path / "store")
    r = hutch("image", "build-default", "--recipe", str(tmp_path / "nope"))
    assert r.returncode == 64 and b"read the recipe" in r.stderr, r.stderr
    bad = tmp_path / "bad.recipe"
    bad.write_text("base bookworm\npackages bash\nFROM debian\n")
    r = hutch("image", "build-default", "--recipe", str(bad))
    assert r.returncode == 64 and b"line 3: unknown 'FROM'" in r.stderr, r.stderr
    assert not (tmp_path / "store" / "tmp").exists() or os.listdir(tmp_path / "store" / "tmp") == []


def hutchwheel():
    """A pure-Python wheel built here: module hutchwheel, VALUE = 42."""
    import io
    import zipfile
    name, ver = "hutchwheel", "1.0"
    di = f"{name}-{ver}.dist-info"
    files = {f"{name}.py": b"VALUE = 42\n",
             f"{di}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n".encode(),
             f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hutch-test\nRoot-Is-Purelib: true\n"
                            b"Tag: py3-none-any\n"}
    files[f"{di}/RECORD"] = ("".join(f"{p},,\n" for p in files) + f"{di}/RECORD,,\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p, data in files.items():
            z.writestr(p, data)
    return f"{name}-{ver}-py3-none-any.whl", buf.getvalue()


def test_sandbox_of_the_default_image(built, hutch, tmp_path):
    """--image hutch-default: the cloud's tools on PATH, a venv, pip install
    --user of a wheel this test builds in a setup script (no PEP 668 error),
    nothing of the host's /usr/local."""
    import base64
    _, store, _ = built
    hutch.env["HUTCH_IMAGE_STORE"] = str(store)
    name, data = hutchwheel()
    script = tmp_path / "setup.sh"
    script.write_text("set -e\n"
                      f"echo {base64.b64encode(data).decode()} | base64 -d > /tmp/{name}\n"
                      f"python3 -m pip install --user --no-index /tmp/{name}\n")
    r = hutch("create", "--json", "--image", "hutch-default", "--setup-script", str(script),
              timeout=300)
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["id"]
    r = hutch("exec", sid, "--", "python3", "-c", "import hutchwheel; print(hutchwheel.VALUE)")
    assert r.returncode == 0 and r.stdout == b"42\n", r.stderr
    r = hutch("exec", sid, "--", "sh", "-c",
              "for t in " + " ".join(TOOLS) + "; do command -v $t || exit 1; done")
    assert r.returncode == 0 and len(r.stdout.split()) == len(TOOLS), r.stdout
    r = hutch("exec", sid, "--", "sh", "-c", "python3 -m venv /tmp/v && /tmp/v/bin/python -V")
    assert r.returncode == 0 and r.stdout.startswith(b"Python 3."), r.stderr
    # the image's own /usr/local (node, npm, pnpm...), nothing of the host's
    info = json.loads(hutch("image", "inspect", "hutch-default").stdout)
    root = store / "layers" / info["layers"][0].split(":")[1]
    inside = set(hutch("exec", sid, "--", "ls", "/usr/local/bin").stdout.decode().split())
    assert inside == set(os.listdir(root / "usr/local/bin")), inside
    for cmd, want in VERSIONS.items():
        r = hutch("exec", sid, "--", "sh", "-c", cmd)
        assert r.returncode == 0 and r.stdout.decode().strip() == want, (cmd, r.stdout, r.stderr)
    # npm i -g works for appuser (its prefix in its home, on PATH): a package
    # made here, offline
    r = hutch("exec", sid, "--", "sh", "-c",
              "mkdir -p /tmp/p/bin && cd /tmp/p && "
              "echo '{\"name\":\"hi-x\",\"version\":\"1.0.0\",\"bin\":{\"hi-x\":\"bin/h.js\"}}'"
              " > package.json && printf '#!/usr/bin/env node\\nconsole.log(process.version)\\n'"
              " > bin/h.js && npm i -g --no-fund --no-audit /tmp/p >/dev/null && "
              "command -v hi-x && hi-x")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["/home/appuser/.npm-global/bin/hi-x", "v22.23.5"]
    assert hutch("rm", sid).returncode == 0


def test_the_default_image_is_the_default_root_once_built(built, hutch, tmp_path):
    _, store, _ = built
    hutch.env["HUTCH_IMAGE_STORE"] = str(store)
    r = hutch("create", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["config"]["image"] == "hutch-default"
    r = hutch("exec", info["id"], "--", "sh", "-c", "command -v gh rg")
    assert r.returncode == 0, r.stderr
    assert hutch("rm", info["id"]).returncode == 0
    # --image host still picks the host-derived root, and so does a store
    # without the default image (nothing is made in it).
    for env in ({}, {"HUTCH_IMAGE_STORE": str(tmp_path / "none")}):
        r = hutch("create", "--json", *(() if env else ("--image", "host")), env=env)
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert info["config"]["image"] == "host"
        assert hutch("rm", info["id"]).returncode == 0
    assert not (tmp_path / "none").exists()
    # The pool key follows what was picked.
    keys = [json.loads(hutch("pool", "key", "--json", *o).stdout)["key"]
            for o in ((), ("--image", "hutch-default"), ("--image", "host"))]
    assert keys[0] == keys[1] != keys[2]
