# SPDX-License-Identifier: Apache-2.0
"""The matrix of roots (issue 26): feature tests run on every root a user
gets, each test's report naming its root ([host], [image], [default]):

  host     the host-derived root (`--image host`)
  image    a small OCI image the tests build (rootimage.py: this host's dash,
           python3 and coreutils; ociimage.py), imported once per session
  default  hutch-default, what `hutch image build-default` makes (Debian
           bookworm with the cloud's tools), from HUTCH_TEST_DEFAULT_STORE
           (a store holding it: .ci/run's cache, keyed by the recipe) or
           built once per session where mmdebstrap is installed, else
           skipped saying so

A test takes the `root` fixture (parametrized over all three) and creates
with `root.create(h, ...)`; a root a feature does not apply to is skipped
with the reason (`root.skip_unless(...)`), never left out silently. Every
store here is the session's own (never /var/lib/hutch): sandboxes only add
and remove their use records in it.
"""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

import ociimage as o
import rootimage

ROOTS = ["host", "image", "default"]
IMAGE = "hutch-test-root"
DEFAULT = "hutch-default"
# what the small image adds on the host's files: a tool on its own PATH
IMAGE_ENV = ["PATH=/opt/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"]


class Root:
    def __init__(self, name, image=None, store=None, why_not=None):
        self.name, self.image, self.store, self.why_not = name, image, store, why_not

    def __repr__(self):
        return self.name

    def use(self, h):
        """Point hutch h at this root's store; the create options."""
        if self.why_not:
            pytest.skip(f"root {self.name}: {self.why_not}")
        if self.store:
            h.env["HUTCH_IMAGE_STORE"] = str(self.store)
        return ["--image", self.image or "host"]

    def create(self, h, *opts):
        return h.create(*self.use(h), *opts)

    def skip_unless(self, cond, why):
        if not cond:
            pytest.skip(f"not on root {self.name}: {why}")


def _hutch_env(store):
    from conftest import HUTCH  # noqa: F401 (the same binary)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HUTCH_IMAGE_STORE": str(store),
            "HUTCH_RUNTIME_DIR": str(store) + "-rt"}


@pytest.fixture(scope="session")
def image_root(tmp_path_factory):
    """The small OCI image, in a store of the session's."""
    from conftest import HUTCH
    d = tmp_path_factory.mktemp("root-image")
    top = o.tar([o.d("opt"), o.d("opt/bin"),
                 o.f("opt/bin/imgtool", "#!/bin/sh\necho imgtool\n", mode=0o755),
                 o.d("etc"), o.d("etc/ssl"), o.d("etc/ssl/certs"),
                 o.f("etc/ssl/certs/ca-certificates.crt", "# the image's own bundle\n")])
    lay = o.layout(str(d / "layout"), [rootimage.layer(tmp_path_factory), top], env=IMAGE_ENV)
    r = subprocess.run([HUTCH, "image", "import", lay, IMAGE], env=_hutch_env(d / "store"),
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return Root("image", IMAGE, d / "store")


def _store_has_default(store):
    return os.path.exists(os.path.join(store, "images", DEFAULT))


@pytest.fixture(scope="session")
def default_root(tmp_path_factory):
    """hutch-default: from HUTCH_TEST_DEFAULT_STORE, else built here once."""
    from conftest import HUTCH
    given = os.environ.get("HUTCH_TEST_DEFAULT_STORE")
    if given:
        if not _store_has_default(given):
            pytest.fail(f"HUTCH_TEST_DEFAULT_STORE={given} holds no {DEFAULT}")
        return Root("default", DEFAULT, pathlib.Path(given))
    if os.environ.get("HUTCH_TEST_DEFAULT_SKIP"):
        return Root("default", why_not=os.environ["HUTCH_TEST_DEFAULT_SKIP"])
    if not shutil.which("mmdebstrap"):
        return Root("default", why_not="no HUTCH_TEST_DEFAULT_STORE and no mmdebstrap to build "
                    "the default image (scripts/install-deps installs it)")
    d = tmp_path_factory.mktemp("root-default")
    r = subprocess.run([HUTCH, "image", "build-default"], env=_hutch_env(d / "store"),
                       capture_output=True, timeout=1800)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    root = Root("default", DEFAULT, d / "store")
    root.build_output = r.stdout.decode()
    return root


@pytest.fixture(params=ROOTS)
def root(request):
    """Each root of the matrix in turn (the test's id names it)."""
    if request.param == "host":
        return Root("host")
    return request.getfixturevalue(f"{request.param}_root")


def image_info(root, h):
    """`hutch image inspect` of the root's image (None for host)."""
    if not root.image:
        return None
    return json.loads(h("image", "inspect", root.image).stdout)
