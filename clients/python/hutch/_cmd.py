"""A command's request body and how a command ended: below sandbox.py and
_exec.py, which both build commands (POST /run, /exec, a pty)."""
import base64
import dataclasses
import math
import os
from typing import Optional

from . import errors

# The longest time any option or timeout may name: a year and a day.
MAX_SECONDS = 366 * 86400


@dataclasses.dataclass
class ExitStatus:
    """The last item of ``execute_stream``: how the command ended."""
    exit_code: Optional[int]
    status: str = "exited"
    signal: Optional[int] = None
    signal_name: Optional[str] = None
    timed_out: bool = False
    oom_killed: bool = False
    duration_ms: float = 0.0
    message: Optional[str] = None
    changes: Optional[dict] = None  # as CommandResult.changes
    egress: Optional[dict] = None  # as CommandResult.egress


def _cmd_body(cmd, cwd=None, env=None, timeout=None, stdin=None, text=True):
    body = {}
    if not isinstance(text, bool):
        raise TypeError(f"text must be True or False, not {text!r}")
    if not text or isinstance(stdin, (bytes, bytearray, memoryview)):
        body["encoding"] = "base64"
    if isinstance(cmd, str):
        body["cmd"] = cmd
    elif isinstance(cmd, (list, tuple)) and cmd and all(isinstance(a, str) for a in cmd):
        body["argv"] = list(cmd)
    else:
        raise TypeError(f"cmd must be a shell string or a non-empty list of strings, not {cmd!r}")
    if cwd is not None:
        body["cwd"] = os.fspath(cwd)
    if env is not None:
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in env.items()):
            raise TypeError("env must be a dict of str to str")
        body["env"] = env
    if timeout is not None:
        body["timeout"] = _command_timeout(timeout)
    if stdin is not None:
        if not isinstance(stdin, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"stdin must be str or bytes, not {type(stdin).__name__}")
        if "encoding" in body:
            raw = stdin.encode("utf-8") if isinstance(stdin, str) else bytes(stdin)
            stdin = base64.b64encode(raw).decode("ascii")
        body["stdin"] = stdin
    return body


def _command_timeout(timeout):
    """A command's timeout: seconds > 0 (a float is fine), or 0 / None for
    none; anything else is refused naming the fix."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__} "
                        f"{timeout!r} (None or 0: no time limit)")
    if not math.isfinite(timeout) or timeout < 0 or timeout > MAX_SECONDS:
        raise errors.ConfigError(f"invalid timeout {timeout!r}: give seconds from 0 (no time "
                                 f"limit) to {MAX_SECONDS}, e.g. timeout=30")
    return timeout
