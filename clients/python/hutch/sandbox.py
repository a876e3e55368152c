# SPDX-License-Identifier: Apache-2.0
"""``LocalSandbox``, its sessions (sync and asyncio) and hooks."""
import asyncio
import base64
import dataclasses
import functools
import http.client
import inspect
import ipaddress
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from typing import Any, Callable, Optional, Union

from . import errors, _exec, _http
from ._cmd import MAX_SECONDS, ExitStatus, _cmd_body, _command_timeout  # noqa: F401
from ._exec import AsyncPty, AsyncPtyHandle, Pty, PtyHandle, PtySize
from ._binary import find_hutch
from . import _dirs, _pool
from .network import Network
from .snapshots import DeclarativeSnapshot, Snapshot, SnapshotType, check_name
from .volumes import volume_specs
from .bindings import check_bindings

INSTANCE_TYPES = ("nano", "micro", "small", "medium", "large", "xlarge", "2xlarge")
DEFAULT_REGION = "nl-north-1"
_REGION_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_IMAGE_RE = re.compile(r"^[A-Za-z0-9_:@+][A-Za-z0-9._:/@+-]{0,199}$")  # runtime/options-image.c
# --image as a file to import: an OCI layout or a docker-save archive.
_IMAGE_PATH_RE = re.compile(r"^(?:/|\./|\.\./|oci:|oci-archive:|docker-archive:)[^\x00-\x1f\x7f]+$")


def _image_is_valid(image):
    if not isinstance(image, str) or len(image) > 200:
        return False
    return bool(_IMAGE_PATH_RE.match(image)) or (bool(_IMAGE_RE.match(image))
                                                  and ".." not in image)


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class CommandResult:
    """What a command did. ``exit_code`` is ``None`` if it did not exit by
    itself (``status`` ``signaled``, ``timed_out``, ``oom_killed``).
    ``stdout`` and ``stderr`` are ``str`` (invalid UTF-8 replaced), or the
    exact ``bytes`` with ``text=False``."""
    exit_code: Optional[int]
    stdout: Union[str, bytes]
    stderr: Union[str, bytes]
    status: str = "exited"
    signal: Optional[int] = None
    signal_name: Optional[str] = None
    timed_out: bool = False
    oom_killed: bool = False
    duration_ms: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    message: Optional[str] = None
    #: what the command created, modified and deleted in /workspace,
    #: /home/appuser and /tmp (docs/api.md, "Change lists"), or ``None``
    #: when it changed nothing there (or the kernel cannot tell)
    changes: Optional[dict] = None
    #: its connections in network allow and all (docs/api.md, "Egress
    #: summaries"): ``allowed``, ``refused``, ``bytes_up``, ``bytes_down``,
    #: ``dns``, ``dns_refused`` (``open``, ``shared`` when so), or ``None``
    #: when it made none (or the egress log is off)
    egress: Optional[dict] = None

    @classmethod
    def from_json(cls, d, stdout="", stderr="", text=True):
        out, err = d.get("stdout", stdout), d.get("stderr", stderr)
        if d.get("encoding") == "base64":
            out, err = _from_b64(out, text), _from_b64(err, text)
        return cls(exit_code=d.get("exit_code"), stdout=out,
                   stderr=err, status=d.get("status", "exited"),
                   signal=d.get("signal"), signal_name=d.get("signal_name"),
                   timed_out=bool(d.get("timed_out")), oom_killed=bool(d.get("oom_killed")),
                   duration_ms=d.get("duration_ms") or 0.0,
                   stdout_truncated=bool(d.get("stdout_truncated")),
                   stderr_truncated=bool(d.get("stderr_truncated")), message=d.get("message"),
                   changes=d.get("changes"), egress=d.get("egress"))


@dataclasses.dataclass
class OutputChunk:
    """One piece of a streamed command's output: ``stream`` is ``stdout`` or
    ``stderr``; ``data`` is ``str``, or the exact ``bytes`` with
    ``text=False``."""
    stream: str
    data: Union[str, bytes]


@dataclasses.dataclass
class FileEntry:
    name: str
    type: str  # file, directory, symlink, other
    size: int
    mode: str
    mtime: float
    path: str = ""


@dataclasses.dataclass
class ProcessInfo:
    id: str
    command: str
    status: str  # running, exited, killed
    pid: Optional[int] = None
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    signal_name: Optional[str] = None
    started_at: Optional[str] = None
    ended_at: Optional[str] = None
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    error: Optional[str] = None
    stdin_open: Optional[bool] = None  # None: started without stdin=True
    stdin_bytes: Optional[int] = None
    changes: Optional[dict] = None  # once ended: as CommandResult.changes
    egress: Optional[dict] = None  # once ended: as CommandResult.egress

    @classmethod
    def from_json(cls, d):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclasses.dataclass
class ProcessOutput:
    id: str
    stream: str
    offset: int
    next_offset: int
    dropped: int
    data: str
    status: str
    eof: bool


@dataclasses.dataclass
class ExposedPort:
    """A sandbox port reachable from the host (``expose_port``, ``ports=``):
    ``port`` inside, ``exposed_at`` the URL on the host
    (``http://127.0.0.1:41234``), ``host_address`` and ``host_port`` where
    the supervisor listens."""
    port: int
    exposed_at: str
    host_address: str = "127.0.0.1"
    host_port: int = 0

    @classmethod
    def from_json(cls, d):
        return cls(port=int(d["sandbox_port"]), exposed_at=f"http://{d['host']}",
                   host_address=d["host_address"], host_port=int(d["host_port"]))


def _publish(ports):
    """ports: sandbox ports (int: any free host port on 127.0.0.1) or -p
    specs ("8080:80", "127.0.0.1:0:80"), checked by hutch itself."""
    if isinstance(ports, (int, str)):
        ports = [ports]
    try:
        ports = list(ports)
    except TypeError:
        raise errors.ConfigError(f"invalid ports {ports!r}: a list of sandbox ports or "
                                 "'[HOST_ADDR:]HOST_PORT:SANDBOX_PORT' specs") from None
    specs = []
    for p in ports:
        if isinstance(p, bool) or not isinstance(p, (int, str)):
            raise errors.ConfigError(f"invalid port {p!r}: a sandbox port (int) or a spec such as "
                                     "'8080:80'")
        if isinstance(p, int):
            if not 1 <= p <= 65535:
                raise errors.ConfigError(f"invalid port {p}: give a TCP port from 1 to 65535")
            p = f"0:{p}"
        specs.append(p)
    return specs


# ---------------------------------------------------------------------------
# hooks
# ---------------------------------------------------------------------------
class SandboxHook:
    """Subclass and override ``on_create`` / ``on_destroy`` (``async def`` as
    in the cloud SDK, or plain ``def``). ``ctx.sandbox`` is the session:
    ``execute``, ``read_file``, ``write_file`` and the rest; awaitable in an
    ``async def`` hook, plain in a ``def`` hook."""

    async def on_create(self, ctx):
        pass

    async def on_destroy(self, ctx):
        pass


@dataclasses.dataclass
class HookContext:
    sandbox: Any
    config: "LocalSandbox"
    sandbox_id: str


#: The cloud SDK's name for the hook context.
SandboxCallbackContext = HookContext


def _run_coro_blocking(coro):
    """Run a coroutine to completion from sync code, even inside a running
    event loop (then in a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box = {}

    def runner():
        try:
            box["r"] = asyncio.run(coro)
        except BaseException as e:  # noqa: B902 - re-raised below
            box["e"] = e
    t = threading.Thread(target=runner, name="hutch-hook")
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box.get("r")


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------
def _seconds(name, value, lo, hi=MAX_SECONDS):
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise errors.ConfigError(f"invalid {name} {value!r}: expected a whole number of seconds "
                                     f"from {lo} to {hi}")
    if not lo <= value <= hi:
        raise errors.ConfigError(f"invalid {name} {value}: expected a whole number of seconds from "
                                 f"{lo} to {hi}")
    return value


def _from_b64(value, text):
    """Exact bytes sent as base64; as text with invalid UTF-8 replaced."""
    raw = base64.b64decode(value or "")
    return raw.decode("utf-8", "replace") if text else raw


def _http_timeout(timeout):
    return None if not timeout else timeout + 60


# ---------------------------------------------------------------------------
# LocalSandbox
# ---------------------------------------------------------------------------
def _host_ports(ports, network):
    """host_ports: TCP ports of the host's loopback the sandbox reaches as
    host.hutch.internal (network all or allow only)."""
    try:
        ports = list(ports)
    except TypeError:
        raise errors.ConfigError(f"invalid host_ports {ports!r}: a list of TCP port numbers") from None
    for p in ports:
        if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 65535:
            raise errors.ConfigError(f"invalid host port {p!r}: give a TCP port number from 1 to "
                                     "65535, e.g. host_ports=[8080]")
    ports = sorted(set(ports))
    if len(ports) > 16:
        raise errors.ConfigError("too many host ports: at most 16")
    if ports and network.mode == "none":
        raise errors.ConfigError("host_ports needs a network: with network none nothing leaves the "
                                 "sandbox; use Network.all() or Network.allow(hosts=...)")
    if network.mode == "allow":
        listed = {443, 53} | {int(h.rsplit(":", 1)[1]) for h in network.hosts
                              if ":" in h and not h.startswith("[") and h.rsplit(":", 1)[1].isdigit()}
        for p in ports:
            if p in listed:
                raise errors.ConfigError(f"--host-port {p} clashes with the allow list: ports 53, 443 "
                                         "and the listed ports are served by the sandbox's DNS stub "
                                         "and TLS proxy; run the host service on another port")
    return ports


def _hutch_json(*args):
    """Run ``hutch ARGS`` and return its JSON; its error as an exception."""
    proc = subprocess.run([find_hutch(), *args], capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return json.loads(proc.stdout)
    msg = proc.stderr.strip().removeprefix("hutch: ") or f"exit status {proc.returncode}"
    if proc.returncode == 66:
        raise errors.SandboxGoneError(msg)
    if proc.returncode == 64:
        raise errors.ConfigError(msg)
    if proc.returncode == 69:
        raise errors.NotCapableHostError(msg)
    raise errors.SandboxError(msg)


def _sessions_of(ids, options):
    """The sessions of the sandboxes hutch fork made (every one removed if
    one cannot be had)."""
    try:
        return [SandboxSession(LocalSandbox(**options), _hutch_json("inspect", sid))
                for sid in ids]
    except BaseException:
        subprocess.run([find_hutch(), "rm", *ids], capture_output=True, check=False)
        raise


def _executor_port(port):
    """executor_port: also serve the cloud executor's API on TCP, on
    127.0.0.1:PORT (0: any free port) or "ADDR:PORT"; None: not."""
    if port is None:
        return None
    if isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535:
        return port
    if isinstance(port, str) and re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}:\d{1,5}", port):
        return port
    raise errors.ConfigError(f"invalid executor_port {port!r}: a TCP port number (0: any free "
                             "one) or \"ADDR:PORT\"")


EXECUTOR_MAX_OUTPUT_MAX = 1 << 30
# access= (the cloud's): None is everything; "files": files only, no
# commands; "none": neither. Enforced by the sandbox (AccessDeniedError).
ACCESS_VALUES = (None, "files", "none")
# workspace= (hutch's own): where /workspace, /home/appuser, /tmp and an
# image's writes go (docs/api.md, "Instance types").
WORKSPACE_VALUES = (None, "disk", "tmpfs")


def _executor_max_output(value):
    """executor_max_output_bytes: what the cloud executor's /run answers
    whole per stream; None: hutch's default (64 MiB)."""
    if value is None:
        return None
    if (isinstance(value, int) and not isinstance(value, bool)
            and 1 <= value <= EXECUTOR_MAX_OUTPUT_MAX):
        return value
    raise errors.ConfigError(f"invalid executor_max_output_bytes {value!r}: a whole number of "
                             f"bytes from 1 to {EXECUTOR_MAX_OUTPUT_MAX}")


_SECRET_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def _secrets(secrets):
    """secrets= (the cloud's): {NAME: value} in every command's environment;
    hutch shows the names only."""
    if secrets is None:
        return {}
    if not isinstance(secrets, dict):
        raise errors.ConfigError(f"invalid secrets {type(secrets).__name__}: a dict of "
                                 "{NAME: value}")
    if len(secrets) > 32:
        raise errors.ConfigError("invalid secrets: at most 32")
    for name, value in secrets.items():
        if not isinstance(name, str) or not _SECRET_NAME_RE.fullmatch(name):
            raise errors.ConfigError(f"invalid secret name {name!r}: letters, digits and _, "
                                     "not starting with a digit (an environment variable's name)")
        if not isinstance(value, str) or "\0" in value or len(value.encode()) > 65536:
            raise errors.ConfigError(f"invalid secret {name!r}: its value must be a str of at "
                                     "most 65536 bytes without NUL")
    return dict(secrets)


def _egress_entry(entry):
    """One egress= entry as the cloud's client normalizes it (koyeb's
    _normalize_destination): a bare IPv4 address becomes /32, IPv6 /128,
    a CIDR has its host bits cleared; a scoped address is refused."""
    value = entry.strip() if isinstance(entry, str) else ""
    if not value:
        raise errors.EgressPolicyError(f"invalid egress entry {entry!r}: expected an IP address "
                                       "or CIDR")
    if "%" in value:
        raise errors.EgressPolicyError(f"invalid egress entry {entry!r}: expected an IP address "
                                       "or CIDR (scoped/zone-ID addresses are not allowed)")
    try:
        if "/" in value:
            return str(ipaddress.ip_network(value, strict=False))
        address = ipaddress.ip_address(value)
    except ValueError:
        raise errors.EgressPolicyError(f"invalid egress entry {entry!r}: expected an IP address "
                                       "or CIDR") from None
    return f"{address}/{32 if address.version == 4 else 128}"


def _egress(egress, network, region):
    """egress= (the cloud's): None, or the IP/CIDR destinations the sandbox
    reaches, and nothing else ([] blocks everything)."""
    if egress is None:
        return None
    if isinstance(egress, str) or not isinstance(egress, (list, tuple)):
        raise errors.EgressPolicyError(f"invalid egress {egress!r}: a list of IP addresses or "
                                       "CIDRs (None: no egress policy)")
    if len(egress) > 64:
        raise errors.EgressPolicyError("too many egress entries: at most 64")
    out = [_egress_entry(e) for e in egress]
    if network.mode == "allow":
        raise errors.EgressPolicyError("egress with network allow: allow reaches only its hosts "
                                       "through the TLS proxy; list the addresses there or use "
                                       "Network.none() or Network.all() with egress")
    if region != DEFAULT_REGION:
        raise errors.EgressPolicyError(f"only the default region, {DEFAULT_REGION}, can block "
                                       f"traffic; in region {region} the sandbox runs only with "
                                       "network all and no egress")
    return out


class LocalSandbox:
    """A local sandbox configuration, with the cloud sandbox's option names,
    defaults and validation (errors raised here, before anything starts).

    ``open()`` (or ``with``) creates the sandbox and returns a
    :class:`SandboxSession`; ``async with`` (or ``await open_async()``) an
    :class:`AsyncSandboxSession`. Each open creates a new sandbox."""

    def __init__(self, *, instance_type="medium", idle_timeout_seconds=0, ttl_seconds=86400,
                 region=DEFAULT_REGION, network=None, image=None, setup_script=None,
                 setup_script_timeout_seconds=600, hooks=(), supports_background_processes=None,
                 host_ports=(), ports=(), executor_port=None, header_bindings=(),
                 executor_max_output_bytes=None, no_limits=False, max_output_bytes=None,
                 journal_max_bytes=None, change_lists=True, net_log=True, nat_log=False,
                 on_create=None, on_destroy=None, description=None, access=None,
                 secrets=None, volumes=None, snapshot=None, egress=None, workspace=None):
        if not isinstance(instance_type, str) or instance_type not in INSTANCE_TYPES:
            raise errors.ConfigError(f"unknown instance_type {instance_type!r}: valid types are "
                                     f"{', '.join(INSTANCE_TYPES)}")
        self.instance_type = instance_type
        self.idle_timeout_seconds = _seconds("idle_timeout_seconds", idle_timeout_seconds, 0)
        self.ttl_seconds = _seconds("ttl_seconds", ttl_seconds, 1)
        self.setup_script_timeout_seconds = _seconds("setup_script_timeout_seconds",
                                                     setup_script_timeout_seconds, 1)
        if not isinstance(region, str) or not _REGION_RE.match(region):
            raise errors.ConfigError(f"invalid region {region!r}: a region name is lowercase letters, "
                                     f"digits and dashes, e.g. {DEFAULT_REGION}")
        self.region = region
        if network is None:
            network = Network.none()
        if isinstance(network, str):   # the CLI's spelling: "none", "all", "allow:H1,H2"
            mode, _, hosts = network.partition(":")
            if mode in ("none", "all") and not _:
                network = Network(mode)
            elif mode == "allow":
                network = Network.allow(hosts=[h for h in hosts.split(",") if h])
        if not isinstance(network, Network):
            raise errors.ConfigError(f"invalid network {network!r}: use Network.none(), Network.all() "
                                     "or Network.allow(hosts=(...))")
        self.network = network
        if region != DEFAULT_REGION and network.mode != "all":
            raise errors.ConfigError(f"only the default region, {DEFAULT_REGION}, can block traffic; in "
                                     f"region {region} the sandbox runs only with network all "
                                     "(network=Network.all())")
        self.egress = _egress(egress, network, region)
        # with egress, the sandbox is wired as all (a list) or none ([])
        wired = network if self.egress is None else \
            Network.all() if self.egress else Network.none()
        self.host_ports = _host_ports(host_ports, wired)
        self.ports = _publish(ports)
        self.executor_port = _executor_port(executor_port)
        self.executor_max_output_bytes = _executor_max_output(executor_max_output_bytes)
        if access not in ACCESS_VALUES:
            raise errors.ConfigError(f"invalid access {access!r}: None (commands and files), "
                                     "\"files\" (files only, no commands) or \"none\"")
        self.access = access
        if workspace not in WORKSPACE_VALUES:
            raise errors.ConfigError(f"invalid workspace {workspace!r}: None or \"disk\" (a file "
                                     "system of the disk size of the sandbox's own, never memory; "
                                     "tmpfs for an ordinary user) or \"tmpfs\" (memory)")
        self.workspace = workspace
        self.secrets = _secrets(secrets)
        self.volumes = volume_specs(volumes)
        self.header_bindings = check_bindings(header_bindings, network)
        if self.egress is not None and self.header_bindings:
            raise errors.EgressPolicyError("header bindings with egress: the proxy that sets the "
                                           "headers dials from this machine, past the egress "
                                           "list; drop one of them")
        if image is not None and not _image_is_valid(image):
            raise errors.ConfigError(f"invalid image {image!r}: None or 'host' (the host-derived "
                                     "root), the name of an image of the store ('hutch image "
                                     "ls') or a registry reference, e.g. "
                                     "'docker.io/library/python:3.12-bookworm', or the path of "
                                     "an OCI layout or a docker-save archive ('/abs', './rel', "
                                     "'oci:PATH', 'docker-archive:PATH')")
        self.image = image
        if snapshot is not None:
            snapshot = check_name(getattr(snapshot, "name", snapshot))
            if image is not None:
                raise errors.ConfigError("give image or snapshot, not both: a snapshot is the "
                                         "image a sandbox starts from")
        self.snapshot = snapshot
        if setup_script is not None:
            if not isinstance(setup_script, str):
                raise errors.ConfigError("invalid setup_script: the text of a shell script (str) or None")
            if not setup_script:
                raise errors.ConfigError("invalid setup_script: empty (use None for no script)")
            if len(setup_script.encode()) > (1 << 20):
                raise errors.ConfigError("invalid setup_script: longer than 1048576 bytes")
        self.setup_script = setup_script
        if isinstance(hooks, SandboxHook):
            hooks = [hooks]
        try:
            hooks = list(hooks)
        except TypeError:
            raise errors.ConfigError(f"invalid hooks {hooks!r}: a list of SandboxHook") from None
        for h in hooks:
            if not (isinstance(h, SandboxHook) or (callable(getattr(h, "on_create", None))
                                                   and callable(getattr(h, "on_destroy", None)))):
                raise errors.ConfigError(f"invalid hook {h!r}: subclass hutch.SandboxHook")
        self.hooks = hooks
        # The cloud's rule: a custom image has no background processes
        # unless asked for.
        if supports_background_processes is None:
            supports_background_processes = image in (None, "host")
        if not isinstance(supports_background_processes, bool):
            raise errors.ConfigError(f"invalid supports_background_processes "
                                     f"{supports_background_processes!r}: True or False")
        self.supports_background_processes = supports_background_processes
        # hutch's own options (hutch create --no-limits, --max-output,
        # --on-create, --on-destroy, --description): None leaves hutch's
        # default.
        if not isinstance(no_limits, bool):
            raise errors.ConfigError(f"invalid no_limits {no_limits!r}: True or False")
        if no_limits and self.idle_timeout_seconds:
            raise errors.ConfigError("idle sleep freezes the sandbox's cgroup, which no_limits=True "
                                     "leaves out: drop idle_timeout_seconds or no_limits")
        self.no_limits = no_limits
        if max_output_bytes is not None and (not isinstance(max_output_bytes, int)
                                             or isinstance(max_output_bytes, bool)
                                             or max_output_bytes < 1):
            raise errors.ConfigError(f"invalid max_output_bytes {max_output_bytes!r}: a number of "
                                     "bytes, at least 1 (None: hutch's default)")
        self.max_output_bytes = max_output_bytes
        if journal_max_bytes is not None and (not isinstance(journal_max_bytes, int)
                                              or isinstance(journal_max_bytes, bool)
                                              or not 0 <= journal_max_bytes <= 1 << 30):
            raise errors.ConfigError(f"invalid journal_max_bytes {journal_max_bytes!r}: bytes "
                                     "from 0 (no journal) to 1073741824 (None: 4 MiB)")
        self.journal_max_bytes = journal_max_bytes
        if not isinstance(change_lists, bool):
            raise errors.ConfigError(f"invalid change_lists {change_lists!r}: True or False")
        self.change_lists = change_lists
        if not isinstance(net_log, bool):
            raise errors.ConfigError(f"invalid net_log {net_log!r}: True or False")
        self.net_log = net_log
        if not isinstance(nat_log, bool):
            raise errors.ConfigError(f"invalid nat_log {nat_log!r}: True or False")
        self.nat_log = nat_log
        for name, value in (("on_create", on_create), ("on_destroy", on_destroy),
                            ("description", description)):
            if value is not None and (not isinstance(value, str) or not value or "\0" in value):
                raise errors.ConfigError(f"invalid {name} {value!r}: a non-empty str (None: none)")
        self.on_create, self.on_destroy, self.description = on_create, on_destroy, description
        self._stack = []

    def __repr__(self):
        return (f"LocalSandbox(instance_type={self.instance_type!r}, ttl_seconds={self.ttl_seconds}, "
                f"idle_timeout_seconds={self.idle_timeout_seconds}, region={self.region!r}, "
                f"network={self.network!r})")

    # -- creation ------------------------------------------------------------
    def _cli_options(self):
        """The sandbox options as ``hutch create`` arguments (without the
        setup script, which goes through a file)."""
        args = ["--instance-type", self.instance_type, "--ttl", str(self.ttl_seconds),
                "--idle-timeout", str(self.idle_timeout_seconds), "--region", self.region,
                "--network", self.network.to_cli(),
                "--setup-timeout", str(self.setup_script_timeout_seconds)]
        for port in self.host_ports:
            args += ["--host-port", str(port)]
        if self.egress is not None:
            args += [a for e in (self.egress or [""]) for a in ("--egress", e)]
        for spec in self.ports:
            args += ["--publish", spec]
        for spec in self.volumes:
            args += ["--volume", spec]
        if self.executor_port is not None:
            args += ["--executor-port", str(self.executor_port)]
        if self.access is not None:
            args += ["--access", self.access]
        if self.workspace is not None:
            args += ["--workspace", self.workspace]
        if self.executor_max_output_bytes is not None:
            args += ["--executor-max-output", str(self.executor_max_output_bytes)]
        if self.image is not None:
            args += ["--image", self.image]
        if self.snapshot is not None:
            args += ["--snapshot", self.snapshot]
        if self.no_limits:
            args.append("--no-limits")
        if not self.change_lists:
            args += ["--change-lists", "off"]
        if not self.net_log:
            args += ["--net-log", "off"]
        if self.nat_log:
            args += ["--nat-log", "on"]
        for flag, value in (("--max-output", self.max_output_bytes),
                            ("--journal-max", self.journal_max_bytes), ("--on-create", self.on_create),
                            ("--on-destroy", self.on_destroy),
                            ("--description", self.description)):
            if value is not None:
                args += [flag, str(value)]
        return args

    def _create(self):
        """Run ``hutch create --json``; returns its JSON."""
        hutch = find_hutch()
        options = self._cli_options()
        if (self.setup_script is None and self.on_create is None and not self.ports
                and self.executor_port is None and not self.header_bindings
                and not self.secrets and not self.volumes):
            info = _pool.try_claim(hutch, options)
            if info is not None:
                return info
        args = [hutch, "create", "--json", *options]
        script = None
        fds = []
        try:
            # Each binding's value through a pipe of its own (@fd:N): never
            # argv, the environment or a file. 4096 bytes fit a pipe.
            for b in self.header_bindings:
                r, w = os.pipe()
                fds.append(r)
                os.write(w, b.value.encode())
                os.close(w)
                args += ["--header-binding", f"{b.host}:{b.header}=@fd:{r}"]
            # Each secret too (at most 65536 bytes: a pipe's default size).
            for name, value in self.secrets.items():
                r, w = os.pipe()
                fds.append(r)
                os.write(w, value.encode())
                os.close(w)
                args += ["--secret", f"{name}=@fd:{r}"]
            if self.setup_script is not None:
                fd, script = tempfile.mkstemp(prefix="hutch-setup-", suffix=".sh")
                with os.fdopen(fd, "w") as f:
                    f.write(self.setup_script)
                args += ["--setup-script", script]
            proc = subprocess.run(args, capture_output=True, text=True, check=False,
                                  pass_fds=fds)
        finally:
            for fd in fds:
                os.close(fd)
            if script:
                os.unlink(script)
        if proc.returncode == 0:
            try:
                return json.loads(proc.stdout)
            except ValueError:
                raise errors.SandboxError(f"hutch create printed no JSON: {proc.stdout[:500]!r}") from None
        msg = "\n".join(l[7:] if l.startswith("hutch: ") else l
                        for l in proc.stderr.strip().splitlines()) or f"exit status {proc.returncode}"
        # 65: an option names nothing (a volume's directory, an image, a
        # snapshot): the option is wrong, as with 64
        cls = {64: errors.ConfigError, 65: errors.ConfigError, 69: errors.NotCapableHostError,
               71: errors.SetupError}.get(proc.returncode, errors.SandboxError)
        if cls is errors.NotCapableHostError:
            # The CLI's fix, said as this client's parameter.
            msg = msg.replace("pass --no-limits", "pass no_limits=True to LocalSandbox")
            msg = msg.replace("--no-limits", "no_limits=True")
            if "hutch doctor" not in msg:
                msg += " ('hutch doctor' checks this host)"
        raise cls(msg)

    @staticmethod
    def template(name, image, workdir=None):
        """A :class:`DeclarativeSnapshot` (the cloud's ``Sandbox.template``):
        ``LocalSandbox.template("env", "hutch-default").run("...").build()``."""
        return DeclarativeSnapshot(name, image, workdir)

    @classmethod
    def list(cls):
        """The live sandboxes of this runtime directory (``hutch ls --json``:
        one dict per sandbox, the schema of docs/api.md)."""
        return [s for s in _hutch_json("ls", "--json") if s.get("live")]

    @classmethod
    def connect(cls, sandbox_id):
        """A session on a running sandbox, by id or unique id prefix (made
        by ``hutch create``, another process, or a session whose client
        died). Its hooks are not run; closing the session deletes the
        sandbox, as for one this client opened. ``SandboxGoneError`` if it
        ended, ``SandboxError`` if no sandbox has that id."""
        info = _hutch_json("inspect", sandbox_id)
        cfg = info.get("config") or {}
        sandbox = cls(supports_background_processes=cfg.get("supports_background_processes", True))
        return SandboxSession(sandbox, info)

    @classmethod
    async def connect_async(cls, sandbox_id):
        """The asyncio form of :meth:`connect`."""
        return AsyncSandboxSession(await asyncio.to_thread(cls.connect, sandbox_id))

    def open(self):
        """Create the sandbox, run the ``on_create`` hooks, return the
        session. A hook that raises deletes the sandbox and re-raises."""
        info = self._create()
        session = SandboxSession(self, info)
        try:
            session._run_hooks("on_create")
        except BaseException:
            session._delete(quiet=True)
            raise
        return session

    async def open_async(self):
        """The asyncio form of :meth:`open`."""
        info = await asyncio.to_thread(self._create)
        session = AsyncSandboxSession(SandboxSession(self, info))
        try:
            await session._run_hooks("on_create")
        except BaseException:
            await asyncio.to_thread(session.sync._delete, True)
            raise
        return session

    def __enter__(self):
        s = self.open()
        self._stack.append(s)
        return s

    def __exit__(self, exc_type, exc, tb):
        s = self._stack.pop()
        try:
            s.close()
        except Exception:
            if exc_type is None:
                raise
        return False

    async def __aenter__(self):
        s = await self.open_async()
        self._stack.append(s)
        return s

    async def __aexit__(self, exc_type, exc, tb):
        s = self._stack.pop()
        try:
            await s.close()
        except Exception:
            if exc_type is None:
                raise
        return False


# ---------------------------------------------------------------------------
# sessions
# ---------------------------------------------------------------------------
class ExecutionStream:
    """Iterator over a running command's output: :class:`OutputChunk` items in
    the order they were written, then one :class:`ExitStatus`. After the end,
    ``exit_code`` and ``exit`` hold the result."""

    def __init__(self, client, resp, conn, text=True):
        self._client, self._resp, self._conn = client, resp, conn
        self._text = text
        self.exit = None
        self.exit_code = None
        self._done = False

    def __iter__(self):
        return self

    def _events(self):
        event, data = None, []
        while True:
            try:
                line = self._resp.readline()
            except (OSError, http.client.HTTPException) as e:
                raise self._client.gone_error(e) from e
            if not line:
                return
            line = line.decode("utf-8", "replace").rstrip("\r\n")
            if line == "":
                if event is not None or data:
                    yield event or "message", "\n".join(data)
                event, data = None, []
            elif line.startswith(":"):
                continue
            else:
                field, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if field == "event":
                    event = value
                elif field == "data":
                    data.append(value)

    def __next__(self):
        if self._done:
            raise StopIteration
        if not hasattr(self, "_gen"):
            self._gen = self._events()
        for event, data in self._gen:
            try:
                obj = json.loads(data) if data else {}
            except ValueError:
                obj = {"data": data}
            if event in ("stdout", "stderr"):
                data = obj.get("data", "")
                return OutputChunk(event, data if self._text else base64.b64decode(data))
            if event == "exit":
                self.exit = ExitStatus(
                    exit_code=obj.get("exit_code"), status=obj.get("status", "exited"),
                    signal=obj.get("signal"), signal_name=obj.get("signal_name"),
                    timed_out=bool(obj.get("timed_out")), oom_killed=bool(obj.get("oom_killed")),
                    duration_ms=obj.get("duration_ms") or 0.0, message=obj.get("message"),
                    changes=obj.get("changes"), egress=obj.get("egress"))
                self.exit_code = self.exit.exit_code
                if self.exit.timed_out:
                    self._pending_timeout = True
                return self.exit
            if event == "error":
                self._finish(close=True)
                raise errors.from_api(410, obj, self._client.sandbox_id)
        self._finish(close=True)
        if self.exit is None:
            raise self._client.gone_error(EOFError("the event stream ended without an exit event"))
        if getattr(self, "_pending_timeout", False):
            self._pending_timeout = False
            raise errors.CommandTimeoutError(
                self.exit.message or "the command timed out and was killed")
        raise StopIteration

    def _finish(self, close=False):
        if self._done and close:
            return
        if close:
            self._done = True
            try:
                self._resp.close()
            finally:
                self._conn.close()

    def close(self):
        """Stop reading (a command still running is killed by the sandbox)."""
        self._finish(close=True)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


class SandboxSession:
    """An open sandbox (sync). Close it with ``close()`` or ``with``; closing
    runs the ``on_destroy`` hooks and deletes the sandbox."""

    def __init__(self, sandbox, info):
        self.sandbox = sandbox
        self.id = info["id"]
        self.socket_path = info["socket"]
        self.expires_at = info.get("expires_at")
        self.config = info.get("config", {})
        # executor_port: {"address", "port", "url", "secret"}, for a client
        # of the cloud executor (the secret is given this once)
        self.executor = info.get("executor")
        self._client = _http.Client(self.socket_path, self.id)
        #: commands on pseudo-terminals: ``session.pty.create(PtySize(24, 80))``
        self.pty = Pty(self._client)
        self._closed = False
        self._close_lock = threading.Lock()

    def __repr__(self):
        return f"<SandboxSession {self.id} {'closed' if self._closed else 'open'}>"

    @property
    def closed(self):
        return self._closed

    # -- commands --------------------------------------------------------
    def execute(self, cmd, *, cwd=None, env=None, timeout=None, stdin=None, text=True):
        """Run ``cmd`` (a shell string or an argv list) and wait for it.
        ``stdin`` is ``str`` or ``bytes`` (exact); with ``text=False``
        ``stdout`` and ``stderr`` are the exact ``bytes``. Raises
        :class:`CommandTimeoutError` if ``timeout`` ran out."""
        body = _cmd_body(cmd, cwd, env, timeout, stdin, text)
        d = self._client.call("POST", "/v1/run", body, timeout=_http_timeout(timeout))
        result = CommandResult.from_json(d, text=text)
        if result.timed_out:
            raise errors.CommandTimeoutError(
                f"{result.message or 'command timed out'} (stdout and stderr so far are in "
                "the exception's result)", result=result)
        return result

    def execute_stream(self, cmd, *, cwd=None, env=None, timeout=None, stdin=None, text=True,
                       on_stdout: Optional[Callable[[Union[str, bytes]], Any]] = None,
                       on_stderr: Optional[Callable[[Union[str, bytes]], Any]] = None):
        """Run ``cmd`` and iterate over its output as it comes: ``OutputChunk``
        items (``bytes`` chunks with ``text=False``), then an ``ExitStatus``.

        With ``on_stdout`` and/or ``on_stderr`` it runs to the end instead,
        calling them with each piece of output in the order it was written,
        and returns the ``ExitStatus`` (``POST /exec``: bytes exact; with
        ``text=True`` each stream is decoded incrementally as UTF-8, a
        character cut between pieces comes whole, invalid bytes become
        U+FFFD). ``stdin`` may then also be a binary file object or an
        iterable of bytes, streamed while the command runs."""
        if on_stdout is not None or on_stderr is not None:
            return self._stream_callbacks(cmd, cwd, env, timeout, stdin, text, on_stdout,
                                          on_stderr)
        body = json.dumps(_cmd_body(cmd, cwd, env, timeout, stdin, text)).encode()
        resp, conn = self._client.request("POST", "/v1/run_streaming", body,
                                          {"Content-Type": "application/json"},
                                          timeout=_http_timeout(timeout))
        self._client.check(resp, conn)
        return ExecutionStream(self._client, resp, conn, text)

    def _stream_callbacks(self, cmd, cwd, env, timeout, stdin, text, on_stdout, on_stderr):
        if not isinstance(text, bool):
            raise TypeError(f"text must be True or False, not {text!r}")
        for name, cb in (("on_stdout", on_stdout), ("on_stderr", on_stderr)):
            if cb is not None and not callable(cb):
                raise TypeError(f"{name} must be callable, not {cb!r}")
        body = _cmd_body(cmd, cwd, env, timeout)
        status = _exec.run_with_callbacks(self._client, body, stdin, on_stdout, on_stderr, text)
        if status.timed_out:
            raise errors.CommandTimeoutError(status.message or "the command timed out and was "
                                             "killed", result=status)
        return status

    # -- files -----------------------------------------------------------
    def _get_file(self, path, max_bytes):
        """GET /files for path; a length over max_bytes is refused before
        any byte is read."""
        resp, conn = self._client.request("GET", _http.query("/files", path=os.fspath(path)))
        self._client.check(resp, conn)
        length = resp.getheader("Content-Length")
        if max_bytes is not None and length is not None and int(length) > max_bytes:
            conn.close()
            raise errors.FileTooLargeError(f"{os.fspath(path)} is {length} bytes, more than "
                                           f"max_bytes={max_bytes}")
        return resp, conn

    def read_file(self, path, *, max_bytes=None):
        """The contents of a file, as bytes. ``max_bytes`` refuses a longer
        file (FileTooLargeError) before reading it: a hostile sandbox can
        offer a sparse file of any size."""
        resp, conn = self._get_file(path, max_bytes)
        return self._client.read_body(resp, conn)

    def write_file(self, path, data, *, mode=None):
        """Write ``data`` (bytes, or str as UTF-8) to ``path``, whole or not at
        all; returns the size."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("data must be bytes or str")
        data = bytes(data)
        q = _http.query("/files", path=os.fspath(path), mode=_mode(mode))
        resp, conn = self._client.request("PUT", q, data,
                                          {"Content-Type": "application/octet-stream"})
        self._client.check(resp, conn)
        return json.loads(self._client.read_body(resp, conn)).get("size", len(data))

    def list_dir(self, path="/workspace"):
        d = self._client.call("POST", "/v1/list_dir", {"path": os.fspath(path)})
        base = d.get("path", os.fspath(path))
        return [FileEntry(name=e["name"], type=e["type"], size=e.get("size", 0), mode=e.get("mode", ""),
                          mtime=e.get("mtime", 0.0), path=base.rstrip("/") + "/" + e["name"])
                for e in d.get("entries", [])]

    def remove(self, path, *, recursive=True):
        """Delete a file or symlink, or (``recursive``) a directory tree."""
        path = os.fspath(path)
        try:
            self._client.call("POST", "/v1/delete_file", {"path": path})
        except errors.SandboxIsADirectoryError:
            if not recursive:
                raise
            self._client.call("POST", "/v1/delete_dir", {"path": path})

    def make_dir(self, path, *, mode=None):
        """Create a directory and its parents (an existing one is fine)."""
        body = {"path": os.fspath(path)}
        if mode is not None:
            body["mode"] = _mode(mode)
        self._client.call("POST", "/v1/make_dir", body)

    def upload(self, src, dst, *, mode=None):
        """Stream a local file (a path or a binary file object) to ``dst`` in
        the sandbox; returns the size written."""
        q = _http.query("/files", path=os.fspath(dst), mode=_mode(mode))
        own = not hasattr(src, "read")
        f = open(src, "rb") if own else src
        try:
            headers = {"Content-Type": "application/octet-stream"}
            chunked = False
            try:
                size = os.fstat(f.fileno()).st_size - f.tell()
                headers["Content-Length"] = str(size)
            except (OSError, AttributeError, ValueError):
                chunked = True
                headers["Transfer-Encoding"] = "chunked"
            resp, conn = self._client.request("PUT", q, f, headers, encode_chunked=chunked)
            self._client.check(resp, conn)
            return json.loads(self._client.read_body(resp, conn)).get("size")
        finally:
            if own:
                f.close()

    def download(self, src, dst, *, max_bytes=None):
        """Stream a sandbox file to ``dst`` (a local path or a binary file
        object); returns the number of bytes. ``max_bytes`` refuses a longer
        file (FileTooLargeError) before writing anything."""
        resp, conn = self._get_file(src, max_bytes)
        own = not hasattr(dst, "write")
        n = 0
        try:
            f = open(dst, "wb") if own else dst
            try:
                while True:
                    try:
                        chunk = resp.read(_http.CHUNK)
                    except (OSError, http.client.HTTPException) as e:
                        raise self._client.gone_error(e) from e
                    if not chunk:
                        break
                    f.write(chunk)
                    n += len(chunk)
            finally:
                if own:
                    f.close()
            expected = resp.getheader("Content-Length")
            if expected is not None and int(expected) != n:
                raise errors.SandboxError(f"download of {src} ended after {n} of {expected} bytes "
                                          "(the file shrank meanwhile?)")
        except BaseException:
            conn.close()
            raise
        self._client.release(conn, resp)
        return n

    def upload_dir(self, src, dst):
        """Copy a local directory tree to ``dst`` in the sandbox, file by file
        (bytes exact, modes kept); symbolic links are skipped, never followed.
        Returns a ``DirTransfer`` (files, dirs, bytes, skipped)."""
        return _dirs.upload_dir(self, src, dst)

    def download_dir(self, src, dst):
        """Copy a sandbox directory tree to the local ``dst`` (created if
        missing), file by file; symbolic links are skipped, never followed.
        Returns a ``DirTransfer``."""
        return _dirs.download_dir(self, src, dst)

    # -- background processes ------------------------------------------
    def wait_process(self, process_id, *, timeout=None):
        """Wait until a background process has ended and return its
        ``ProcessInfo`` (``exit_code``, ``signal``...). Its output is not
        kept here (read it with :meth:`process_output`). ``timeout``
        (seconds) raises ``CommandTimeoutError`` if it still runs then."""
        self._need_bg()
        pid = process_id.id if isinstance(process_id, ProcessInfo) else process_id
        end = None if not timeout else time.monotonic() + _command_timeout(timeout)
        offset = 0
        while True:
            left = 30 if end is None else end - time.monotonic()
            if left <= 0:
                raise errors.CommandTimeoutError(
                    f"process {pid} still runs after {timeout} s (it was not killed: "
                    "kill_process() ends it)")
            out = self.process_output(pid, offset=offset, wait=max(1, min(30, int(left))))
            offset = out.next_offset
            if out.eof:
                break
        for p in self.list_processes():
            if p.id == pid:
                return p
        raise errors.ProcessNotFoundError(f"process {pid} is no longer listed", code="process_not_found")

    def _need_bg(self):
        if not self.sandbox.supports_background_processes:
            raise errors.BackgroundProcessesDisabledError(
                "background processes are disabled for this sandbox "
                "(supports_background_processes=False): use execute(), or create the sandbox "
                "with supports_background_processes=True")

    def start_process(self, cmd, *, cwd=None, env=None, stdin=False):
        """Start ``cmd`` in the background. ``stdin=True`` keeps its standard
        input open for :meth:`send_stdin` (else it reads end of file)."""
        self._need_bg()
        body = _cmd_body(cmd, cwd, env)
        if not isinstance(stdin, bool):
            raise TypeError(f"stdin must be True or False, not {stdin!r}")
        if stdin:
            body["stdin"] = True
        return ProcessInfo.from_json(self._client.call("POST", "/v1/start_process", body))

    def send_stdin(self, process_id, data=b"", *, close=False):
        """Write ``data`` (bytes exact, or str as UTF-8) to the standard input
        of a background process started with ``stdin=True``; returns once
        the process's pipe has taken it all (a process that does not read
        slows this down). ``close=True`` then closes its stdin (it reads end
        of file). Returns the total bytes written to its stdin so far.
        Raises :class:`StdinClosedError` if its stdin is closed."""
        self._need_bg()
        pid = process_id.id if isinstance(process_id, ProcessInfo) else process_id
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("data must be bytes or str")
        resp, conn = self._client.request(
            "POST", _http.query("/process_stdin", id=pid, eof="true" if close else None),
            bytes(data), {"Content-Type": "application/octet-stream"})
        self._client.check(resp, conn)
        return json.loads(self._client.read_body(resp, conn)).get("stdin_bytes")

    def close_stdin(self, process_id):
        """Close a background process's standard input (it reads end of
        file); closing a closed one is not an error."""
        return self.send_stdin(process_id, b"", close=True)

    def list_processes(self):
        self._need_bg()
        return [ProcessInfo.from_json(p) for p in
                self._client.call("GET", "/v1/list_processes").get("processes", [])]

    def kill_process(self, process_id, *, grace_seconds=5):
        self._need_bg()
        pid = process_id.id if isinstance(process_id, ProcessInfo) else process_id
        return ProcessInfo.from_json(self._client.call(
            "POST", "/v1/kill_process", {"id": pid, "grace_seconds": grace_seconds},
            timeout=grace_seconds + 60))

    def process_output(self, process_id, *, stream="stdout", offset=0, wait=None):
        """Output of a background process from byte ``offset``; ``wait``
        (seconds) long-polls for new output."""
        self._need_bg()
        pid = process_id.id if isinstance(process_id, ProcessInfo) else process_id
        w = None if not wait else ("true" if wait is True else str(wait))
        d = self._client.call("GET", _http.query("/process_output", id=pid, stream=stream,
                                                 offset=offset, wait=w),
                              timeout=(90 if wait else _http.DEFAULT_TIMEOUT))
        return ProcessOutput(id=d["id"], stream=d["stream"], offset=d["offset"],
                             next_offset=d["next_offset"], dropped=d.get("dropped", 0),
                             data=d.get("data", ""), status=d.get("status"), eof=bool(d.get("eof")))

    # -- ports -----------------------------------------------------------
    def expose_port(self, port, *, host_port=0, host_address=None):
        """Make sandbox ``port`` reachable from the host, as the cloud SDK's
        ``expose_port``: one exposed port at a time (the previous one is
        unexposed first), through ``POST /bind_port``. The host port is any
        free one on 127.0.0.1 unless given. Returns an :class:`ExposedPort`
        (``exposed_at`` is ``http://HOST:PORT``)."""
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise errors.ConfigError(f"invalid port {port!r}: give a TCP port from 1 to 65535")
        self.unexpose_port()
        body = {"port": str(port), "host_port": host_port}
        if host_address is not None:
            body["host_address"] = host_address
        return ExposedPort.from_json(self._client.call("POST", "/bind_port", body))

    def unexpose_port(self):
        """Close the port ``expose_port`` opened (nothing if none is);
        ``ports=`` given at creation stay."""
        self._client.call("POST", "/unbind_port", {})

    def ports(self):
        """Every forward of the sandbox (``ports=`` and ``expose_port``), as
        :class:`ExposedPort`."""
        return [ExposedPort.from_json(p) for p in self.status().get("ports", [])]

    # -- lifecycle -------------------------------------------------------
    def set_timeout(self, seconds):
        """Delete the sandbox ``seconds`` from now instead of when its TTL
        said (longer or shorter; whole seconds, at most 366 days). Returns
        the new ``expires_at`` (also in ``self.expires_at``)."""
        seconds = _seconds("timeout", seconds, 1)
        d = self._client.call("POST", "/timeout", {"timeout_seconds": seconds})
        self.expires_at = d.get("expires_at")
        return self.expires_at

    def snapshot(self, name=None, *, type=SnapshotType.FILESYSTEM):
        """Snapshot this sandbox's filesystem as image ``name`` of its store
        (None: ``snap-<id>-<n>``), the sandbox frozen meanwhile; returns a
        :class:`Snapshot` (``spawn()`` starts sandboxes from it).
        ``type=SnapshotType.FULL``: processes and memory too, CRIU's dump
        of a plain sandbox (``image="host"``, network none, no volumes,
        ``change_lists=False``) into the store, private to its owner;
        ``spawn()`` (or ``LocalSandbox(snapshot=...)``) restores it into a
        new sandbox whose processes carry on. Refused: ConfigError for what a restore
        could not remake, NotCapableHostError without a CRIU that passes
        ``criu check`` (docs/snapshots.md)."""
        body = {"type": type}
        if name is not None:
            body["name"] = check_name(name)
        try:
            return Snapshot(self._client.call("POST", "/snapshot", body))
        except errors.APIError as e:
            status = getattr(e, "status", None)
            if status == 501:
                raise errors.NotCapableHostError(str(e)) from None
            if status == 400 and type == SnapshotType.FULL:
                raise errors.ConfigError(str(e)) from None
            raise

    def rollback(self, snapshot):
        """Return this sandbox's filesystem to ``snapshot`` (a
        :class:`Snapshot` or its name) in place, the sandbox frozen
        meanwhile: what it changed since is undone; its processes run on.
        The snapshot must be of this sandbox's image's lineage (of this
        sandbox, of another of its image, or one its image was spawned
        from): another is refused (ConfigError, naming the fix), an unknown
        one raises HutchNotFoundError. Returns a dict: ``snapshot``,
        ``changes``, ``bytes``, ``frozen_ms``, ``duration_ms``."""
        body = {"snapshot": check_name(getattr(snapshot, "name", snapshot))}
        try:
            return self._client.call("POST", "/rollback", body)
        except errors.APIError as e:
            cls = {400: errors.ConfigError, 404: errors.HutchNotFoundError,
                   501: errors.NotCapableHostError}.get(getattr(e, "status", None))
            if cls is not None:
                raise cls(str(e)) from None
            raise

    def fork(self, n=None, *, full=False, **options):
        """New sandboxes from this one's filesystem (``hutch fork``): one
        :class:`SandboxSession`, or a list of ``n`` (1 to 100). Each has its
        own id, limits, network and TTL (``options``: LocalSandbox's, but
        ``image`` and ``snapshot``: a fork's root is its source's; create's
        defaults otherwise, not the source's). Where the source's disk can
        be cloned (the default workspace, a fork of its disk size) it is,
        the source frozen only for the clone, and no snapshot is made;
        else a snapshot is (it stays in the store:
        ``Snapshot.get(s.config['image'])``). docs/snapshots.md "Fork".
        With a setup script, header bindings or secrets (given through
        files and pipes), a snapshot then spawns.

        ``full=True`` (``hutch fork --full``): processes and memory too, one
        CRIU dump of this sandbox (a plain one: ``image="host"``, network
        none, no volumes, ``change_lists=False``; it runs on), restored into
        each fork, whose processes carry on from the fork; no snapshot is
        left. Refused: ConfigError for what a restore cannot make (a network,
        volumes, bindings), NotCapableHostError without a CRIU that passes
        ``criu check`` or as an ordinary user (docs/snapshots.md "Full fork")."""
        if "image" in options or "snapshot" in options:
            raise errors.ConfigError("image and snapshot do not apply to a fork: its root is "
                                     "its source's")
        count = 1 if n is None else n
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 100:
            raise errors.ConfigError(f"invalid n {n!r}: give a number of forks from 1 to 100")
        sandbox = LocalSandbox(**options)
        if full:
            made = self._fork_full(count, sandbox, options)
        elif (sandbox.setup_script is not None or sandbox.header_bindings or sandbox.secrets):
            snap = self.snapshot()
            made = [snap.spawn(**options) for _ in range(count)]
        else:
            made = _sessions_of(_hutch_json("fork", self.id, "-n", str(count), "--json",
                                            *sandbox._cli_options())["forks"], options)
        return made[0] if n is None else made

    def _fork_full(self, count, sandbox, options):
        if sandbox.setup_script is not None or sandbox.header_bindings or sandbox.secrets:
            raise errors.ConfigError("fork(full=True) restores the source's processes: a setup "
                                     "script, header bindings or secrets do not apply")
        return _sessions_of(_hutch_json("fork", self.id, "--full", "-n", str(count), "--json",
                                        *sandbox._cli_options())["forks"], options)

    def status(self):
        """The sandbox's ``/status`` (a dict: state, expires_at, config...)."""
        return self._client.call("GET", "/status")

    def journal(self, *, verify=False):
        """The session journal (``hutch journal ID --json``): one dict per
        line, oldest first (every request with its caller, route, command
        line or path, status, exit and duration). Readable after close()
        too, for 7 days. With ``verify=True`` the hash chain is checked
        first: a changed, removed or reordered line raises
        :class:`SandboxError` naming it."""
        if verify:
            proc = subprocess.run([find_hutch(), "journal", self.id, "--verify"],
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise errors.SandboxError((proc.stdout + proc.stderr).strip()
                                          .removeprefix("hutch: "))
        proc = subprocess.run([find_hutch(), "journal", self.id, "--json"], capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            raise errors.SandboxError(proc.stderr.strip().removeprefix("hutch: ")
                                      or f"exit status {proc.returncode}")
        return [json.loads(line) for line in proc.stdout.splitlines()]

    def diff(self, since=None, *, process=None):
        """What changed in ``/workspace``, ``/home/appuser`` and ``/tmp``
        over a span (``hutch diff``): since the sandbox started (None),
        since a snapshot of it (a :class:`Snapshot` or its name), since
        the start of the command of journal line ``since`` (an int, a
        line's ``seq`` in :meth:`journal`), or since background process
        ``process`` started (its id or :class:`ProcessInfo`; while it runs,
        what changed so far; at its exit its own list is its
        ``changes``). Returns the change list's dict (``created``,
        ``modified``, ``deleted``, ``omitted``, ``shared``, ``complete``);
        unknown spans and sandboxes without change lists raise
        :class:`SandboxError` (an ``APIError`` saying why)."""
        if process is not None:
            pid = process.id if isinstance(process, ProcessInfo) else process
            if since is not None or not isinstance(pid, str) or not pid:
                raise errors.ConfigError(f"invalid process {process!r}: a background "
                                         "process's id or ProcessInfo, without since")
            return self._client.call("POST", "/diff", {"since_process": pid})["changes"]
        if since is None:
            body = {}
        elif isinstance(since, bool) or not isinstance(since, (int, str, Snapshot)):
            raise errors.ConfigError(f"invalid since {since!r}: a journal line's seq (int), "
                                     "a Snapshot or a snapshot's name")
        elif isinstance(since, int):
            body = {"since_command": since}
        else:
            body = {"since_snapshot": since.name if isinstance(since, Snapshot) else since}
        return self._client.call("POST", "/diff", body)["changes"]

    def net_log(self, since=0, limit=None):
        """The egress log (``hutch net-log``): every connection the sandbox's
        egress proxy decided, (network all) every TCP or UDP flow that left
        through NAT and every answer of the DNS stub (``kind`` ``dns``: the
        name in ``host``, ``type``, ``answer``, ``addresses``), from record
        ``since`` on (an earlier answer's
        ``next``), at most ``limit`` (1 to 1,024). Returns the answer's dict:
        ``mode`` (the mode that applies: ``none`` with ``egress`` CIDRs is
        ``all``), ``dropped`` (records no longer kept), ``next`` and
        ``records``, each with ``time``, ``kind``, ``proto`` (``nat``),
        ``host``, ``address``, ``port``,
        ``verdict`` (``allowed``/``refused``), ``rule``, ``reason``,
        ``bytes_up``, ``bytes_down``, ``owner`` and ``commands`` (docs/api.md,
        "The egress log"). A bad ``since`` or ``limit``: ``ConfigError``."""
        if isinstance(since, bool) or not isinstance(since, int) or since < 0:
            raise errors.ConfigError(f"invalid since {since!r}: a record's seq, an int >= 0")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or not 1 <= limit <= 1024):
            raise errors.ConfigError(f"invalid limit {limit!r}: an int from 1 to 1024")
        return self._client.call("GET", _http.query("/v1/net_log", since=since, limit=limit))

    def _hook_fns(self, name):
        hooks = self.sandbox.hooks
        return [getattr(h, name) for h in (hooks if name == "on_create" else reversed(hooks))]

    def _run_hooks(self, name):
        first = None
        for fn in self._hook_fns(name):
            try:
                if inspect.iscoroutinefunction(fn):
                    ctx = HookContext(AsyncSandboxSession(self), self.sandbox, self.id)
                    _run_coro_blocking(fn(ctx))
                else:
                    r = fn(HookContext(self, self.sandbox, self.id))
                    if inspect.isawaitable(r):
                        _run_coro_blocking(_await(r))
            except BaseException as e:
                if name == "on_create":
                    raise
                first = first or e
        if first is not None:
            raise first

    def _gone(self):
        # The runtime records why a sandbox ended before it retires the
        # sandbox's directory, so a vanished socket says it; one still there
        # in the moment between answers DELETE with 410 (SandboxGoneError).
        return not os.path.exists(self.socket_path)

    def _delete(self, quiet=False):
        try:
            if not self._gone():
                self._client.call("DELETE", "/", timeout=120)
        except errors.SandboxGoneError:
            pass
        except errors.SandboxError:
            if not quiet:
                raise
        finally:
            self._closed = True
            self._client.close()

    def close(self):
        """Run the ``on_destroy`` hooks (newest first), then delete the sandbox.
        Idempotent. A sandbox already gone (expired, deleted) is not an error
        here; its hooks are skipped."""
        with self._close_lock:
            if self._closed:
                return
            hook_error = None
            if not self._gone():
                try:
                    self._run_hooks("on_destroy")
                except Exception as e:
                    hook_error = e
            self._delete()
            if hook_error is not None:
                raise hook_error

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.close()
        except Exception:
            if exc_type is None:
                raise
        return False


async def _await(aw):
    return await aw


def _mode(mode):
    if mode is None:
        return None
    if isinstance(mode, int) and not isinstance(mode, bool):
        return format(mode, "o")
    if isinstance(mode, str) and mode and all(c in "01234567" for c in mode):
        return mode
    raise TypeError(f"mode must be an int (0o644) or an octal string ('644'), not {mode!r}")


_END = object()


class AsyncExecutionStream:
    """``async for`` over a command's output: ``OutputChunk`` items, then an
    ``ExitStatus``."""

    def __init__(self, opener):
        self._opener = opener
        self._sync = None

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._sync is None:
            self._sync = await asyncio.to_thread(self._opener)
        item = await asyncio.to_thread(next, self._sync, _END)
        if item is _END:
            raise StopAsyncIteration
        return item

    @property
    def exit(self):
        return self._sync.exit if self._sync else None

    @property
    def exit_code(self):
        return self._sync.exit_code if self._sync else None

    async def aclose(self):
        if self._sync is not None:
            await asyncio.to_thread(self._sync.close)


def _async_method(name):
    sync_fn = getattr(SandboxSession, name)

    @functools.wraps(sync_fn)
    async def method(self, *args, **kwargs):
        return await asyncio.to_thread(getattr(self.sync, name), *args, **kwargs)
    return method


class AsyncSandboxSession:
    """The asyncio form of :class:`SandboxSession`: the same methods, each a
    coroutine with the same arguments and results."""

    def __init__(self, sync_session):
        self.sync = sync_session

    id = property(lambda self: self.sync.id)
    socket_path = property(lambda self: self.sync.socket_path)
    expires_at = property(lambda self: self.sync.expires_at)  # set_timeout() moves it
    config = property(lambda self: self.sync.config)
    sandbox = property(lambda self: self.sync.sandbox)
    closed = property(lambda self: self.sync.closed)

    def __repr__(self):
        return f"<AsyncSandboxSession {self.id} {'closed' if self.closed else 'open'}>"

    execute = _async_method("execute")
    read_file = _async_method("read_file")
    write_file = _async_method("write_file")
    list_dir = _async_method("list_dir")
    remove = _async_method("remove")
    make_dir = _async_method("make_dir")
    upload = _async_method("upload")
    download = _async_method("download")
    start_process = _async_method("start_process")
    list_processes = _async_method("list_processes")
    kill_process = _async_method("kill_process")
    process_output = _async_method("process_output")
    send_stdin = _async_method("send_stdin")
    close_stdin = _async_method("close_stdin")
    status = _async_method("status")
    set_timeout = _async_method("set_timeout")
    snapshot = _async_method("snapshot")
    rollback = _async_method("rollback")
    journal = _async_method("journal")
    diff = _async_method("diff")
    net_log = _async_method("net_log")
    wait_process = _async_method("wait_process")
    upload_dir = _async_method("upload_dir")
    download_dir = _async_method("download_dir")
    expose_port = _async_method("expose_port")
    unexpose_port = _async_method("unexpose_port")
    ports = _async_method("ports")

    async def fork(self, n=None, *, full=False, **options):
        """:meth:`SandboxSession.fork` (``full=True`` too): the new sessions in
        their asyncio form."""
        made = await asyncio.to_thread(self.sync.fork, n, full=full, **options)
        if n is None:
            return AsyncSandboxSession(made)
        return [AsyncSandboxSession(m) for m in made]

    @property
    def pty(self):
        """The asyncio form of ``session.pty``."""
        return AsyncPty(self.sync.pty)

    def execute_stream(self, cmd, **kwargs):
        """``async for item in session.execute_stream(cmd)``; with
        ``on_stdout`` / ``on_stderr`` (plain or ``async def``, called on the
        event loop, in order) an awaitable of the ``ExitStatus``."""
        if kwargs.get("on_stdout") is not None or kwargs.get("on_stderr") is not None:
            return _exec.run_callbacks_async(self.sync.execute_stream, cmd, kwargs)
        return AsyncExecutionStream(functools.partial(self.sync.execute_stream, cmd, **kwargs))

    async def _run_hooks(self, name):
        first = None
        for fn in self.sync._hook_fns(name):
            try:
                if inspect.iscoroutinefunction(fn):
                    await fn(HookContext(self, self.sync.sandbox, self.id))
                else:
                    r = await asyncio.to_thread(fn, HookContext(self.sync, self.sync.sandbox, self.id))
                    if inspect.isawaitable(r):
                        await r
            except BaseException as e:
                if name == "on_create":
                    raise
                first = first or e
        if first is not None:
            raise first

    async def close(self):
        """Run the ``on_destroy`` hooks, then delete the sandbox."""
        s = self.sync
        if s._closed:
            return
        hook_error = None
        if not await asyncio.to_thread(s._gone):
            try:
                await self._run_hooks("on_destroy")
            except Exception as e:
                hook_error = e
        await asyncio.to_thread(s._delete)
        if hook_error is not None:
            raise hook_error

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb):
        try:
            await self.close()
        except Exception:
            if exc_type is None:
                raise
        return False
