# SPDX-License-Identifier: Apache-2.0
"""Header bindings: credentials that never enter the sandbox.

    LocalSandbox(network=Network.allow(hosts=("api.github.com",)),
                 header_bindings=[GitHubBinding(token=os.environ["GITHUB_TOKEN"])])

The supervisor's egress proxy terminates the sandbox's TLS to a bound host
with a certificate of the sandbox's own CA and sets the header on every
HTTP/1.1 request it forwards to the real host (verified against the host's
trust store). The value is handed to ``hutch create`` through a pipe
(``@fd:N``): never argv, the environment or a file, and never the sandbox.

The names follow the cloud SDK's (``HeaderBinding``, ``GitHubBinding``,
``MistralApiBinding``); their fields beyond ``HeaderBinding(host=, header=,
value=)`` are hutch's guesses (see docs/network.md).
"""
import base64
import re

from .errors import ConfigError

VALUE_MAX = 4096
HEADER_MAX = 64
_TOKEN_RE = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_LABEL_RE = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")
_FRAMING = {"host", "content-length", "transfer-encoding", "connection", "upgrade", "keep-alive",
            "te", "trailer", "proxy-connection", "expect"}


def _check_host(host, entry):
    if not isinstance(host, str) or not host:
        raise ConfigError(f"invalid header binding {entry!r}: no host (give host='api.github.com')")
    if "://" in host:
        raise ConfigError(f"invalid header binding {entry!r}: give a host name, not a URL "
                          "(drop the scheme)")
    if "*" in host:
        raise ConfigError(f"invalid header binding {entry!r}: wildcards are not allowed, bind "
                          "each host")
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if ("/" in host or ":" in host or len(name) > 253 or len(labels) < 2
            or not all(_LABEL_RE.match(l) for l in labels)
            or all(l.isdigit() for l in labels)):
        raise ConfigError(f"invalid header binding {entry!r}: the host must be a DNS name with "
                          "a dot (no port, path or IP address)")
    return name.lower()


class HeaderBinding:
    """Set ``header: value`` on every HTTPS request the sandbox makes to
    ``host``. Refused at construction: no host, a scheme, a wildcard, a port
    or an IP; a header name that is not an HTTP token or that frames the
    request (Host, Content-Length, ...); an empty value, one with control
    characters (CR, LF, NUL) or longer than 4096 bytes. The value is never
    shown (``repr`` hides it)."""

    def __init__(self, *, host, header, value):
        entry = f"{host}:{header}" if isinstance(host, str) and isinstance(header, str) else \
            f"{host!r}:{header!r}"
        self.host = _check_host(host, entry)
        if (not isinstance(header, str) or not header or len(header) > HEADER_MAX
                or not _TOKEN_RE.match(header)):
            raise ConfigError(f"invalid header binding {entry!r}: the header name must be 1 to "
                              f"{HEADER_MAX} letters, digits or !#$%&'*+-.^_`|~")
        if header.lower() in _FRAMING:
            raise ConfigError(f"invalid header binding {entry!r}: {header} frames or routes the "
                              "request and cannot be bound")
        self.header = header
        if not isinstance(value, str) or not value:
            raise ConfigError(f"invalid header binding {entry!r}: the value must be a non-empty "
                              "string")
        raw = value.encode()
        if len(raw) > VALUE_MAX:
            raise ConfigError(f"invalid header binding {entry!r}: the value is longer than "
                              f"{VALUE_MAX} bytes")
        if any((c < 0x20 and c != 9) or c == 0x7F for c in raw):
            raise ConfigError(f"invalid header binding {entry!r}: the value holds a control "
                              "character (CR, LF, NUL, ...)")
        if value[0] in " \t" or value[-1] in " \t":
            raise ConfigError(f"invalid header binding {entry!r}: the value starts or ends with "
                              "white space")
        self._value = value

    @property
    def value(self):
        return self._value

    def __repr__(self):
        return f"{type(self).__name__}(host={self.host!r}, header={self.header!r}, value=<hidden>)"

    def __eq__(self, other):
        return (isinstance(other, HeaderBinding)
                and (self.host, self.header.lower(), self._value)
                == (other.host, other.header.lower(), other._value))

    def __hash__(self):
        return hash((self.host, self.header.lower()))


class GitHubBinding(HeaderBinding):
    """A GitHub token. ``host="api.github.com"`` (the default): the REST
    API, ``Authorization: Bearer TOKEN``. ``host="github.com"``: git over
    HTTPS, ``Authorization: Basic base64(x-access-token:TOKEN)`` (what git
    sends for a token)."""

    def __init__(self, *, token, host="api.github.com"):
        if not isinstance(token, str) or not token:
            raise ConfigError("invalid GitHubBinding: token must be a non-empty string")
        if host == "github.com":
            value = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
        else:
            value = f"Bearer {token}"
        super().__init__(host=host, header="Authorization", value=value)


class MistralApiBinding(HeaderBinding):
    """A Mistral API key: ``Authorization: Bearer KEY`` to api.mistral.ai."""

    def __init__(self, *, api_key, host="api.mistral.ai"):
        if not isinstance(api_key, str) or not api_key:
            raise ConfigError("invalid MistralApiBinding: api_key must be a non-empty string")
        super().__init__(host=host, header="Authorization", value=f"Bearer {api_key}")


def check_bindings(bindings, network):
    """header_bindings= of LocalSandbox: a list of HeaderBinding, each
    host and header once, a network that reaches them."""
    if isinstance(bindings, HeaderBinding):
        bindings = [bindings]
    try:
        bindings = list(bindings)
    except TypeError:
        raise ConfigError(f"invalid header_bindings {bindings!r}: a list of HeaderBinding") from None
    seen = set()
    for b in bindings:
        if not isinstance(b, HeaderBinding):
            raise ConfigError(f"invalid header binding {b!r}: use HeaderBinding(host=, header=, "
                              "value=), GitHubBinding(token=) or MistralApiBinding(api_key=)")
        key = (b.host, b.header.lower())
        if key in seen:
            raise ConfigError(f"header binding '{b.host}:{b.header}' is given twice")
        seen.add(key)
    if len(bindings) > 16:
        raise ConfigError("too many header bindings: at most 16")
    if bindings and network.mode == "none":
        raise ConfigError("header bindings need a network: with network none nothing leaves the "
                          "sandbox; use Network.all() or Network.allow(hosts=...)")
    if network.mode == "allow":
        listed = {h.lower().rstrip(".") for h in network.hosts if ":" not in h}
        listed |= {h.rsplit(":", 1)[0].lower() for h in network.hosts if h.count(":") == 1}
        for b in bindings:
            if b.host not in listed:
                raise ConfigError(f"header binding '{b.host}:{b.header}': {b.host} is not in the "
                                  "allow list; add it to Network.allow(hosts=...)")
    return bindings
