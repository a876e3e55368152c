# SPDX-License-Identifier: Apache-2.0
"""Volumes: ``LocalSandbox(volumes={PATH: SOURCE})`` (``hutch create -v``)
and the named volumes of the store (``hutch volume``).

A SOURCE is an absolute host directory or the name of a named volume,
mounted read-only unless ``Volume(source, read_only=False)`` says
otherwise: the names and the shape of Modal's ``volumes={"/data": vol}``
and E2B's ``volume_mounts``, with hutch's rule that a mount is read-only
unless asked. The directory's owner is appuser inside (idmapped mounts,
root only); the checks of PATH and SOURCE are hutch's own, and its
messages come back as :class:`ConfigError`."""
import json
import re
import subprocess
from dataclasses import dataclass

from . import errors
from ._binary import find_hutch

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_VOLUMES = 16


@dataclass(frozen=True)
class Volume:
    """A host directory (absolute path) or a named volume (its name),
    read-only unless ``read_only=False``."""
    source: str
    read_only: bool = True

    def __post_init__(self):
        if not isinstance(self.source, str) or not (self.source.startswith("/")
                                                    or _NAME_RE.match(self.source)):
            raise errors.ConfigError(f"invalid volume source {self.source!r}: an absolute host "
                                     "directory or a volume name (letters, digits, '_', '.', '-')")
        if ":" in self.source:
            raise errors.ConfigError(f"invalid volume source {self.source!r}: no ':' in it")
        if not isinstance(self.read_only, bool):
            raise errors.ConfigError(f"invalid read_only {self.read_only!r}: True or False")

    # -- the store's named volumes (hutch volume ...) -----------------------
    @staticmethod
    def _cli(*args):
        r = subprocess.run([find_hutch(), "volume", *args], capture_output=True, text=True,
                           check=False)
        if r.returncode == 64:
            raise errors.ConfigError(r.stderr.strip().removeprefix("hutch: "))
        if r.returncode != 0:
            raise errors.SandboxError(r.stderr.strip().removeprefix("hutch: "))
        return r.stdout

    @classmethod
    def create(cls, name, read_only=False):
        """Make the named volume (nothing if it exists); a Volume of it
        (read-write: a volume is made to be written)."""
        cls._cli("create", name)
        return cls(name, read_only=read_only)

    @classmethod
    def list(cls):
        """The named volumes: dicts of name, path (on the host), created,
        in_use."""
        return json.loads(cls._cli("ls", "--json"))

    @staticmethod
    def delete(name):
        """Remove the named volume and its files; refused (SandboxError)
        while a sandbox uses it."""
        Volume._cli("rm", name)


def volume_specs(volumes):
    """volumes= as ``-v`` specs: a dict {PATH: SOURCE or Volume}, or a list
    of ``"SOURCE:PATH[:ro|rw]"`` strings (the CLI's)."""
    if volumes is None:
        return []
    if isinstance(volumes, dict):
        specs = []
        for path, src in volumes.items():
            if isinstance(src, str):
                src = Volume(src)
            if not isinstance(src, Volume):
                raise errors.ConfigError(f"invalid volume for {path!r}: a host directory, a "
                                         "volume name or hutch.Volume(...)")
            if not isinstance(path, str) or not path.startswith("/") or ":" in path:
                raise errors.ConfigError(f"invalid volume path {path!r}: an absolute path "
                                         "inside the sandbox, e.g. '/data'")
            specs.append(f"{src.source}:{path}:{'ro' if src.read_only else 'rw'}")
    elif isinstance(volumes, (list, tuple)):
        specs = list(volumes)
        for s in specs:
            if not isinstance(s, str) or s.count(":") not in (1, 2):
                raise errors.ConfigError(f"invalid volume {s!r}: 'SOURCE:PATH[:ro|rw]'")
    else:
        raise errors.ConfigError(f"invalid volumes {volumes!r}: a dict {{PATH: SOURCE}} or a "
                                 "list of 'SOURCE:PATH[:ro|rw]'")
    if len(specs) > MAX_VOLUMES:
        raise errors.ConfigError(f"invalid volumes: at most {MAX_VOLUMES}")
    return specs
