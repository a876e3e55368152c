/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The nftables table "inet hutch" of mode all, through libnftables. It is
 * static: every rule matches the host links by the wildcard "hutch*", so a
 * sandbox coming or going never touches it; only the pool (the source of
 * the masquerade) is a parameter, kept in the set pool4 so that a later
 * attach can tell which pool an existing table was made for.
 *
 * A table made for another pool is an error, not replaced: its sandboxes
 * would lose their NAT. It goes away with its last sandbox (detach, or the
 * gc every create runs), after which the new pool can be used.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nftables/libnftables.h>

#include "allow-internal.h"
#include "cleanup.h"
#include "hostnet-internal.h"

/* Refuse fast: a TCP reset, else ICMP administratively prohibited, so a
 * client fails at once rather than after a timeout. */
#define REFUSE_CHAIN                                   \
	"  chain refuse {\n"                           \
	"    meta l4proto tcp reject with tcp reset\n" \
	"    reject with icmpx admin-prohibited\n"     \
	"  }\n"

/* The blocked ranges as set elements (allow.c has the one list). */
#define BLOCKED4_MAX 256

/*
 * The whole table, made in one transaction: "create table" fails if it
 * exists, which aborts the transaction, so two concurrent creators cannot
 * both add the rules. The one %s is the pool. Every chain runs before the
 * usual filter priority (-10), so a host firewall's accept cannot let a
 * sandbox reach what this table refuses; it cannot un-drop what another
 * table drops, though (a forward policy of drop elsewhere stops mode all).
 * The %s are the pool and the blocked ranges.
 */
static const char TABLE_FMT[] =
        "create table inet hutch\n"
        "table inet hutch {\n"
        /* The pool the sandboxes' addresses come from. */
        "  set pool4 { type ipv4_addr; flags interval; elements = { %s }; }\n"
        /* What a sandbox may never reach (allow.c's blocked4: private,
         * CGNAT, loopback, link-local, special-purpose, multicast). */
        "  set blocked4 { type ipv4_addr; flags interval; elements = { %s }; }\n" REFUSE_CHAIN
        "  chain input {\n"
        "    type filter hook input priority -10; policy accept;\n"
        /* Replies to what the host itself opened towards a sandbox. */
        "    iifname \"hutch*\" ct state established,related accept\n"
        /* Everything else from a sandbox to any host address (gateway
         * included) is refused. */
        "    iifname \"hutch*\" goto refuse\n"
        "  }\n"
        "  chain forward {\n"
        "    type filter hook forward priority -10; policy accept;\n"
        /* No IPv6 out of a sandbox (it has none configured anyway). */
        "    iifname \"hutch*\" meta nfproto ipv6 goto refuse\n"
        /* No private, link-local or special-purpose destination. */
        "    iifname \"hutch*\" ip daddr @blocked4 goto refuse\n"
        /* No other sandbox, whatever the pool. */
        "    iifname \"hutch*\" oifname \"hutch*\" goto refuse\n"
        /* The rest of the world. */
        "    iifname \"hutch*\" accept\n"
        /* Into a sandbox: only replies. */
        "    oifname \"hutch*\" ct state established,related accept\n"
        "    oifname \"hutch*\" drop\n"
        "  }\n"
        "  chain postrouting {\n"
        "    type nat hook postrouting priority srcnat; policy accept;\n"
        /* Leaving the host: the sandbox's address becomes the host's. */
        "    ip saddr @pool4 oifname != \"hutch*\" masquerade\n"
        "  }\n"
        "}\n";

/*
 * libnftables, loaded on first use by its SONAME (found at build time, see
 * CMakeLists.txt): linking it would load it and its five dependencies into
 * every CLI call (~6 ms of each start) although only network all's host
 * side and doctor need it. Like the libmicrohttpd table (supervisor/mhd.h), a
 * global written once before any use.
 */
#ifndef HUTCH_NFT_SONAME
#error "HUTCH_NFT_SONAME must name libnftables' SONAME (set by CMakeLists.txt)"
#endif

static struct {
	bool loaded;
	/* The header's own prototypes: the compiler checks the ABI. */
	__typeof__(nft_ctx_new) *ctx_new;
	__typeof__(nft_ctx_free) *ctx_free;
	__typeof__(nft_ctx_buffer_output) *buffer_output;
	__typeof__(nft_ctx_buffer_error) *buffer_error;
	__typeof__(nft_run_cmd_from_buffer) *run_cmd_from_buffer;
	__typeof__(nft_ctx_get_output_buffer) *get_output_buffer;
	__typeof__(nft_ctx_get_error_buffer) *get_error_buffer;
} nft;

static int nft_load(struct hutch_err *err)
{
	static const struct {
		const char *name;
		void **slot;
	} syms[] = {
		{ "nft_ctx_new", (void **)&nft.ctx_new },
		{ "nft_ctx_free", (void **)&nft.ctx_free },
		{ "nft_ctx_buffer_output", (void **)&nft.buffer_output },
		{ "nft_ctx_buffer_error", (void **)&nft.buffer_error },
		{ "nft_run_cmd_from_buffer", (void **)&nft.run_cmd_from_buffer },
		{ "nft_ctx_get_output_buffer", (void **)&nft.get_output_buffer },
		{ "nft_ctx_get_error_buffer", (void **)&nft.get_error_buffer },
	};
	void *lib;

	if (nft.loaded)
		return 0;
	lib = dlopen(HUTCH_NFT_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *why = dlerror();
		return hutch_err_set(err, -ELIBACC,
		                     "load libnftables (network all needs it: apt-get install "
		                     "libnftables1): %s",
		                     why ? why : HUTCH_NFT_SONAME);
	}
	for (size_t i = 0; i < ELEMENTSOF(syms); i++) {
		*syms[i].slot = dlsym(lib, syms[i].name);
		if (!*syms[i].slot) {
			(void)dlclose(lib);
			return hutch_err_set(err, -ELIBBAD, "%s has no '%s'", HUTCH_NFT_SONAME,
			                     syms[i].name);
		}
	}
	nft.loaded = true; /* the library stays loaded */
	return 0;
}

static void nft_ctxp(struct nft_ctx **c)
{
	if (*c)
		nft.ctx_free(*c);
}
#define _cleanup_nft_ctx_ __attribute__((cleanup(nft_ctxp)))

/* Run one nft command buffer; on failure fill err with "what: <nft's
 * first error>". A listing is copied into out (size bytes) if out. */
static int nft_run(const char *cmd, const char *what, char *out, size_t size, struct hutch_err *err)
{
	_cleanup_nft_ctx_ struct nft_ctx *ctx = NULL;
	const char *e, *p;
	size_t n;
	int r = nft_load(err);

	if (r < 0)
		return hutch_err_prefix(err, "%s", what);
	ctx = nft.ctx_new(NFT_CTX_DEFAULT);
	if (!ctx)
		return hutch_err_set(err, -ENOMEM, "%s: create nftables context", what);
	if (nft.buffer_output(ctx) < 0 || nft.buffer_error(ctx) < 0)
		return hutch_err_set(err, -ENOMEM, "%s: buffer nftables output", what);
	if (nft.run_cmd_from_buffer(ctx, cmd) == 0) {
		if (out && size > 0)
			(void)snprintf(out, size, "%s", nft.get_output_buffer(ctx));
		return 0;
	}
	/* nft's error is "<where>: Error: <text>\n<command>\n<carets>": keep
	 * the text of the first error. */
	e = nft.get_error_buffer(ctx);
	e = e ? e : "";
	p = strstr(e, "Error: ");
	e = p ? p + strlen("Error: ") : e;
	n = strcspn(e, "\n");
	return hutch_err_set(err, strstr(e, "No such file") ? -ENOENT : -EIO, "%s: %.*s", what,
	                     (int)(n > 160 ? 160 : n), n ? e : "nftables failed");
}

/* 1 if the table exists and was made for pool, 0 if it does not exist,
 * negative (err set) if it exists for another pool. */
static int check_existing(const struct hutch_net_pool *pool, struct hutch_err *err)
{
	char out[1024], want[48], p[32];
	struct hutch_err ignored = { 0 };
	const char *s, *end;

	if (nft_run("list set inet hutch pool4", "list", out, sizeof(out), &ignored) < 0)
		return 0;
	hutch_net_pool_format(pool, p, sizeof(p));
	(void)snprintf(want, sizeof(want), "elements = { %s }", p);
	if (strstr(out, want))
		return 1;
	s = strstr(out, "elements = { ");
	s = s ? s + strlen("elements = { ") : "?";
	end = strchr(s, ' ');
	return hutch_err_set(err, -EEXIST,
	                     "the nftables table inet hutch is in use for the address pool "
	                     "%.*s, not %s: stop the sandboxes using it (or run hutch gc) or "
	                     "set HUTCH_NET_POOL to that range",
	                     end ? (int)(end - s) : 1, s, p);
}

int hutch_nft_ensure(const struct hutch_net_pool *pool, struct hutch_err *err)
{
	char cmd[sizeof(TABLE_FMT) + 32 + BLOCKED4_MAX], p[32], blocked[BLOCKED4_MAX];
	int r;

	if (hutch_nft_probe_pool(pool) == 1)
		return 0; /* the common case, without loading libnftables */
	r = check_existing(pool, err);
	if (r != 0)
		return r < 0 ? r : 0;
	hutch_net_pool_format(pool, p, sizeof(p));
	if (hutch_net_blocked4_format(blocked, sizeof(blocked)) < 0)
		return hutch_err_set(err, -ENOSPC, "format the blocked ranges");
	(void)snprintf(cmd, sizeof(cmd), TABLE_FMT, p, blocked);
	r = nft_run(cmd, "create nftables table inet hutch", NULL, 0, err);
	if (r < 0) {
		/* Lost a race with another creator: fine if it made the same. */
		struct hutch_err again = { 0 };
		int e = check_existing(pool, &again);

		if (e > 0)
			return 0;
		if (e < 0)
			*err = again;
		return err->code;
	}
	return 0;
}

/* Inside a sandbox of mode all with header bindings (its own netns, which
 * init, root of its user namespace, administers): TCP to port 443 of any
 * address beyond the sandbox goes to the proxy's listener instead (the
 * proxy reads the original destination with SO_ORIGINAL_DST), UDP to 443
 * is refused. Commands hold no CAP_NET_ADMIN: they cannot remove it. */
int hutch_nft_redirect_child(struct hutch_err *err)
{
	char cmd[512];

	(void)snprintf(cmd, sizeof(cmd),
	               "table ip hutch_tls {\n"
	               "  chain out {\n"
	               "    type nat hook output priority -100; policy accept;\n"
	               "    oifname != \"lo\" tcp dport 443 redirect to :%d\n"
	               "  }\n"
	               "  chain quic {\n"
	               "    type filter hook output priority 0; policy accept;\n"
	               "    oifname != \"lo\" udp dport 443 reject\n"
	               "  }\n"
	               "}\n",
	               HUTCH_NET_REDIRECT_PORT);
	return nft_run(cmd, "redirect port 443 to the proxy (nftables in the sandbox)", NULL, 0,
	               err);
}

/* The egress log of mode all (natlog.c), in the sandbox's netns (init,
 * before it drops its capabilities): every new TCP or UDP flow that leaves
 * the loopback is logged to the netlink group HUTCH_NATLOG_GROUP, after
 * conntrack (-200, which this rule's "ct" turns on in the namespace) and
 * before every table that refuses or redirects (the redirect's nat -100,
 * egress= -5, the rootless policy -10), so a refused attempt is logged too.
 * With header bindings the TCP 443 the proxy gets is not: the proxy logs
 * it. Commands hold no CAP_NET_ADMIN: they cannot remove it. */
int hutch_nft_netlog_child(bool skip_tls, struct hutch_err *err)
{
	char cmd[512];

	(void)snprintf(cmd, sizeof(cmd),
	               "table inet hutch_netlog {\n"
	               "  chain out {\n"
	               "    type filter hook output priority -150; policy accept;\n"
	               "    oifname \"lo\" accept\n"
	               "%s"
	               "    meta nfproto ipv4 meta l4proto { tcp, udp } ct state new log group %d\n"
	               "  }\n"
	               "}\n",
	               skip_tls ? "    tcp dport 443 accept\n" : "", HUTCH_NATLOG_GROUP);
	return nft_run(cmd, "egress log (nftables in the sandbox)", NULL, 0, err);
}

/* Rootless mode all (usernet.c): in the sandbox's own netns, before init
 * drops its capabilities. Everything that does not stay on the sandbox's
 * loopback and goes to a blocked range, to an address of the host (host4:
 * pasta would dial it from the host) or over IPv6 is refused. */
int hutch_nft_usernet_child(const char *host_block, struct hutch_err *err)
{
	static const char fmt[] =
	        "table inet hutch_usernet {\n"
	        "  set blocked4 { type ipv4_addr; flags interval; elements = { %s }; }\n"
	        "  set host4 { type ipv4_addr; flags interval; auto-merge;%s%s%s }\n" REFUSE_CHAIN
	        "  chain out {\n"
	        "    type filter hook output priority -10; policy accept;\n"
	        "    oifname \"lo\" accept\n"
	        "    meta nfproto ipv6 goto refuse\n"
	        "    ip daddr @blocked4 goto refuse\n"
	        "    ip daddr @host4 goto refuse\n"
	        "  }\n"
	        "}\n";
	_cleanup_free_ char *cmd = NULL;
	char blocked[BLOCKED4_MAX];
	bool hosts = host_block && host_block[0];
	int n;

	if (hutch_net_blocked4_format(blocked, sizeof(blocked)) < 0)
		return hutch_err_set(err, -ENOSPC, "format the blocked ranges");
	n = asprintf(&cmd, fmt, blocked, hosts ? " elements = { " : "", hosts ? host_block : "",
	             hosts ? " };" : "");
	if (n < 0) {
		cmd = NULL;
		return hutch_err_set(err, -ENOMEM, "network policy table");
	}
	return nft_run(cmd, "network policy (nftables in the sandbox)", NULL, 0, err);
}

/* The elements of one family's set, "a, b" ("" when none). */
static int egress_elements(const struct hutch_net_policy *p, int family, char **ret)
{
	char *buf = calloc(p->negress ? p->negress : 1, HUTCH_NET_CIDR_TEXT + 2);
	size_t used = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < p->negress; i++) {
		if (p->egress[i].family != family)
			continue;
		used += (size_t)sprintf(buf + used, "%s", used ? ", " : "");
		hutch_net_cidr_format(&p->egress[i], buf + used, HUTCH_NET_CIDR_TEXT);
		used += strlen(buf + used);
	}
	*ret = buf;
	return 0;
}

/* egress= (netpolicy.h): in the sandbox's netns, before init drops its
 * capabilities (commands hold no CAP_NET_ADMIN: they cannot remove it).
 * The loopback stays open but for DNS to the stub (egress is addresses:
 * a name fails at once, as in network none); the rest leaves only for an
 * address of the list. Mode all's floor (this machine, other sandboxes,
 * private and link-local ranges) still holds outside, on the host. */
int hutch_nft_egress_child(const struct hutch_net_policy *p, struct hutch_err *err)
{
	static const char fmt[] =
	        "table inet hutch_egress {\n"
	        "  set allow4 { type ipv4_addr; flags interval; auto-merge;%s%s%s }\n"
	        "  set allow6 { type ipv6_addr; flags interval; auto-merge;%s%s%s }\n" REFUSE_CHAIN
	        "  chain out {\n"
	        "    type filter hook output priority -5; policy accept;\n"
	        "    oifname \"lo\" meta l4proto { tcp, udp } th dport 53 goto refuse\n"
	        "    oifname \"lo\" accept\n"
	        "    ip daddr @allow4 accept\n"
	        "    ip6 daddr @allow6 accept\n"
	        "    goto refuse\n"
	        "  }\n"
	        "}\n";
	_cleanup_free_ char *v4 = NULL, *v6 = NULL, *cmd = NULL;

	if (egress_elements(p, AF_INET, &v4) < 0 || egress_elements(p, AF_INET6, &v6) < 0 ||
	    asprintf(&cmd, fmt, v4[0] ? " elements = { " : "", v4, v4[0] ? " };" : "",
	             v6[0] ? " elements = { " : "", v6, v6[0] ? " };" : "") < 0) {
		cmd = NULL;
		return hutch_err_set(err, -ENOMEM, "egress table");
	}
	return nft_run(cmd, "egress (nftables in the sandbox)", NULL, 0, err);
}

int hutch_nft_remove(struct hutch_err *err)
{
	struct hutch_err ignored = { 0 };

	/* nft 1.0.6 has no "destroy": list first, so absent is success. */
	if (nft_run("list table inet hutch", "list", NULL, 0, &ignored) < 0)
		return 0;
	return nft_run("delete table inet hutch", "delete nftables table inet hutch", NULL, 0, err);
}

int hutch_nft_forward_blockers(char *buf, size_t size, struct hutch_err *err)
{
	char *list = malloc(1u << 20), *save = NULL;
	char table[128] = "", chain[128] = "";
	size_t used = 0;
	int r, found = 0;

	if (!list)
		return hutch_err_set(err, -ENOMEM, "list nftables chains");
	r = nft_run("list chains", "list nftables chains", list, 1u << 20, err);
	if (r < 0) {
		free(list);
		return r;
	}
	if (size)
		buf[0] = '\0';
	for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char a[64], b[64];
		line += strspn(line, " \t");
		if (sscanf(line, "table %63s %63s {", a, b) == 2) {
			snprintf(table, sizeof(table), "%s %s", a, b);
		} else if (sscanf(line, "chain %63s {", a) == 1) {
			snprintf(chain, sizeof(chain), "%s", a);
		} else if (strstr(line, "hook forward") && strstr(line, "policy drop") &&
		           strcmp(table, "inet hutch") != 0) {
			int n = snprintf(buf + used, size > used ? size - used : 0,
			                 "%stable %s chain %s", found ? ", " : "", table, chain);
			if (n > 0 && used + (size_t)n < size)
				used += (size_t)n;
			found++;
		}
	}
	free(list);
	return found;
}
