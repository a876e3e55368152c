/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The network plan of one sandbox (netpolicy.h): what each mode means,
 * computed before clone() and carried by the supervisor and init, which
 * know no rule of any mode. The mode is looked at here, in link.c (the
 * namespace, the listeners) and in the egress, nowhere else.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostnet-internal.h"
#include "mitm-internal.h"
#include "netpolicy.h"

/* The sandbox's /etc: DNS goes to the stub (the supervisor, through a
 * listener in the sandbox's netns); host.hutch.internal is the address on
 * its loopback where host ports are relayed. */
#define RESOLV_CONF_NONE "# hutch: network none, no DNS\n"
#define RESOLV_CONF_STUB                    \
	"# hutch: the sandbox's DNS stub\n" \
	"nameserver 127.0.0.1\n"            \
	"options timeout:2 attempts:2\n"
/* egress: addresses only; the filter refuses DNS to the stub at once */
#define RESOLV_CONF_EGRESS "# hutch: egress, addresses only, no DNS\n"
#define HOSTS_INTERNAL     HUTCH_NET_HOST_INTERNAL "\thost.hutch.internal\n"

/* A plan not made yet (zeroed) means network none. */
static const struct hutch_net_policy no_network = { .mode = HUTCH_NET_NONE };

static const struct hutch_net_policy *policy_of(const struct hutch_net_plan *plan)
{
	return plan->policy ? plan->policy : &no_network;
}

bool hutch_net_policy_has_host_side(const struct hutch_net_policy *p)
{
	return hutch_net_policy_wired_mode(p) == HUTCH_NET_ALL;
}

int hutch_net_plan_make(struct hutch_net_plan *plan, const struct hutch_net_plan_params *in,
                        struct hutch_err *err)
{
	const struct hutch_net_policy *p = in->policy;
	struct hutch_net_pool pool;
	int r;

	memset(plan, 0, sizeof(*plan));
	plan->policy = p;
	plan->bindings = in->bindings && in->bindings->n ? in->bindings : NULL;
	plan->upstream_ca = in->upstream_ca;
	plan->resolv_conf = RESOLV_CONF_NONE;
	if (hutch_net_policy_wired_mode(p) == HUTCH_NET_NONE)
		return 0;
	/* libnl for the wiring (libnl-internal.h), loaded here, before init's
	 * clone, so that init inherits it rather than loading it again. */
	r = hutch_nl_load(err);
	if (r < 0)
		return r;
	plan->resolv_conf = p->egress_set ? RESOLV_CONF_EGRESS : RESOLV_CONF_STUB;
	plan->extra_hosts = HOSTS_INTERNAL;
	if (in->nhost_ports > HUTCH_NET_HOST_PORTS_MAX)
		return hutch_err_set(err, -E2BIG, "more than %d host ports",
		                     HUTCH_NET_HOST_PORTS_MAX);
	plan->child.nhost_ports = in->nhost_ports;
	if (in->nhost_ports > 0)
		memcpy(plan->child.host_ports, in->host_ports,
		       in->nhost_ports * sizeof(in->host_ports[0]));
	if (in->resolver) {
		plan->resolver = *in->resolver;
	} else if (hutch_net_default_resolver(&plan->resolver, &plan->warning) < 0) {
		/* No IPv4 nameserver on the host: the sandbox still works by
		 * address; its DNS stub answers SERVFAIL and /status says why. */
		memset(&plan->resolver, 0, sizeof(plan->resolver));
	}
	plan->child.log_owner = in->log_owner; /* all and allow */
	if (hutch_net_policy_wired_mode(p) != HUTCH_NET_ALL)
		return 0;
	r = in->pool ? (pool = *in->pool, 0)
	             : hutch_net_pool_parse(HUTCH_NET_POOL_DEFAULT, &pool, err);
	if (r >= 0)
		r = hutch_net_pool_addrs(&pool, in->slot, &plan->addrs, err);
	/* User-mode networking makes no host route: nothing can clash. */
	if (r >= 0 && !in->usernet_helper)
		r = hutch_net_pool_check_clash(&pool, err);
	if (r >= 0 && in->usernet_helper) {
		plan->usernet_helper = in->usernet_helper;
		plan->helper_userns_fd = plan->helper_netns_fd = plan->helper_cgroup_fd = -EBADF;
		plan->helper_pidfd = plan->helper_ready_fd = plan->helper_err_fd = -EBADF;
		plan->addrs.host_if[0] = '\0';
		r = hutch_net_usernet_host_block(&plan->host_block, err);
		plan->child.usernet = true;
		plan->child.usernet_block = plan->host_block;
	}
	if (r < 0)
		return r;
	plan->child.redirect_tls = plan->bindings != NULL;
	plan->child.log_nat = in->log_nat; /* mode all's alone */
	plan->child.addr = plan->addrs.sandbox;
	plan->child.gateway = plan->addrs.gateway;
	return 0;
}

int hutch_net_plan_attach(struct hutch_net_plan *plan, pid_t init_pid, struct hutch_err *err)
{
	int r;

	if (plan->bindings && !plan->mitm) {
		r = mitm_new(plan->bindings, plan->upstream_ca, &plan->mitm, err);
		if (r < 0)
			return hutch_err_prefix(err, "header bindings");
	}
	if (!hutch_net_policy_has_host_side(policy_of(plan)) || plan->usernet_helper)
		return 0;
	/* Before GO: init configures eth0, which must exist by then. */
	plan->attached = true; /* done() removes what was made */
	return hutch_net_host_attach(&plan->addrs, init_pid, err);
}

bool hutch_net_plan_init_only(const struct hutch_net_plan *plan)
{
	return hutch_net_policy_wired_mode(policy_of(plan)) == HUTCH_NET_NONE &&
	       !plan->usernet_helper;
}

const char *hutch_net_plan_ca_pem(const struct hutch_net_plan *plan)
{
	return plan->mitm ? mitm_ca_pem(plan->mitm) : NULL;
}

static bool listener_ok(const struct hutch_net_plan *plan, const struct hutch_net_listener *l)
{
	if (l->kind == HUTCH_NET_L_NFLOG || l->kind == HUTCH_NET_L_CTEVENTS)
		return plan->child.log_nat && l->port == 0;
	if (l->kind == HUTCH_NET_L_SOCKDIAG)
		return plan->child.log_owner && l->port == 0;
	return (l->kind == HUTCH_NET_L_DNS || l->kind == HUTCH_NET_L_PROXY ||
	        l->kind == HUTCH_NET_L_HOSTPORT ||
	        (l->kind == HUTCH_NET_L_REDIRECT && plan->child.redirect_tls)) &&
	       l->port > 0;
}

int hutch_net_plan_take_listeners(struct hutch_net_plan *plan, const struct hutch_net_listener *ls,
                                  size_t n, struct hutch_err *err)
{
	bool ok = plan->nlisteners == 0 &&
	          hutch_net_policy_wired_mode(policy_of(plan)) != HUTCH_NET_NONE &&
	          n <= HUTCH_NET_LISTENERS_MAX;

	for (size_t i = 0; ok && i < n; i++)
		ok = listener_ok(plan, &ls[i]);
	if (!ok) {
		for (size_t i = 0; i < n; i++)
			if (ls[i].fd >= 0)
				close(ls[i].fd);
		return hutch_err_set(err, -EPROTO, "sandbox init sent bad network listeners");
	}
	memcpy(plan->listeners, ls, n * sizeof(ls[0]));
	plan->nlisteners = n;
	return 0;
}

int hutch_net_plan_serve(struct hutch_net_plan *plan, struct hutch_err *err)
{
	int r;

	if (hutch_net_policy_wired_mode(policy_of(plan)) == HUTCH_NET_NONE)
		return 0;
	r = hutch_egress_new(plan->policy, &plan->resolver, plan->mitm, &plan->egress, err);
	if (r < 0)
		return r;
	hutch_egress_observe(plan->egress, plan->observer);
	r = hutch_egress_add_listeners(plan->egress, plan->listeners, plan->nlisteners, err);
	plan->nlisteners = 0; /* the egress owns them now */
	return r;
}

int hutch_net_plan_fd(const struct hutch_net_plan *plan)
{
	return plan->egress ? hutch_egress_fd(plan->egress) : -1;
}

void hutch_net_plan_run(struct hutch_net_plan *plan)
{
	hutch_egress_run(plan->egress); /* NULL once torn down */
}

cJSON *hutch_net_plan_status(const struct hutch_net_plan *plan)
{
	const struct hutch_net_policy *p = policy_of(plan);
	cJSON *o = plan->egress ? hutch_egress_status(plan->egress) : cJSON_CreateObject();
	cJSON *hosts, *ports;
	char ip[INET_ADDRSTRLEN];

	if (!o)
		return NULL;
	/* The mode as enforced (config.network is the one asked for): none
	 * with --egress CIDRs is wired as all narrowed by the table, all with
	 * --egress '' as none. */
	cJSON_AddStringToObject(o, "mode", hutch_net_mode_name(hutch_net_policy_wired_mode(p)));
	hosts = cJSON_AddArrayToObject(o, "hosts");
	for (size_t i = 0; hosts && i < p->nhosts; i++) {
		char h[HUTCH_NET_HOST_MAX + 8];
		snprintf(h, sizeof(h), "%s:%u", p->hosts[i].name,
		         hutch_net_host_port(&p->hosts[i]));
		cJSON_AddItemToArray(hosts, cJSON_CreateString(h));
	}
	ports = cJSON_AddArrayToObject(o, "host_ports");
	for (size_t i = 0; ports && i < plan->child.nhost_ports; i++)
		cJSON_AddItemToArray(ports, cJSON_CreateNumber(plan->child.host_ports[i]));
	if (p->egress_set) {
		cJSON *eg = cJSON_AddArrayToObject(o, "egress");
		for (size_t i = 0; eg && i < p->negress; i++) {
			char c[HUTCH_NET_CIDR_TEXT];
			hutch_net_cidr_format(&p->egress[i], c, sizeof(c));
			cJSON_AddItemToArray(eg, cJSON_CreateString(c));
		}
	}
	if (hutch_net_policy_wired_mode(p) == HUTCH_NET_ALL) {
		inet_ntop(AF_INET, &plan->addrs.sandbox, ip, sizeof(ip));
		cJSON_AddStringToObject(o, "address", ip);
		inet_ntop(AF_INET, &plan->addrs.gateway, ip, sizeof(ip));
		cJSON_AddStringToObject(o, "gateway", ip);
		if (plan->usernet_helper) {
			hutch_net_plan_helper_status(plan, o);
		} else {
			cJSON_AddStringToObject(o, "host_link", plan->addrs.host_if);
		}
	}
	return o;
}

int hutch_net_plan_done(struct hutch_net_plan *plan, struct hutch_err *err)
{
	int r = 0;

	hutch_egress_free(plan->egress);
	plan->egress = NULL;
	mitm_free(plan->mitm);
	plan->mitm = NULL;
	for (size_t i = 0; i < plan->nlisteners; i++)
		close(plan->listeners[i].fd);
	plan->nlisteners = 0;
	hutch_net_plan_helper_done(plan);
	free(plan->host_block);
	plan->host_block = NULL;
	plan->child.usernet_block = NULL;
	if (plan->attached)
		r = hutch_net_host_detach(&plan->addrs, err);
	plan->attached = false;
	return r;
}
