"""Claiming a sandbox from a warm pool (``hutch pool start``) without a
``hutch create`` process: the same steps as ``hutch create`` (cli/pool.c).
What the pool is called, where it lives and what a claim sends come from
``hutch pool key --json`` (the C code's own answer; this client never
computes a key), asked once per configuration. Take a ready sandbox by
unlinking its token in the pool's directory (only one unlink succeeds),
then ``POST /claim``. Any failure returns None and the caller creates
through the CLI as usual."""
import fcntl
import json
import os
import re
import subprocess

from ._http import UnixHTTPConnection

_ID = re.compile(r"[0-9a-f]{12}")
_described = {}


def describe(hutch, options):
    """``hutch pool key --json`` for these create options (a list of CLI
    arguments), or None if the CLI refuses them (create then says why)."""
    cache_key = (hutch, tuple(options)) + tuple(
        os.environ.get(v) for v in ("HUTCH_RUNTIME_DIR", "HUTCH_RESOLVER", "HUTCH_NET_POOL"))
    if cache_key not in _described:
        try:
            out = subprocess.run([hutch, "pool", "key", "--json", *options], capture_output=True,
                                 text=True, timeout=30, check=False)
            info = json.loads(out.stdout) if out.returncode == 0 else None
        except (OSError, ValueError, subprocess.SubprocessError):
            info = None
        if info is None:
            return None
        _described[cache_key] = info
    return _described[cache_key]


def _keeper_alive(lock_path):
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False  # nobody holds it: the keeper is gone
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def try_claim(hutch, options):
    """The ``hutch create --json`` answer for a pooled sandbox, or None."""
    pool = describe(hutch, options)
    if pool is None or not pool.get("servable"):
        return None
    pool_dir = pool["pool_dir"]
    if not _keeper_alive(pool["keeper_lock"]):
        return None
    body = json.dumps(pool["claim"]).encode()
    try:
        names = os.listdir(pool_dir)
    except OSError:
        return None
    for name in names:
        if not _ID.fullmatch(name):
            continue
        try:
            os.unlink(os.path.join(pool_dir, name))
        except OSError:
            continue  # someone else took it
        sock = pool["socket"].replace("{id}", name)
        conn = UnixHTTPConnection(sock, timeout=30)
        try:
            conn.request("POST", "/claim", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status == 200:
                info = json.loads(data)
                info.setdefault("socket", sock)
                return info
        except (OSError, ValueError):
            pass  # expired meanwhile: try the next one
        finally:
            conn.close()
    return None
