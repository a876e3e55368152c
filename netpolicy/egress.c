/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's egress (netpolicy.h): one object that puts together the
 * parts serving a sandbox with a network, each in a file of its own:
 *
 *   evloop.c    its own epoll fd (watched by the supervisor's loop) and tick
 *   resolver.c  the upstream DNS resolver's client and the answer cache
 *   dnsstub.c   the DNS stub the sandbox asks
 *   proxy.c     the TLS proxy (allow) and the host-port relay
 *   allow.c     the allow decision, pure
 *   refusals.c  the log of refusals for /status
 *   natlog.c    the egress log of mode all's NAT path
 *   sockdiag.c  the egress log's socket look-ups (its exact owner)
 *
 * This file owns the listeners init made, routes each to its part, runs the
 * tick and answers /status.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <sys/epoll.h>

#include "dnsstub-internal.h"
#include "evloop-internal.h"
#include "fdutil.h"
#include "natlog-internal.h"
#include "netpolicy.h"
#include "proxy-internal.h"
#include "refusals-internal.h"
#include "resolver-internal.h"
#include "sockdiag-internal.h"
#include "util.h"

struct listener {
	struct evloop_ev ev;
	struct hutch_egress *e;
	int fd;
	uint32_t mask;
	enum hutch_net_listener_kind kind;
	uint16_t port;
};

struct hutch_egress {
	const struct hutch_net_policy *policy;
	struct evloop loop;
	struct evloop_ev tick_ev;
	struct resolver resolver;
	struct refusals refusals;
	struct dnsstub stub;
	struct proxy proxy;
	struct natlog *natlog; /* mode all with the egress log, else NULL */
	struct listener *listeners;
	size_t nlisteners;
	int diag_fd; /* sock_diag (a listener's fd, not watched), -1 none */
	uint32_t diag_seq;
};

static void on_listener(void *ptr, uint32_t events)
{
	struct listener *l = ptr;

	(void)events;
	if (l->kind == HUTCH_NET_L_DNS)
		dnsstub_on_readable(&l->e->stub);
	else if (l->kind == HUTCH_NET_L_CTEVENTS)
		natlog_on_ct(l->e->natlog);
	else
		proxy_accept(&l->e->proxy, l->fd, l->kind, l->port);
}

/* Deadlines of queries and connections; the tick stops when none is left. */
static void on_tick(void *ptr, uint32_t events)
{
	struct hutch_egress *e = ptr;
	int64_t now = hutch_now_mono_ms();
	bool waiting;

	(void)events;
	evloop_tick_ack(&e->loop);
	resolver_tick(&e->resolver, now);
	proxy_tick(&e->proxy, now);
	waiting = e->natlog && natlog_tick(e->natlog, now);
	if (!resolver_is_busy(&e->resolver) && !proxy_is_busy(&e->proxy) && !waiting)
		evloop_tick(&e->loop, false);
}

void hutch_egress_run(struct hutch_egress *e)
{
	if (!e)
		return;
	if (e->natlog)
		natlog_run(e->natlog); /* its log, when it is read at the tick */
	evloop_run(&e->loop);
	/* Connections closed in the batch: events may have named them. */
	proxy_free_dead(&e->proxy);
}

int hutch_egress_new(const struct hutch_net_policy *p, const struct sockaddr_in *resolver,
                     struct mitm *mitm, struct hutch_egress **ret, struct hutch_err *err)
{
	struct hutch_egress *e = calloc(1, sizeof(*e));
	int r;

	if (!e)
		return hutch_err_set(err, -ENOMEM, "allocate the network proxy");
	e->policy = p;
	e->loop.epfd = e->loop.tickfd = e->resolver.fd = e->diag_fd = -1;
	e->tick_ev = (struct evloop_ev){ on_tick, e };
	e->stub = (struct dnsstub){
		.fd = -1,
		.policy = p,
		.resolver = &e->resolver,
		.refusals = &e->refusals,
		.observer = &e->proxy.observer,
	};
	e->proxy = (struct proxy){
		.policy = p,
		.loop = &e->loop,
		.resolver = &e->resolver,
		.refusals = &e->refusals,
		.mitm = mitm,
		.spare_fd = hutch_spare_fd(),
	};
	r = evloop_init(&e->loop, &e->tick_ev, err);
	if (r >= 0)
		r = resolver_init(&e->resolver, &e->loop, resolver, err);
	if (r < 0) {
		hutch_egress_free(e);
		return r;
	}
	*ret = e;
	return 0;
}

/* The egress log's sockets (the listeners still own the fds). */
static int natlog_take(struct hutch_egress *e, enum hutch_net_listener_kind kind, int fd)
{
	if (!e->natlog) {
		e->natlog = calloc(1, sizeof(*e->natlog));
		if (!e->natlog)
			return -ENOMEM;
		*e->natlog = (struct natlog){
			.policy = e->policy,
			.observer = &e->proxy.observer,
			.stub = &e->stub,
			.loop = &e->loop,
			.tls_redirected = e->proxy.mitm != NULL,
			.nflog_fd = -1,
			.ct_fd = -1,
		};
	}
	if (kind == HUTCH_NET_L_NFLOG)
		e->natlog->nflog_fd = fd;
	else
		e->natlog->ct_fd = fd;
	return 0;
}

int hutch_egress_add_listeners(struct hutch_egress *e, const struct hutch_net_listener *ls,
                               size_t n, struct hutch_err *err)
{
	struct listener *arr = calloc(n ? n : 1, sizeof(*arr));
	int r = 0;

	if (!arr) {
		for (size_t i = 0; i < n; i++)
			close(ls[i].fd);
		return hutch_err_set(err, -ENOMEM, "allocate listeners");
	}
	for (size_t i = 0; i < n; i++) {
		arr[i] = (struct listener){
			.ev = { on_listener, &arr[i] },
			.e = e,
			.fd = ls[i].fd,
			.kind = ls[i].kind,
			.port = ls[i].port,
		};
		if (ls[i].kind == HUTCH_NET_L_DNS)
			e->stub.fd = ls[i].fd;
		if (ls[i].kind == HUTCH_NET_L_SOCKDIAG) {
			e->diag_fd = ls[i].fd; /* asked, never watched */
			continue;
		}
		if ((ls[i].kind == HUTCH_NET_L_NFLOG || ls[i].kind == HUTCH_NET_L_CTEVENTS) &&
		    r == 0 && natlog_take(e, ls[i].kind, ls[i].fd) < 0)
			r = hutch_err_set(err, -ENOMEM, "allocate the egress log");
		if (ls[i].kind == HUTCH_NET_L_NFLOG) { /* the log watches it (natlog.c) */
			if (r == 0 && natlog_watch(e->natlog) < 0)
				r = hutch_err_set_errno(err, -errno, "watch a network listener");
			continue;
		}
		if (r == 0 &&
		    evloop_watch(&e->loop, ls[i].fd, &arr[i].ev, &arr[i].mask, EPOLLIN) < 0)
			r = hutch_err_set_errno(err, -errno, "watch a network listener");
	}
	free(e->listeners); /* called once; keeps ownership simple */
	e->listeners = arr;
	e->nlisteners = n;
	return r;
}

void hutch_egress_observe(struct hutch_egress *e, const struct hutch_egress_observer *o)
{
	e->proxy.observer = o;
}

void hutch_egress_open_of(struct hutch_egress *e, uint64_t cmd, struct hutch_net_open *ret)
{
	*ret = (struct hutch_net_open){ 0 };
	if (!e)
		return;
	if (e->natlog)
		natlog_open_of(e->natlog, cmd, ret);
	proxy_open_of(&e->proxy, cmd, ret);
}

int hutch_egress_sock_inode(struct hutch_egress *e, const struct sockaddr_in *local,
                            const struct sockaddr_in *remote, uint32_t *ret_inode)
{
	return e ? sockdiag_inode(e->diag_fd, &e->diag_seq, local, remote, ret_inode) : -EBADF;
}

void hutch_egress_command_starts(struct hutch_egress *e)
{
	if (e && e->natlog)
		natlog_command_starts(e->natlog);
}

bool hutch_egress_logs_nat(const struct hutch_egress *e)
{
	return e && e->natlog && e->natlog->nflog_fd >= 0 && e->natlog->ct_fd >= 0;
}

int hutch_egress_fd(const struct hutch_egress *e)
{
	return e->loop.epfd;
}

cJSON *hutch_egress_status(const struct hutch_egress *e)
{
	cJSON *o = cJSON_CreateObject();
	char addr[INET_ADDRSTRLEN + 8];

	if (!o)
		return NULL;
	resolver_format(&e->resolver, addr, sizeof(addr));
	cJSON_AddStringToObject(o, "resolver", addr);
	cJSON_AddNumberToObject(o, "connections", e->proxy.nconns);
	cJSON_AddNumberToObject(o, "connections_total", (double)e->proxy.conns_total);
	cJSON_AddNumberToObject(o, "dns_answered", (double)e->stub.answered);
	if (e->natlog) {
		cJSON_AddNumberToObject(o, "nat_logged", (double)e->natlog->attempts);
		cJSON_AddNumberToObject(o, "nat_log_lost", (double)e->natlog->lost);
	}
	refusals_to_json(&e->refusals, o);
	return o;
}

void hutch_egress_free(struct hutch_egress *e)
{
	if (!e)
		return;
	if (e->natlog)
		natlog_done(e->natlog);
	free(e->natlog);
	proxy_done(&e->proxy);
	resolver_done(&e->resolver);
	for (size_t i = 0; i < e->nlisteners; i++)
		close(e->listeners[i].fd);
	free(e->listeners);
	evloop_done(&e->loop);
	free(e);
}
