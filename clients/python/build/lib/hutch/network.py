# SPDX-License-Identifier: Apache-2.0
"""The ``network`` option: ``Network.none()``, ``Network.all()``,
``Network.allow(hosts=(...))``.

Host entries are validated exactly like the runtime does
(``netpolicy/policy.c``): ``name``, ``name:port``, ``ip``, ``ip:port`` or
``[v6]:port``; a scheme, a path or a ``*`` is refused, naming the entry.
"""
import socket
import string

from .errors import ConfigError

HOST_MAX = 253
HOSTS_MAX = 256
_QUOTE_MAX = 128
_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "-_")


def _quote(entry):
    return entry[:_QUOTE_MAX] + ("..." if len(entry) > _QUOTE_MAX else "")


def _is_dns_name(s):
    if not s or len(s) > HOST_MAX or s[0] in ".-":
        return False
    label = 0
    alpha = False
    prev = ""
    for c in s:
        if c == ".":
            if label == 0 or prev == "-":
                return False
            label = 0
            prev = c
            continue
        if c not in _NAME_CHARS:
            return False
        if c in string.ascii_letters:
            alpha = True
        if c == "-" and label == 0:
            return False
        label += 1
        if label > 63:
            return False
        prev = c
    return alpha and s[-1] != "-"


def _inet_pton(family, s):
    try:
        socket.inet_pton(family, s)
        return True
    except (OSError, ValueError):
        return False


def _parse_port(s, entry):
    if not s or not all(c in string.digits for c in s) or not 1 <= int(s) <= 65535:
        raise ConfigError(f"invalid host '{_quote(entry)}': port must be a number from 1 to 65535")
    return int(s)


def parse_host(entry):
    """Validate one allow-list entry; returns ``(host, port or None, is_ip)``
    with the name lowercased. Raises :class:`ConfigError` naming the entry."""
    if not isinstance(entry, str):
        raise ConfigError(f"invalid host {entry!r}: a host entry is a string such as 'pypi.org' "
                          "or 'api.example.com:8443'")
    if entry == "":
        raise ConfigError("invalid host '': an empty entry is not a host")
    if len(entry.encode("utf-8", "surrogatepass")) >= HOST_MAX + 16:
        raise ConfigError(f"invalid host '{_quote(entry)}': longer than {HOST_MAX} characters")
    if "://" in entry:
        raise ConfigError(f"invalid host '{_quote(entry)}': give a host name, not a URL (drop the scheme)")
    if "/" in entry:
        raise ConfigError(f"invalid host '{_quote(entry)}': a path is not allowed, give only the host")
    if "*" in entry:
        raise ConfigError(f"invalid host '{_quote(entry)}': wildcards are not allowed, list each host")
    if "\0" in entry:
        raise ConfigError(f"invalid host {entry!r}: not a host name or IP address")
    port = None
    if entry[0] == "[":
        close = entry.find("]")
        if close < 0:
            raise ConfigError(f"invalid host '{_quote(entry)}': missing ']'")
        host = entry[1:close]
        rest = entry[close + 1:]
        if rest.startswith(":"):
            port = rest[1:]
        elif rest:
            raise ConfigError(f"invalid host '{_quote(entry)}': junk after ']'")
        if not _inet_pton(socket.AF_INET6, host):
            raise ConfigError(f"invalid host '{_quote(entry)}': not an IPv6 address")
        is_ip = True
    elif entry.count(":") > 1:
        if not _inet_pton(socket.AF_INET6, entry):
            raise ConfigError(f"invalid host '{_quote(entry)}': not an IPv6 address "
                              "(write [addr]:port for a port)")
        host, is_ip = entry, True
    else:
        host, sep, p = entry.partition(":")
        if sep:
            port = p
        if _inet_pton(socket.AF_INET, host):
            is_ip = True
        elif _is_dns_name(host):
            is_ip = False
        else:
            raise ConfigError(f"invalid host '{_quote(entry)}': not a host name or IP address")
    port_num = _parse_port(port, entry) if port is not None else None
    if len(host) > HOST_MAX:
        raise ConfigError(f"invalid host '{_quote(entry)}': name too long")
    return host.lower(), port_num, is_ip


class Network:
    """A network policy. Build it with :meth:`none`, :meth:`all` or
    :meth:`allow`; ``mode`` is ``"none"``, ``"all"`` or ``"allow"``, ``hosts``
    the allow-list as given."""

    __slots__ = ("mode", "hosts")

    def __init__(self, mode="none", hosts=()):
        if mode not in ("none", "all", "allow"):
            raise ConfigError(f"invalid network mode {mode!r}: use Network.none(), Network.all() "
                              "or Network.allow(hosts=(...))")
        if isinstance(hosts, str):
            raise ConfigError(f"invalid network hosts {hosts!r}: give a list or tuple of hosts, "
                              "e.g. Network.allow(hosts=('pypi.org',))")
        try:
            hosts = tuple(hosts)
        except TypeError:
            raise ConfigError(f"invalid network hosts {hosts!r}: give a list or tuple of hosts") from None
        if mode == "allow":
            if not hosts:
                raise ConfigError("invalid network allow(): list at least one host, e.g. "
                                  "Network.allow(hosts=('pypi.org', 'api.github.com'))")
            if len(hosts) > HOSTS_MAX:
                raise ConfigError(f"invalid network: more than {HOSTS_MAX} hosts")
            for h in hosts:
                parse_host(h)
        elif hosts:
            raise ConfigError(f"network {mode} takes no hosts")
        self.mode = mode
        self.hosts = hosts

    @classmethod
    def none(cls):
        """No outbound connection (loopback only). The default."""
        return cls("none")

    @classmethod
    def all(cls):
        """Every outbound connection."""
        return cls("all")

    @classmethod
    def allow(cls, hosts=()):
        """Only HTTPS to the listed hosts (``name``, ``name:port``, ``ip``,
        ``ip:port``, ``[v6]:port``)."""
        return cls("allow", hosts)

    def to_cli(self):
        """The ``--network`` argument of the ``hutch`` CLI."""
        if self.mode == "allow":
            return "allow:" + ",".join(self.hosts)
        return self.mode

    def __eq__(self, other):
        return isinstance(other, Network) and (self.mode, self.hosts) == (other.mode, other.hosts)

    def __hash__(self):
        return hash((self.mode, self.hosts))

    def __repr__(self):
        if self.mode == "allow":
            return f"Network.allow(hosts={self.hosts!r})"
        return f"Network.{self.mode}()"
