# SPDX-License-Identifier: Apache-2.0
"""Filesystem snapshots (docs/snapshots.md): ``session.snapshot()`` keeps
what a live sandbox wrote as an image of the store; ``Snapshot.spawn()``
(or ``LocalSandbox(snapshot=name)``) starts sandboxes from it. Names as
the cloud SDK's where it has them (``SnapshotType.FILESYSTEM`` / ``FULL``,
``spawn()``, list, get, delete); ``FULL`` (processes and memory) is refused
by hutch for now with the reason."""
import json
import re
import subprocess

from . import errors
from ._binary import find_hutch

_NAME_RE = re.compile(r"^[A-Za-z0-9_:@+-][A-Za-z0-9._:/@+-]{0,199}$")


class SnapshotType:
    FILESYSTEM = "filesystem"
    FULL = "full"


def check_name(name, what="snapshot"):
    """A snapshot's name as hutch takes it, or ConfigError."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name:
        raise errors.ConfigError(f"invalid {what} {name!r}: letters, digits and ._:/@+- "
                                 "(not '.' or '/' first), no '..', at most 200 characters")
    return name


def _hutch(*args):
    proc = subprocess.run([find_hutch(), *args], capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return proc.stdout
    msg = proc.stderr.strip().removeprefix("hutch: ") or f"exit status {proc.returncode}"
    cls = {64: errors.ConfigError, 65: errors.SandboxError,
           69: errors.NotCapableHostError}.get(proc.returncode, errors.SandboxError)
    raise cls(msg)


class Snapshot:
    """A snapshot of the store: ``name`` (also ``id``), ``type``, ``base``
    (the image it stacks on), ``source`` (the sandbox it came from) and
    ``info`` (the whole answer or reference)."""

    def __init__(self, info):
        self.info = info
        self.name = self.id = info["name"]
        meta = info.get("snapshot", info)
        self.type = meta.get("type", SnapshotType.FILESYSTEM)
        self.base = meta.get("base")
        self.source = meta.get("source")
        self.frozen_ms = info.get("frozen_ms")

    def __repr__(self):
        return f"Snapshot({self.name!r}, base={self.base!r}, source={self.source!r})"

    def spawn(self, **options):
        """Create a sandbox from this snapshot and open it: the options are
        :class:`LocalSandbox`'s. Returns a :class:`SandboxSession`, to
        close (or use in ``with``)."""
        from .sandbox import LocalSandbox
        return LocalSandbox(snapshot=self.name, **options).open()

    def delete(self):
        """Forget it (``hutch snapshot rm``); refused while a live sandbox
        was spawned from it."""
        _hutch("snapshot", "rm", self.name)

    @classmethod
    def list(cls):
        """The store's snapshots (``hutch snapshot ls --json``)."""
        return [cls(d) for d in json.loads(_hutch("snapshot", "ls", "--json"))]

    @classmethod
    def get(cls, name):
        """One snapshot by name (``hutch snapshot inspect``)."""
        return cls(json.loads(_hutch("snapshot", "inspect", check_name(name))))
