/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netpolicy: the network option (none / all / allow(hosts)), its parsing and
 * validation (the cloud's rules), and the wiring on both sides of clone().
 * The module's one public header: runtime/, init/, supervisor/ and cli/
 * include this and nothing else of netpolicy/ (the *-internal.h headers are
 * for netpolicy's own sources and its unit tests).
 */
#ifndef HUTCH_NETPOLICY_H
#define HUTCH_NETPOLICY_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "error.h"

/* ---- the policy (policy.c) ---- */

enum hutch_net_mode {
	HUTCH_NET_NONE = 0,
	HUTCH_NET_ALL,
	HUTCH_NET_ALLOW,
};

#define HUTCH_NET_HOST_MAX  253
#define HUTCH_NET_HOSTS_MAX 256

/* The port of an allow-list entry that names none, and the proxy's first
 * listener: the one owner of that rule. */
#define HUTCH_NET_TLS_PORT 443

struct hutch_net_host {
	char name[HUTCH_NET_HOST_MAX + 1]; /* DNS name or IP literal */
	uint16_t port;                     /* 0 = default (HUTCH_NET_TLS_PORT) */
	bool is_ip;
};

/* The entry's port, the default applied. */
static inline uint16_t hutch_net_host_port(const struct hutch_net_host *h)
{
	return h->port ? h->port : HUTCH_NET_TLS_PORT;
}

/* The cloud's egress=: IP/CIDR destinations, normalized (host bits
 * cleared; a bare address is /32 or /128). */
#define HUTCH_NET_EGRESS_MAX 64
/* "ffff:...:ffff/128" and a NUL */
#define HUTCH_NET_CIDR_TEXT 44

struct hutch_net_cidr {
	int family; /* AF_INET, AF_INET6 */
	uint8_t prefix;
	uint8_t addr[16]; /* network byte order; the first 4 for AF_INET */
};

struct hutch_net_policy {
	enum hutch_net_mode mode;
	size_t nhosts;
	struct hutch_net_host *hosts;
	/* egress= given (an empty list too: it blocks everything): the
	 * sandbox reaches these destinations and nothing else beyond its
	 * loopback, whatever none or all says (the cloud's deny-all policy
	 * with an allow list). Set by the egress option, kept when the
	 * network option is parsed after it. */
	bool egress_set;
	size_t negress;
	struct hutch_net_cidr egress[HUTCH_NET_EGRESS_MAX];
};

/* One egress entry as the cloud's client normalizes it (koyeb's
 * _normalize_destination): white space stripped; an IPv4 or IPv6 address,
 * or ADDR/PREFIX (an IPv4 netmask too) with the host bits cleared; a
 * scoped address ('%') or anything else is refused naming the entry. */
int hutch_net_cidr_parse(const char *entry, struct hutch_net_cidr *ret, struct hutch_err *err);
/* "10.0.0.0/8", "2001:db8::1/128" into buf (HUTCH_NET_CIDR_TEXT bytes). */
void hutch_net_cidr_format(const struct hutch_net_cidr *c, char *buf, size_t size);
/* The mode the sandbox is wired for: with egress, none and all become all
 * (a non-empty list: the addresses it names are reached through mode
 * all's wiring, nothing else) or none (an empty list). */
enum hutch_net_mode hutch_net_policy_wired_mode(const struct hutch_net_policy *p);

/* Parse "none", "all" or "allow:HOST[,HOST...]"; entries are name, name:port,
 * ip or ip:port. A scheme, a path or '*' is refused naming the entry. */
int hutch_net_policy_parse(const char *spec, struct hutch_net_policy *ret, struct hutch_err *err);
/* Validate one host entry; fills ret. */
int hutch_net_host_parse(const char *entry, struct hutch_net_host *ret, struct hutch_err *err);
void hutch_net_policy_done(struct hutch_net_policy *p);
const char *hutch_net_mode_name(enum hutch_net_mode mode);
/* True if this build can enforce the mode. */
bool hutch_net_mode_is_implemented(enum hutch_net_mode mode);
/* The rules of the network option together with --host-port: the mode is
 * implemented, host ports need a network (not none), and in allow no host
 * port is 53, 443 or a port of the list (the DNS stub's and the proxy's).
 * 0, or a negative errno with a message naming the fix. */
int hutch_net_policy_validate(const struct hutch_net_policy *p, const uint16_t *host_ports,
                              size_t nhost_ports, struct hutch_err *err);

/* ---- header bindings (binding.c) ---- */

/*
 * --header-binding HOST:HEADER=VALUE (API: header_bindings): the egress
 * proxy terminates the sandbox's TLS to HOST with a certificate of the
 * sandbox's own CA and sets HEADER: VALUE on every HTTP/1.1 request it
 * forwards to the real HOST. VALUE is a literal, or the secret of a source
 * ("@env:NAME", "@file:PATH", "@fd:N"), optionally inside a template that
 * holds "{secret}" once ("Bearer {secret}@env:TOKEN"). The secret stays in
 * the supervisor: see hutch_net_bindings_protect().
 */
#define HUTCH_NET_BINDINGS_MAX      16
#define HUTCH_NET_HEADER_MAX        64
#define HUTCH_NET_BINDING_VALUE_MAX 4096

struct hutch_net_binding {
	char host[HUTCH_NET_HOST_MAX + 1];     /* lowercase DNS name */
	char header[HUTCH_NET_HEADER_MAX + 1]; /* as given */
	bool literal;                          /* the value was in the option itself */
	size_t value_len;
	char value[HUTCH_NET_BINDING_VALUE_MAX + 1]; /* secret: the header's whole value */
};

/* Lives in pages of its own (mmap), never on the heap. */
struct hutch_net_bindings {
	size_t n;
	struct hutch_net_binding b[HUTCH_NET_BINDINGS_MAX];
};

/* New empty set (MADV_DONTDUMP); -errno. */
int hutch_net_bindings_new(struct hutch_net_bindings **ret);
/* Wipes and unmaps; NULL is fine. */
void hutch_net_bindings_free(struct hutch_net_bindings *b);
/* In the supervisor, before init is cloned: MADV_WIPEONFORK, so that
 * init and every process after it see zeros (-errno: refuse), and mlock:
 * 1 when the host did not allow it (the pages may be swapped), else 0. */
int hutch_net_bindings_protect(struct hutch_net_bindings *b);
/* Wipes the values, keeps hosts and headers (the CLI, once the
 * supervisor has its copy). */
void hutch_net_bindings_forget(struct hutch_net_bindings *b);
/* Parses HOST:HEADER=VALUE, reading the secret of a source. Errors name
 * the entry as HOST:HEADER, never the value. */
int hutch_net_binding_parse(const char *spec, struct hutch_net_binding *ret, struct hutch_err *err);
/* The rules for a binding given as fields (the API): a DNS name with a
 * dot (no scheme, wildcard, port, path or IP), a token header name other
 * than the framing ones (Host, Content-Length, Transfer-Encoding,
 * Connection, ...), a value of 1..HUTCH_NET_BINDING_VALUE_MAX bytes
 * without control characters (CR, LF, NUL) or outer white space. */
int hutch_net_binding_check(const char *host, const char *header, const char *value,
                            size_t value_len, struct hutch_err *err);
/* Adds a copy; the same host and header twice, or more than the maximum,
 * is an error. */
int hutch_net_bindings_add(struct hutch_net_bindings *b, const struct hutch_net_binding *one,
                           struct hutch_err *err);
bool hutch_net_bindings_has_host(const struct hutch_net_bindings *b, const char *host);
/* The secret of a source, src without its '@' ("env:NAME", "file:PATH",
 * "fd:N"), into buf (at most max bytes; one trailing newline of a file or
 * fd dropped); errors start with what and never hold the value. */
int hutch_secret_read(const char *src, const char *what, char *buf, size_t max, size_t *ret_len,
                      struct hutch_err *err);

/* ---- network wiring (addrs, host side, child side) ---- */

/*
 * Network wiring for the modes that reach beyond the sandbox.
 *
 * Host side (mode all): one veth pair per sandbox, host end "hutch<slot>"
 * with the gateway address of the sandbox's /30 from a private pool, the
 * peer created directly as "eth0" in the sandbox's network namespace; one
 * static nftables table "inet hutch" (NAT, and no path to the host, other
 * sandboxes, link-local/metadata, private ranges or IPv6); IPv4 forwarding.
 * The link name is derived from the uid slot, whose lock file exists before
 * the link is made: that is the record gc works from. The table and the
 * forwarding switch are shared by every sandbox: the last one out (or gc)
 * removes the table and restores forwarding if hutch turned it on.
 *
 * Child side (init, in the new namespaces): configures the namespace for
 * the mode, and creates the listening sockets the supervisor serves from
 * inside the sandbox (DNS stub, TLS proxy, host ports), which init passes to
 * the supervisor with SCM_RIGHTS before dropping privileges.
 */

#define HUTCH_NET_POOL_DEFAULT "10.200.0.0/16"
#define HUTCH_NET_STATE_DIR    "/run/hutch-net"
#define HUTCH_NET_LINK_PREFIX  "hutch"
/* host.hutch.internal inside every sandbox with a network: an address on
 * the sandbox's loopback where the supervisor accepts --host-port
 * connections and relays them to 127.0.0.1:PORT on the host. */
#define HUTCH_NET_HOST_INTERNAL  "169.254.100.1"
#define HUTCH_NET_HOST_PORTS_MAX 16
#define HUTCH_NET_LISTENERS_MAX  64

struct hutch_net_pool {
	uint32_t net; /* network byte order */
	uint8_t prefix;
};

/* The addresses of one sandbox (mode all), filled by hutch_net_pool_addrs(). */
struct hutch_net_addrs {
	uint32_t gateway, sandbox;  /* network byte order; prefix is 30 */
	char host_if[IFNAMSIZ];     /* "hutch<slot>" */
	struct hutch_net_pool pool; /* the pool they come from (the NAT rule) */
};

/* "A.B.C.D/N", N between 8 and 28, host bits zero. Error names the fix. */
int hutch_net_pool_parse(const char *cidr, struct hutch_net_pool *ret, struct hutch_err *err);
/* The /30 of a slot: gateway = base + 1, sandbox = base + 2. Error if the
 * pool has no room for that slot. */
int hutch_net_pool_addrs(const struct hutch_net_pool *pool, unsigned slot,
                         struct hutch_net_addrs *ret, struct hutch_err *err);
/* Fails if a host route (main table, not on a hutch link) overlaps the
 * pool, naming the route and the fix (HUTCH_NET_POOL=CIDR). */
int hutch_net_pool_check_clash(const struct hutch_net_pool *pool, struct hutch_err *err);

/* Host side for one sandbox in mode all: ensure the nftables table, turn
 * IPv4 forwarding on (recording that hutch did it), create the veth pair
 * with the peer "eth0" in the network namespace of init_pid, give the host
 * end the gateway address and bring it up. Safe against a concurrent
 * hutch_net_host_detach()/gc of the last other sandbox (flock on
 * HUTCH_NET_STATE_DIR/lock). On failure removes what it made.
 * a must come from hutch_net_pool_addrs() (the table's NAT rule is for
 * a->pool). A table made for another pool is an error naming both pools:
 * it goes away with its last sandbox (detach or gc).
 * Call after clone() and before init's GO (init's hutch_net_setup_child()
 * expects eth0 to be there); init_pid must stay unreaped meanwhile. */
int hutch_net_host_attach(const struct hutch_net_addrs *a, pid_t init_pid, struct hutch_err *err);
/* Remove the sandbox's host link (idempotent: a missing link is success,
 * and the kernel removes the pair by itself when the sandbox's netns
 * dies), then, if no hutch link remains, the table and the forwarding
 * switch. Waits for the lock (held by attaches for milliseconds). */
int hutch_net_host_detach(const struct hutch_net_addrs *a, struct hutch_err *err);
/* gc: delete every hutch<slot> link whose slot is not alive, then as in
 * detach. slot_alive(slot) must be true while a supervisor holds the slot
 * (from before its attach on). Also removes a table left with no link. */
int hutch_net_host_gc(bool (*slot_alive)(unsigned slot, void *ud), void *ud, struct hutch_err *err);

/* Mode all for an ordinary user (user-mode networking, usernet.c): find
 * pasta (override: its path, HUTCH_PASTA; else /usr/bin, /usr/sbin, /bin,
 * /sbin) into ret_path and check that the caller can open /dev/net/tun.
 * The error names the package (passt) or the fix. */
int hutch_net_usernet_check(const char *override, char *ret_path, size_t size,
                            struct hutch_err *err);

/* libnl (libnl-route-3 and libnl-3), which network all and allow load at
 * run time where a network is made (none never does): 0 when it loads,
 * else a negative errno with err naming the packages to install (hutch
 * doctor). */
int hutch_net_libnl_check(struct hutch_err *err);

/* Base chains of other tables that drop forwarded packets by policy (e.g.
 * Docker's iptables-nft FORWARD chain): mode all cannot get out through
 * them. Returns how many, naming them in buf; negative errno on failure. */
int hutch_nft_forward_blockers(char *buf, size_t size, struct hutch_err *err);
/* Child side (init, in the sandbox's netns): the table "ip hutch_tls" of
 * hutch_net_child.redirect_tls. */
int hutch_nft_redirect_child(struct hutch_err *err);
/* Child side (init, in the sandbox's netns): the table "inet
 * hutch_egress" of egress=, which refuses every packet that leaves the
 * sandbox's loopback for an address not in the list, and DNS to the stub
 * (names are not resolved: egress is addresses). */
int hutch_nft_egress_child(const struct hutch_net_policy *p, struct hutch_err *err);

/* Child side (init, in the sandbox's netns): the table "inet
 * hutch_netlog" of hutch_net_child.log_nat (skip_tls: with header
 * bindings, TCP to 443 is the proxy's to log). */
int hutch_nft_netlog_child(bool skip_tls, struct hutch_err *err);
/* The netlink log group of that table's rule (its own namespace's). */
#define HUTCH_NATLOG_GROUP 29

/* ---- child side (init, before the root is built) ---- */

/* What the namespace gets, computed by the supervisor before clone(). */
struct hutch_net_child {
	uint32_t addr, gateway; /* mode all: eth0 address/30 and default route */
	/* mode all with header bindings: TCP to port 443 beyond the sandbox
	 * is redirected (nftables in its netns) to the proxy's listener on
	 * 127.0.0.1:HUTCH_NET_REDIRECT_PORT; UDP to 443 (QUIC) is refused so
	 * that clients fall back to TCP. */
	bool redirect_tls;
	/* mode all as an ordinary user: eth0 is pasta's tap, configured by
	 * pasta; init adds the policy table (hutch_nft_usernet_child()) with
	 * these host addresses (set elements) refused besides the ranges. */
	bool usernet;
	const char *usernet_block;
	/* mode all with the egress log on (natlog.c): every new TCP or UDP
	 * flow that leaves the sandbox's loopback is logged (a "log group"
	 * rule in the table "inet hutch_netlog"), conntrack counts its bytes,
	 * and init passes up the two netlink sockets that read both
	 * (HUTCH_NET_L_NFLOG, HUTCH_NET_L_CTEVENTS). */
	bool log_nat;
	/* The egress log is on (all, allow): init passes up a sock_diag
	 * socket of the sandbox's netns (HUTCH_NET_L_SOCKDIAG), with which the
	 * log finds a TCP connection's socket by its exact addresses
	 * (hutch_egress_sock_inode()) when several commands run at once. */
	bool log_owner;
	size_t nhost_ports;
	uint16_t host_ports[HUTCH_NET_HOST_PORTS_MAX];
};

struct hutch_net_plan;

/* Child side, in init (root of the user namespace that owns the netns),
 * as the plan says. Every mode: loopback up. all: eth0 (already moved in)
 * up with the plan's address/30, default route via its gateway,
 * HUTCH_NET_HOST_INTERNAL/32 on lo, IPv6 off. allow: HUTCH_NET_HOST_INTERNAL/32
 * on lo and a local route for 0.0.0.0/0 on lo (every IPv4 destination is
 * local, so a connection to any address reaches the proxy's listeners, or is
 * refused at once), IPv6 off. */
int hutch_net_setup_child(const struct hutch_net_plan *plan, struct hutch_err *err);

enum hutch_net_listener_kind {
	HUTCH_NET_L_DNS = 1,  /* UDP: the DNS stub */
	HUTCH_NET_L_PROXY,    /* TCP: the TLS proxy (allow) */
	HUTCH_NET_L_HOSTPORT, /* TCP: relay to 127.0.0.1:port on the host */
	HUTCH_NET_L_REDIRECT, /* TCP: all + bindings: 443 redirected here */
	HUTCH_NET_L_NFLOG,    /* netlink: log_nat's new flows (port 0) */
	HUTCH_NET_L_CTEVENTS, /* netlink: log_nat's ended flows, with bytes (port 0) */
	HUTCH_NET_L_SOCKDIAG, /* netlink: log_owner's socket look-ups (port 0), not watched */
};

#define HUTCH_NET_REDIRECT_PORT 15443

struct hutch_net_listener {
	int fd; /* non-blocking, close-on-exec */
	enum hutch_net_listener_kind kind;
	uint16_t port;
};

/* Create the listeners of the plan's mode (none: none). all: DNS on 127.0.0.1:53,
 * host ports on HUTCH_NET_HOST_INTERNAL. allow: DNS on 0.0.0.0:53, proxy
 * on 0.0.0.0:443 and on every other port of the list, host ports on
 * HUTCH_NET_HOST_INTERNAL (a host port equal to a proxy port fails with
 * EADDRINUSE). Call after hutch_net_setup_child(). Returns the count
 * (<= max) or a negative errno with err set; on failure nothing stays
 * open. warn->code != 0: made, but without what it says (the NAT path's
 * log, which the kernel could not turn on), for the user to hear. */
int hutch_net_child_listeners(const struct hutch_net_plan *plan, struct hutch_net_listener *ls,
                              size_t max, struct hutch_err *warn, struct hutch_err *err);

/* ---- the supervisor's egress ---- */

/*
 * egress: the supervisor's side of the network modes all and allow. It
 * serves, from the host, the listening sockets init made inside the
 * sandbox's network namespace (hutch_net_child_listeners() above):
 *
 *   - the DNS stub (UDP). all: every query is relayed to the upstream
 *     resolver. allow: A queries for listed names are answered with what the
 *     upstream resolver says, any other name gets NXDOMAIN and goes nowhere.
 *   - the transparent TLS proxy (allow). It reads the ClientHello, checks the
 *     server name (or the dialled address) and the port against the list,
 *     resolves the name itself, dials from the host and splices the bytes.
 *     Anything else is reset at once and logged.
 *   - host ports (all, allow): relayed to 127.0.0.1:PORT on the host.
 *
 * Single-threaded and non-blocking, with its own epoll fd that the
 * supervisor's loop watches (the way libmicrohttpd is driven).
 */

#define HUTCH_EGRESS_CONNS_MAX   256 /* proxied connections at once */
#define HUTCH_EGRESS_REFUSED_LOG 64  /* refusals kept for /status */

struct hutch_egress;
struct mitm; /* header bindings' TLS (mitm.c) */

/* p (and mitm, NULL when there are no bindings) must outlive the egress. */
int hutch_egress_new(const struct hutch_net_policy *p, const struct sockaddr_in *resolver,
                     struct mitm *mitm, struct hutch_egress **ret, struct hutch_err *err);
/* Takes ownership of the listeners' fds, also on failure. */
int hutch_egress_add_listeners(struct hutch_egress *e, const struct hutch_net_listener *ls,
                               size_t n, struct hutch_err *err);
/* Watch for EPOLLIN; then call hutch_egress_run(). */
int hutch_egress_fd(const struct hutch_egress *e);
/* Handle whatever is ready; never blocks. */
void hutch_egress_run(struct hutch_egress *e);
/* Resolver, counters and the log of refused connections and names. */
cJSON *hutch_egress_status(const struct hutch_egress *e);
/* Closes every socket (listeners included). NULL is fine. */
void hutch_egress_free(struct hutch_egress *e);

/*
 * The egress log (issue 29, docs/history.md "Egress per command"):
 * every connection the proxy decides (TLS of allow, host ports, mode all's
 * redirected 443) is given to an observer twice: at accept, to attribute
 * it to a command (the supervisor knows the commands, netpolicy does
 * not), and at its end, as a record: the decision, the rule, the bytes
 * each way. Nothing of a bound header ever reaches a record: the byte
 * counts are the client's own bytes and the upstream's answer (a bound
 * connection counts plaintext before the headers are set).
 */
#define HUTCH_NET_OWNER_CMDS 4

/* Who made a connection, as the observer's attribute() says. */
struct hutch_net_owner {
	uint64_t cmd[HUTCH_NET_OWNER_CMDS]; /* commands (cmd.h ids), ncmd of them */
	unsigned ncmd;                      /* 0: no command ran */
	unsigned running;                   /* commands running at the accept */
	bool exact;                         /* by the socket's process, else by time */
	int32_t pid;                        /* exact: that process, inside the sandbox */
};

static inline bool hutch_net_owner_has(const struct hutch_net_owner *w, uint64_t cmd)
{
	for (unsigned i = 0; i < w->ncmd && i < HUTCH_NET_OWNER_CMDS; i++)
		if (w->cmd[i] == cmd)
			return true;
	return false;
}

struct hutch_net_conn_record {
	int64_t at_ms, end_ms;              /* realtime: accepted, closed */
	const char *kind;                   /* "tls", "host_port", "redirect" or "nat" (all) */
	const char *proto;                  /* "nat": "tcp" or "udp"; else NULL */
	const char *host;                   /* the SNI, "" none */
	const struct sockaddr_in *dst;      /* what the client dialled */
	const struct sockaddr_in *upstream; /* what was dialled outside, or NULL */
	bool allowed;
	const char *rule;   /* allowed: the list entry; refused: a code (docs/api.md) */
	const char *reason; /* refused: why, in words; "" when allowed */
	uint64_t bytes_up, bytes_down;
	bool bytes_unknown;                  /* "nat": the flow outlived the log */
	const struct hutch_net_owner *owner; /* NULL: refused before it was accepted */
};

/* One answer of the DNS stub (all and allow): the name asked, what was
 * answered (rcode, the A records) and who asked. */
struct hutch_net_dns_record {
	int64_t at_ms;         /* realtime: the query came */
	const char *name;      /* lowercase, no trailing dot */
	uint16_t qtype;        /* 1: A, 28: AAAA, ... */
	int rcode;             /* the answer's (SERVFAIL: upstream failed) */
	const uint32_t *addrs; /* A records, network byte order */
	size_t naddrs;
	bool refused;     /* allow: a name not in the list (NXDOMAIN) */
	const char *rule; /* "all", the listed name, or "unlisted" */
	const struct hutch_net_owner *owner;
};

struct hutch_egress_observer {
	/* A connection from client (inside the sandbox) to server (what the
	 * client's socket dialled) was accepted, or its first packet logged:
	 * fill ret (zeroed) with who made it. client and server are NULL for
	 * UDP (a DNS query, a NAT flow). Called in the accept path: cheap. */
	void (*attribute)(void *ud, const struct sockaddr_in *client,
	                  const struct sockaddr_in *server, struct hutch_net_owner *ret);
	/* A connection has ended (or was refused at once). */
	void (*record)(void *ud, const struct hutch_net_conn_record *rec);
	/* The DNS stub answered (NULL: not told). */
	void (*dns)(void *ud, const struct hutch_net_dns_record *rec);
	void *ud;
};

/* A command's connections not recorded yet (still open, or a NAT flow
 * whose end conntrack has not announced): how many, how many of them are
 * allowed (the rest not decided yet), and the bytes moved so far each way
 * (a NAT flow's: conntrack's counters, asked for now; a proxy's: what its
 * relay moved). cmd is an owner's id (struct hutch_net_owner). */
struct hutch_net_open {
	unsigned n, allowed;
	uint64_t bytes_up, bytes_down;
};
void hutch_egress_open_of(struct hutch_egress *e, uint64_t cmd, struct hutch_net_open *ret);

/* A command starts (before it counts as running): what mode all's NAT
 * log holds is attributed first, among the commands that ran when it was
 * sent (natlog.c reads the log at its tick while one command runs). */
void hutch_egress_command_starts(struct hutch_egress *e);

/* Mode all's NAT path is logged (init passed up the log's sockets: not
 * when the kernel lacks what it needs, or the log is off). */
bool hutch_egress_logs_nat(const struct hutch_egress *e);
/* The inode of the TCP socket inside the sandbox whose own end is local
 * and whose peer is remote (a client's socket: its address and what it
 * dialled), by one exact sock_diag look-up in the sandbox's netns
 * (sockdiag.c; the socket init passed up for log_owner). 0 with
 * *ret_inode; -ENOENT no such socket (or one in TIME_WAIT, or a
 * listener); -EBADF no sock_diag socket; -errno. */
int hutch_egress_sock_inode(struct hutch_egress *e, const struct sockaddr_in *local,
                            const struct sockaddr_in *remote, uint32_t *ret_inode);
/* o (or NULL: none) must outlive the egress. */
void hutch_egress_observe(struct hutch_egress *e, const struct hutch_egress_observer *o);

/* The first IPv4 "nameserver" of /etc/resolv.conf, port 53. */
int hutch_net_default_resolver(struct sockaddr_in *ret, struct hutch_err *err);

/* ---- the network plan (plan.c) ---- */

/*
 * Everything a network mode means for one sandbox, computed by the
 * supervisor from the policy before clone(): the addresses, the upstream
 * resolver, the text of the sandbox's /etc/resolv.conf and extra /etc/hosts
 * lines, and (in init, hutch_net_setup_child() and
 * hutch_net_child_listeners()) the namespace's wiring and listeners. After
 * the clone it carries what serves the sandbox: the host link (all), the
 * listeners init passed up and the egress. The supervisor and init only
 * hand the plan on; they know no rule of any mode.
 *
 * A zeroed plan is empty: hutch_net_plan_done() on it does nothing.
 */
/* pasta's state (rootless mode all): none before it is started; running;
 * starting (a restart, not ready yet); down (not running and not
 * restarted any more). */
enum hutch_net_helper_state {
	HUTCH_NET_HELPER_NONE,
	HUTCH_NET_HELPER_RUNNING,
	HUTCH_NET_HELPER_STARTING,
	HUTCH_NET_HELPER_DOWN,
};
/* A pasta that ends is restarted at most this many times in any
 * HUTCH_NET_HELPER_WINDOW_S seconds (a failed start counts), then left
 * down. A pasta has HUTCH_NET_HELPER_READY_S to be ready, the first one
 * at create and a restarted one alike: a restarted one runs in the
 * sandbox's cgroup under its CPU quota (nano's is a quarter of a CPU),
 * which made 5 s too short under emulation (the v2 VM: three restarts of
 * a nano sandbox's pasta timed out in a row). */
#define HUTCH_NET_HELPER_RESTARTS 3
#define HUTCH_NET_HELPER_WINDOW_S 60
#define HUTCH_NET_HELPER_READY_S  10

struct hutch_net_plan {
	const struct hutch_net_policy *policy; /* not owned; outlives the plan */
	struct hutch_net_child child;          /* what init configures */
	struct hutch_net_addrs addrs;          /* all: the sandbox's /30, host link */
	struct sockaddr_in resolver;           /* upstream; sin_family 0: none */
	const char *resolv_conf;               /* the sandbox's /etc/resolv.conf */
	const char *extra_hosts;               /* extra /etc/hosts lines, or NULL */
	struct hutch_err warning;              /* code != 0: made, but say this */
	/* After clone(). */
	bool attached; /* all: host side made (or being made) */
	struct hutch_net_listener listeners[HUTCH_NET_LISTENERS_MAX];
	size_t nlisteners;           /* received from init, not yet served */
	struct hutch_egress *egress; /* serves them once ready */
	/* The egress log's observer (set before hutch_net_plan_serve()), or NULL. */
	const struct hutch_egress_observer *observer;
	/* Header bindings (not owned) and the CA made for them after clone. */
	const struct hutch_net_bindings *bindings;
	const char *upstream_ca;
	struct mitm *mitm;
	/* Rootless mode all (usernet-plan.c): pasta's path (not owned), the
	 * host addresses refused inside (owned); what a restart starts pasta
	 * on, kept from create (owned fds: init's user and network
	 * namespaces, the sandbox's cgroup or -1); pasta (pid 0: none, its
	 * pidfd, ready and stderr pipes while it starts), its state, the
	 * times of its restarts (a ring), their number, the deadline of a
	 * starting one, why it is down or was restarted. */
	const char *usernet_helper;
	char *host_block;
	int helper_userns_fd, helper_netns_fd, helper_cgroup_fd;
	pid_t helper_pid;
	int helper_pidfd, helper_ready_fd, helper_err_fd;
	enum hutch_net_helper_state helper_state;
	double helper_restart_at[HUTCH_NET_HELPER_RESTARTS];
	unsigned helper_restarts;
	double helper_deadline;
	char helper_error[256];
};

struct hutch_net_plan_params {
	const struct hutch_net_policy *policy;
	const uint16_t *host_ports;
	size_t nhost_ports;
	const struct sockaddr_in *resolver;        /* NULL: the host's /etc/resolv.conf */
	const struct hutch_net_pool *pool;         /* HUTCH_NET_POOL; NULL: the default */
	unsigned slot;                             /* the sandbox's uid slot */
	const struct hutch_net_bindings *bindings; /* NULL: none; outlives the plan */
	const char *upstream_ca;                   /* HUTCH_UPSTREAM_CA, or NULL */
	/* Mode all as an ordinary user: pasta's path (from
	 * hutch_net_usernet_check(); outlives the plan). NULL: root's veth. */
	const char *usernet_helper;
	/* --net-log and --nat-log on: mode all's NAT path logged by the kernel
	 * for the egress log (natlog.c; init sets it up in the sandbox's netns;
	 * it costs libnftables, the kernel's table, conntrack: docs/network.md) */
	bool log_nat;
	/* --net-log on (all, allow): the log's exact owner asks sock_diag in
	 * the sandbox's netns (hutch_net_child.log_owner) */
	bool log_owner;
};

/* Before clone(). all: the slot's /30 of the pool, checked against the
 * host's routes. all and allow: the upstream resolver (when the host names
 * none, the plan is still made, with no resolver and plan->warning saying
 * why: the sandbox works by address, its DNS stub answers SERVFAIL).
 * Fills plan (zeroed first); on failure err names the fix. */
int hutch_net_plan_make(struct hutch_net_plan *plan, const struct hutch_net_plan_params *in,
                        struct hutch_err *err);
/* The mode has a host side (all: links, the table): a create first
 * removes what crashed sandboxes left (hutch_net_host_gc()). */
bool hutch_net_policy_has_host_side(const struct hutch_net_policy *p);
/* After clone(), before init's GO: the host side (all: the veth pair with
 * eth0 in init_pid's netns, see hutch_net_host_attach()); others: nothing.
 * With header bindings, the sandbox's CA (its key made here, after the
 * clone, so init never holds it). */
int hutch_net_plan_attach(struct hutch_net_plan *plan, pid_t init_pid, struct hutch_err *err);
/* Nothing of the host side reaches into init's network namespace before
 * GO, and init sends no listeners (mode none): init may make the
 * namespace itself, before GO (hutch_init_params.net_early). */
bool hutch_net_plan_init_only(const struct hutch_net_plan *plan);
/* After the id maps of init are written, before GO: rootless mode all
 * keeps init's user and network namespaces (opened now: init is still
 * dumpable) and cgfd (the sandbox's cgroup, -1 for none; taken) for the
 * life of the plan, and starts pasta on them (returns once it is ready:
 * its tap configured); others: nothing, cgfd closed. plan_done() stops
 * it and closes them. */
int hutch_net_plan_attach_helper(struct hutch_net_plan *plan, pid_t init_pid, int cgfd,
                                 struct hutch_err *err);
/* What to watch for EPOLLIN: pasta's pidfd while it runs (it ended), its
 * pid file pipe while a restarted one starts (ready, or it ended); -1 if
 * none. */
int hutch_net_plan_helper_fd(const struct hutch_net_plan *plan);
/* While a restarted pasta starts: when (CLOCK_MONOTONIC seconds) it must
 * be ready by; else 0. */
double hutch_net_plan_helper_deadline(const struct hutch_net_plan *plan);
/*
 * The fd of hutch_net_plan_helper_fd() fired, or (timeout) the deadline
 * passed; now is CLOCK_MONOTONIC seconds. A pasta that ended (killed,
 * crashed, an OOM kill) or did not start is reaped and restarted without
 * waiting for it (HUTCH_NET_HELPER_RESTARTS in a window at most, then
 * left down for good); a starting one that is ready runs. /status
 * (helper_state, helper_pid, helper_restarts, helper_error) and msg (the
 * line for the sandbox's events) say which. Returns 0 when there was
 * nothing to say, 1 for good news in msg, -EIO for bad news in msg.
 */
int hutch_net_plan_helper_event(struct hutch_net_plan *plan, double now, bool timeout, char *msg,
                                size_t size);
/* The sandbox was frozen (idle sleep, oci pause) and is thawed now: a
 * starting pasta was frozen too, so its HUTCH_NET_HELPER_READY_S count
 * from now. */
void hutch_net_plan_helper_thawed(struct hutch_net_plan *plan, double now);
/* Stop the plan's pasta and close the plan's fds of it (idempotent; also
 * part of hutch_net_plan_done()): the sandbox's end stops it before its
 * cgroup, which pasta runs in, is removed. */
void hutch_net_plan_helper_done(struct hutch_net_plan *plan);
/* The CA certificate (PEM) for the sandbox's trust store, or NULL. */
const char *hutch_net_plan_ca_pem(const struct hutch_net_plan *plan);
/* The listeners init sent (hostile: kinds and ports are checked, and
 * there must be none yet and a mode that has them). Takes the fds, also on
 * failure (closed then). */
int hutch_net_plan_take_listeners(struct hutch_net_plan *plan, const struct hutch_net_listener *ls,
                                  size_t n, struct hutch_err *err);
/* After init's READY: start serving the listeners (modes all and allow). */
int hutch_net_plan_serve(struct hutch_net_plan *plan, struct hutch_err *err);
/* The fd to watch for EPOLLIN (then hutch_net_plan_run()), -1 if none. */
int hutch_net_plan_fd(const struct hutch_net_plan *plan);
void hutch_net_plan_run(struct hutch_net_plan *plan);
/* The "network" object of /status (docs/network.md). NULL: out of memory. */
cJSON *hutch_net_plan_status(const struct hutch_net_plan *plan);
/* Stop serving, close the listeners, remove the host side. Idempotent; a
 * failed removal is returned (err set) after everything else is done. */
int hutch_net_plan_done(struct hutch_net_plan *plan, struct hutch_err *err);

#endif
