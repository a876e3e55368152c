# SPDX-License-Identifier: Apache-2.0
"""Whole directories in and out of a sandbox, file by file over the files
API (``PUT``/``GET /files``): bytes exact, modes kept, nothing followed.

Symbolic links are neither followed nor recreated (the files API makes
none): each one met is skipped and listed in the result, so a link that
points out of the tree can never pull host or sandbox files along.
"""
import dataclasses
import os
import posixpath
import stat
from typing import List


@dataclasses.dataclass
class DirTransfer:
    """What :meth:`SandboxSession.upload_dir` / ``download_dir`` did."""
    files: int = 0
    dirs: int = 0
    bytes: int = 0
    skipped: List[str] = dataclasses.field(default_factory=list)  # symlinks and other non-files


def upload_dir(session, src, dst):
    src, dst = os.fspath(src), os.fspath(dst)
    if not os.path.isdir(src) or os.path.islink(src):
        raise NotADirectoryError(f"upload_dir: {src!r} is not a local directory")
    done = DirTransfer()
    session.make_dir(dst)
    done.dirs += 1
    for root, dirs, files in os.walk(src, followlinks=False):
        rel = os.path.relpath(root, src)
        there = dst if rel == "." else posixpath.join(dst, *rel.split(os.sep))
        for name in sorted(dirs):
            path = os.path.join(root, name)
            if os.path.islink(path):
                done.skipped.append(os.path.relpath(path, src))
                continue
            session.make_dir(posixpath.join(there, name),
                             mode=stat.S_IMODE(os.lstat(path).st_mode))
            done.dirs += 1
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for name in sorted(files):
            path = os.path.join(root, name)
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                done.skipped.append(os.path.relpath(path, src))
                continue
            with open(path, "rb") as f:
                done.bytes += session.upload(f, posixpath.join(there, name),
                                             mode=stat.S_IMODE(st.st_mode)) or 0
            done.files += 1
    return done


def _chmod(path, mode):
    """The mode list_dir gives (an octal string such as "0644")."""
    if mode:
        os.chmod(path, int(mode, 8) & 0o7777)


def download_dir(session, src, dst):
    src, dst = os.fspath(src), os.fspath(dst)
    done = DirTransfer()
    os.makedirs(dst, exist_ok=True)
    done.dirs += 1

    def walk(remote, local, rel):
        for e in session.list_dir(remote):
            r = posixpath.join(remote, e.name)
            l = os.path.join(local, e.name)
            name = posixpath.join(rel, e.name) if rel else e.name
            if e.type == "directory":
                os.makedirs(l, exist_ok=True)
                done.dirs += 1
                walk(r, l, name)
                _chmod(l, e.mode)  # after its contents: a read-only dir still fills
            elif e.type == "file":
                done.bytes += session.download(r, l)
                _chmod(l, e.mode)
                done.files += 1
            else:
                done.skipped.append(name)
    walk(src, dst, "")
    return done
