# SPDX-License-Identifier: Apache-2.0
"""Everything else is in pyproject.toml. This only moves setuptools' build
directories out of the source tree: `pip install clients/python` (and
pybuild) otherwise leave build/ and hutch.egg-info here, and a later build
reuses build/lib, so a module deleted from the tree still ships (issue 32).
Each build step makes its own temporary directory and removes it."""
import atexit
import shutil
import tempfile

from setuptools import setup

_tmp = tempfile.mkdtemp(prefix="hutch-py-build-")
atexit.register(shutil.rmtree, _tmp, True)
setup(options={"build": {"build_base": _tmp + "/build"}, "egg_info": {"egg_base": _tmp}})
