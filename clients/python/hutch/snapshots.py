# SPDX-License-Identifier: Apache-2.0
"""Filesystem snapshots (docs/snapshots.md): ``session.snapshot()`` keeps
what a live sandbox wrote as an image of the store; ``Snapshot.spawn()``
(or ``LocalSandbox(snapshot=name)``) starts sandboxes from it. Names as
the cloud SDK's where it has them (``SnapshotType.FILESYSTEM`` / ``FULL``,
``spawn()``, list, get, delete); ``FULL`` (processes and memory) is CRIU's
dump of a plain sandbox, restored by ``spawn()`` into a new one. ``DeclarativeSnapshot`` (the cloud's
builder: files, copies, commands, env -> a snapshot) is ``hutch build``."""
import asyncio
import json
import os
import re
import subprocess
import tempfile

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


class DeclarativeSnapshot:
    """A snapshot declared, then built (``hutch build``, docs/snapshots.md
    "The builder"): the cloud SDK's ``DeclarativeSnapshot`` (``file``,
    ``copy``, ``run``, ``build``) plus ``env`` (Modal's ``Image.env``).
    ``build()`` runs the steps in a sandbox of ``image`` of its own (files,
    then copies, then commands, as appuser, in ``workdir``), makes snapshot
    ``snapshot_name`` (default ``name``) whose Env has ``env``, deletes the
    sandbox whatever happens, and returns the :class:`Snapshot`."""

    def __init__(self, name, image, workdir=None):
        self.name = check_name(name)
        if not isinstance(image, str) or not image:
            raise errors.ConfigError(f"invalid image {image!r}: the name of an image or "
                                     "snapshot of the store")
        if workdir is not None and (not isinstance(workdir, str) or not workdir):
            raise errors.ConfigError(f"invalid workdir {workdir!r}: a sandbox path")
        self.image, self.workdir = image, workdir
        self._files, self._copies, self._runs, self._env = {}, [], [], {}

    def file(self, path, content):
        """Write ``content`` (str) to ``path`` in the sandbox (mode 644)."""
        if not isinstance(path, str) or not path or not isinstance(content, str):
            raise errors.ConfigError(f"invalid file {path!r}: a sandbox path and its text (str)")
        self._files[path] = content
        return self

    def copy(self, src, dst):
        """Copy a local file or directory into the sandbox, as ``hutch cp``
        (a file keeps its mode; a directory's contents go into ``dst``)."""
        if not isinstance(src, (str, os.PathLike)) or not isinstance(dst, str) or not dst:
            raise errors.ConfigError(f"invalid copy {src!r} -> {dst!r}: a local path and a "
                                     "sandbox path")
        self._copies.append({"src": os.path.abspath(os.fspath(src)), "dst": dst})
        return self

    def run(self, command, cwd=None, *, timeout=None):
        """Run ``command`` (``sh -c``) in the sandbox; a non-zero exit ends
        the build (``SetupError`` with its output)."""
        if not isinstance(command, str) or not command:
            raise errors.ConfigError(f"invalid command {command!r}: a non-empty str")
        step = {"command": command}
        if cwd is not None:
            step["cwd"] = cwd
        if timeout is not None:
            step["timeout"] = timeout
        self._runs.append(step if len(step) > 1 else command)
        return self

    def env(self, mapping=None, **variables):
        """Environment variables: the build's commands' and the snapshot's."""
        for k, v in {**(mapping or {}), **variables}.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise errors.ConfigError(f"invalid env {k!r}: names and values are str")
            self._env[k] = v
        return self

    def spec(self, snapshot_name=None):
        """The build file (a dict) ``hutch build`` is given."""
        spec = {"name": check_name(snapshot_name or self.name), "image": self.image}
        if self.workdir is not None:
            spec["workdir"] = self.workdir
        for key, value in (("env", self._env), ("files", self._files),
                           ("copy", self._copies), ("run", self._runs)):
            if value:
                spec[key] = value
        return spec

    def build(self, snapshot_name=None, **options):
        """Build it: the :class:`Snapshot`. ``options`` are
        :class:`LocalSandbox`'s, for the build sandbox only (``network=`` for
        downloads). A failing command raises ``SetupError`` (its output in
        the message), a bad declaration ``ConfigError``; nothing is made."""
        from .sandbox import LocalSandbox
        spec = self.spec(snapshot_name)
        args = LocalSandbox(**options)._cli_options() if options else []
        with tempfile.TemporaryDirectory(prefix="hutch-build-") as d:
            path = os.path.join(d, "build.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(spec, f)
            proc = subprocess.run([find_hutch(), "build", path, "--json", *args],
                                  capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            msg = proc.stderr.strip()[-8000:] or f"exit status {proc.returncode}"
            cls = {64: errors.ConfigError, 65: errors.HutchNotFoundError,
                   69: errors.NotCapableHostError, 71: errors.SetupError}.get(
                       proc.returncode, errors.SandboxError)
            raise cls(f"cannot build snapshot {spec['name']!r}: {msg}")
        return Snapshot.get(json.loads(proc.stdout)["name"])

    async def build_async(self, snapshot_name=None, **options):
        """``build()`` for asyncio (in a thread: hutch build is a process)."""
        return await asyncio.to_thread(self.build, snapshot_name, **options)
