"""Claiming a sandbox from a warm pool (``hutch pool start``) without a CLI
process: the same steps as ``hutch create`` (cli/pool.c). Take a ready
sandbox by unlinking its token in ``$HUTCH_RUNTIME_DIR/.pool/<key>/`` (only
one unlink succeeds), then ``POST /claim`` with the session's options. Any
failure returns None and the caller creates through the CLI as usual."""
import fcntl
import json
import os
import re

from ._http import UnixHTTPConnection

_ID = re.compile(r"[0-9a-f]{12}")
DEFAULT_MAX_OUTPUT = 4 << 20


def _fnv1a(h, s):
    for b in s.encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h ^ 0xFF


def pool_key(instance_type, network_cli, host_ports):
    """The key hutch_pool_key() computes for the same options and environment."""
    h = 0xcbf29ce484222325
    h = _fnv1a(h, instance_type)
    h = _fnv1a(h, network_cli)
    for p in host_ports:
        h = _fnv1a(h, str(p))
    h = _fnv1a(h, os.environ.get("HUTCH_RESOLVER", ""))
    h = _fnv1a(h, os.environ.get("HUTCH_NET_POOL", ""))
    mode = network_cli.split(":", 1)[0]
    return f"{instance_type}-{mode}-{h:016x}"


def _keeper_alive(pool_dir):
    try:
        fd = os.open(os.path.join(pool_dir, "keeper.lock"), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
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


def try_claim(sb):
    """The ``hutch create --json`` answer for a pooled sandbox, or None."""
    if sb.setup_script is not None:
        return None
    rt = os.environ.get("HUTCH_RUNTIME_DIR") or "/run/hutch"
    network = sb.network.to_cli()
    pool_dir = os.path.join(rt, ".pool", pool_key(sb.instance_type, network, sb.host_ports))
    if not _keeper_alive(pool_dir):
        return None
    body = json.dumps({"ttl_seconds": sb.ttl_seconds, "idle_timeout_seconds": sb.idle_timeout_seconds,
                       "max_output_bytes": DEFAULT_MAX_OUTPUT, "region": sb.region}).encode()
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
        sock = os.path.join(rt, name, "api.sock")
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
