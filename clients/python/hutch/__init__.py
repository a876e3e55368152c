# SPDX-License-Identifier: Apache-2.0
"""hutch: local, throw-away Linux sandboxes with the cloud sandbox's options.

    from hutch import LocalSandbox
    with LocalSandbox(instance_type="small") as sb:
        print(sb.execute("python3 -c 'print(6*7)'").stdout)

Standard library only. See docs/python.md.
"""
from .errors import (AccessDeniedError, APIError, BackgroundProcessesDisabledError, CommandTimeoutError, ConfigError,
                     EgressPolicyError,
                     FileTooLargeError, HutchNotFoundError, NotCapableHostError, ProcessNotFoundError,
                     ProcessNotRunningError, PtyWaitTimeout, SandboxDeletedError, SandboxError,
                     SandboxExpiredError, SandboxFileNotFoundError, SandboxGoneError,
                     SandboxIsADirectoryError, SandboxNoSpaceError, SandboxPermissionError,
                     SetupError, StdinClosedError)
from ._exec import AsyncPty, AsyncPtyHandle, Pty, PtyHandle, PtySize
from .network import Network
from .volumes import Volume
from .snapshots import DeclarativeSnapshot, Snapshot, SnapshotType
from .bindings import GitHubBinding, HeaderBinding, MistralApiBinding
from .sandbox import (DEFAULT_REGION, INSTANCE_TYPES, AsyncExecutionStream, AsyncSandboxSession,
                      CommandResult, ExecutionStream, ExitStatus, ExposedPort, FileEntry,
                      HookContext, LocalSandbox, OutputChunk, ProcessInfo, ProcessOutput,
                      SandboxCallbackContext, SandboxHook, SandboxSession)
from ._dirs import DirTransfer
from ._binary import find_hutch

__version__ = "0.1.0"

__all__ = [
    "LocalSandbox", "Network", "Volume", "Snapshot", "SnapshotType", "DeclarativeSnapshot", "HeaderBinding", "GitHubBinding", "MistralApiBinding",
    "SandboxHook", "HookContext", "SandboxCallbackContext", "SandboxSession", "DirTransfer",
    "AsyncSandboxSession", "ExecutionStream", "AsyncExecutionStream", "CommandResult",
    "OutputChunk", "ExitStatus", "ExposedPort", "FileEntry", "ProcessInfo", "ProcessOutput",
    "find_hutch", "INSTANCE_TYPES", "DEFAULT_REGION", "Pty", "PtyHandle", "PtySize", "AsyncPty",
    "AsyncPtyHandle",
    "SandboxError", "HutchNotFoundError", "NotCapableHostError", "ConfigError", "SetupError",
    "SandboxGoneError", "SandboxExpiredError", "SandboxDeletedError", "CommandTimeoutError",
    "APIError", "SandboxFileNotFoundError", "SandboxPermissionError", "SandboxIsADirectoryError",
    "SandboxNoSpaceError", "ProcessNotFoundError", "ProcessNotRunningError",
    "BackgroundProcessesDisabledError", "FileTooLargeError", "PtyWaitTimeout", "StdinClosedError",
    "AccessDeniedError", "EgressPolicyError",
]
