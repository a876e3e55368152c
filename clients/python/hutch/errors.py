# SPDX-License-Identifier: Apache-2.0
"""The exception hierarchy of the hutch client.

Every error the client raises is a :class:`SandboxError`; each message says
what happened and what to do about it.
"""


class SandboxError(Exception):
    """Base class of every hutch client error."""


class HutchNotFoundError(SandboxError):
    """The ``hutch`` binary is missing, not executable or too old."""


class NotCapableHostError(SandboxError):
    """This host cannot run sandboxes (no subordinate ids, missing kernel feature)."""


class ConfigError(SandboxError, ValueError):
    """An invalid or unsupported sandbox option (raised before anything starts,
    or by the runtime at creation for options this version cannot honour)."""


class EgressPolicyError(ConfigError):
    """An invalid ``egress=`` (the cloud client's EgressPolicyError): an
    entry that is not an IP address or CIDR, a scoped address, or egress
    with a network it cannot go with."""


class SetupError(SandboxError):
    """The setup script or an ``on_create`` step failed or timed out; the
    sandbox was deleted."""


class SandboxGoneError(SandboxError):
    """The sandbox no longer exists."""

    def __init__(self, message, sandbox_id=None, at=None):
        super().__init__(message)
        self.sandbox_id = sandbox_id
        self.at = at


class SandboxExpiredError(SandboxGoneError):
    """The sandbox's TTL ran out and it was deleted."""


class SandboxDeletedError(SandboxGoneError):
    """The sandbox was deleted (closed, ``hutch rm``) or its supervisor died."""


class CommandTimeoutError(SandboxError, TimeoutError):
    """A command ran past its ``timeout`` and was killed. ``result`` holds
    what it printed before."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


class PtyWaitTimeout(SandboxError, TimeoutError):
    """``PtyHandle.wait(timeout)``: the command still runs (it is not
    killed; wait again, or ``kill()``)."""


class APIError(SandboxError):
    """The sandbox refused a request. ``status`` is the HTTP status, ``code``
    the API error code (``invalid_request``, ``not_found``...), ``path`` the
    file path concerned, if any."""

    def __init__(self, message, status=None, code=None, path=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.path = path


class FileTooLargeError(SandboxError):
    """A file or stream from the sandbox is longer than the ``max_bytes`` the
    caller allowed (a sparse file takes no room in the sandbox and can have
    any length)."""


class SandboxFileNotFoundError(APIError, FileNotFoundError):
    """No such file or directory in the sandbox."""


class SandboxPermissionError(APIError, PermissionError):
    """The sandbox user (appuser) may not do this."""


class SandboxIsADirectoryError(APIError, IsADirectoryError):
    """A file operation on a directory."""


class SandboxNoSpaceError(APIError, OSError):
    """The sandbox's tmpfs (or memory) is full."""


class ProcessNotFoundError(APIError, LookupError):
    """No background process with that id."""


class ProcessNotRunningError(APIError):
    """The background process has already ended."""


class StdinClosedError(APIError):
    """The background process's standard input is closed (it was started
    without ``stdin=True``, was closed, or the process stopped reading)."""


class AccessDeniedError(APIError, PermissionError):
    """The sandbox's ``access`` forbids it: ``"files"`` runs no commands,
    ``"none"`` neither runs commands nor reads or writes files."""


class BackgroundProcessesDisabledError(ConfigError):
    """``supports_background_processes=False`` and a background process was
    asked for."""


_BY_CODE = {
    "not_found": SandboxFileNotFoundError,
    "permission_denied": SandboxPermissionError,
    "is_a_directory": SandboxIsADirectoryError,
    "no_space": SandboxNoSpaceError,
    "process_not_found": ProcessNotFoundError,
    "process_not_running": ProcessNotRunningError,
    "stdin_closed": StdinClosedError,
    "access_denied": AccessDeniedError,
}


def from_api(status, body, sandbox_id=None):
    """The exception for an API error answer."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return APIError(f"sandbox {sandbox_id} answered HTTP {status}: {body!r}", status=status)
    code = err.get("code")
    msg = err.get("message") or code or f"HTTP {status}"
    if code == "sandbox_expired":
        return SandboxExpiredError(
            f"sandbox {sandbox_id} expired: {msg}; create a new sandbox "
            "(raise ttl_seconds if it needs to live longer)",
            sandbox_id=sandbox_id, at=err.get("at"))
    if code == "sandbox_deleted":
        return SandboxDeletedError(
            f"sandbox {sandbox_id} was deleted: {msg}; create a new sandbox",
            sandbox_id=sandbox_id)
    cls = _BY_CODE.get(code, APIError)
    return cls(msg, status=status, code=code, path=err.get("path"))
