# SPDX-License-Identifier: Apache-2.0
"""Finding and checking the ``hutch`` binary."""
import json
import os
import shutil
import subprocess

from .errors import HutchNotFoundError

MIN_VERSION = (0, 1, 0)
_checked = {}

_INSTALL = ("build hutch from its repository (sudo scripts/install-deps --build && cmake -S . -B build && "
            "cmake --build build), then put build/hutch on PATH or set HUTCH_BIN to its path")


def _source_tree_binary():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))  # clients/python/hutch -> repo
    return os.path.join(repo, "build", "hutch")


def _parse_version(s):
    parts = []
    for p in str(s).split("-")[0].split("."):
        digits = "".join(c for c in p if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple((parts + [0, 0, 0])[:3])


def find_hutch():
    """The path of a usable ``hutch`` binary: ``$HUTCH_BIN``, else ``hutch`` on
    ``PATH``, else ``build/hutch`` of the source tree this package sits in.
    Raises :class:`HutchNotFoundError` naming what to install."""
    env = os.environ.get("HUTCH_BIN")
    if env:
        path, origin = env, "HUTCH_BIN"
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise HutchNotFoundError(f"HUTCH_BIN={env!r} is not an executable file; {_INSTALL}")
    else:
        path, origin = shutil.which("hutch"), "PATH"
        if not path:
            path, origin = _source_tree_binary(), "the source tree"
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise HutchNotFoundError(
                    f"the hutch binary was not found (not in HUTCH_BIN, not on PATH, not at {path}); "
                    f"{_INSTALL}. The Python client needs hutch >= "
                    f"{'.'.join(map(str, MIN_VERSION))}")
    if path not in _checked:
        try:
            out = subprocess.run([path, "version", "--json"], capture_output=True, text=True,
                                 timeout=30, check=False)
            version = json.loads(out.stdout)["version"]
        except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError) as e:
            raise HutchNotFoundError(
                f"{path} (from {origin}) is not a working hutch binary ('version --json' failed: "
                f"{e}); {_INSTALL}") from None
        if _parse_version(version) < MIN_VERSION:
            raise HutchNotFoundError(
                f"{path} (from {origin}) is hutch {version}, too old for this client (needs >= "
                f"{'.'.join(map(str, MIN_VERSION))}); {_INSTALL}")
        _checked[path] = version
    return path
