/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DNS stub (dnsstub-internal.h). Queries come from inside the sandbox:
 * they go through the bounded parser of dns.c, and a name that is not
 * listed never leaves the host, so a sandbox cannot leak data through DNS.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "allow-internal.h"
#include "dnsstub-internal.h"

static int64_t now_real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *dnsstub_name_of(const struct dnsstub *s, uint32_t addr)
{
	unsigned n = s->nnames < DNSSTUB_NAMES ? s->nnames : DNSSTUB_NAMES;

	for (unsigned i = 0; i < n; i++) { /* the newest first */
		unsigned k = (s->nnames - 1 - i) % DNSSTUB_NAMES;

		if (s->names[k].addr == addr)
			return s->names[k].name;
	}
	return NULL;
}

/* The egress log: who asked (by time: a UDP client is not looked up). */
static void ask_owner(struct dnsstub *s, struct hutch_net_owner *ret)
{
	const struct hutch_egress_observer *o = s->observer ? *s->observer : NULL;

	if (o && o->dns && o->attribute)
		o->attribute(o->ud, NULL, NULL, ret);
}

/* The egress log: one answer, and its addresses' names kept. */
static void note(struct dnsstub *s, const struct hutch_dns_question *q, int64_t at_ms,
                 const struct hutch_net_owner *w, int rcode, const uint32_t *addrs, size_t naddrs,
                 bool refused)
{
	const struct hutch_egress_observer *o = s->observer ? *s->observer : NULL;
	struct hutch_net_dns_record rec = {
		.at_ms = at_ms,
		.name = q->name,
		.qtype = q->qtype,
		.rcode = rcode,
		.addrs = addrs,
		.naddrs = naddrs,
		.refused = refused,
		.rule = refused                              ? "unlisted"
		        : s->policy->mode == HUTCH_NET_ALLOW ? q->name
		                                             : "all",
		.owner = w,
	};

	if (!o || !o->dns)
		return;
	for (size_t i = 0; i < naddrs; i++) {
		unsigned k = s->nnames++ % DNSSTUB_NAMES;

		s->names[k].addr = addrs[i];
		(void)snprintf(s->names[k].name, sizeof(s->names[k].name), "%s", q->name);
	}
	o->dns(o->ud, &rec);
}

static void stub_send(struct dnsstub *s, const struct sockaddr_in *to, const uint8_t *msg,
                      size_t len)
{
	if (len > 0)
		(void)sendto(s->fd, msg, len, MSG_NOSIGNAL, (const struct sockaddr *)to,
		             sizeof(*to));
}

static void stub_reply(struct dnsstub *s, const struct sockaddr_in *to,
                       const struct hutch_dns_question *q, int rcode, const uint32_t *addrs,
                       size_t naddrs)
{
	uint8_t out[1024];
	size_t n = hutch_dns_build_reply(q, rcode, addrs, naddrs, DNSSTUB_TTL, out, sizeof(out));

	stub_send(s, to, out, n);
	if (rcode == HUTCH_DNS_RCODE_NOERROR)
		s->answered++;
}

/* all: the upstream answer goes back as it is, under the client's id. */
static void on_forwarded(void *ptr, struct resolver_query *q, uint8_t *msg, size_t len,
                         const struct hutch_dns_answer *a)
{
	struct dnsstub *s = ptr;

	if (!a) {
		stub_reply(s, &q->client, &q->q, HUTCH_DNS_RCODE_SERVFAIL, NULL, 0);
		note(s, &q->q, q->at_ms, &q->owner, HUTCH_DNS_RCODE_SERVFAIL, NULL, 0, false);
		return;
	}
	msg[0] = (uint8_t)(q->q.id >> 8);
	msg[1] = (uint8_t)q->q.id;
	stub_send(s, &q->client, msg, len);
	s->answered++;
	note(s, &q->q, q->at_ms, &q->owner, a->rcode, a->addrs, a->naddrs, false);
}

/* allow: an answer of our own with the addresses upstream gave. */
static void on_resolved(void *ptr, struct resolver_query *q, uint8_t *msg, size_t len,
                        const struct hutch_dns_answer *a)
{
	struct dnsstub *s = ptr;

	int rcode;

	(void)msg;
	(void)len;
	if (!a) {
		stub_reply(s, &q->client, &q->q, HUTCH_DNS_RCODE_SERVFAIL, NULL, 0);
		note(s, &q->q, q->at_ms, &q->owner, HUTCH_DNS_RCODE_SERVFAIL, NULL, 0, false);
		return;
	}
	rcode = a->rcode == HUTCH_DNS_RCODE_NOERROR    ? HUTCH_DNS_RCODE_NOERROR
	        : a->rcode == HUTCH_DNS_RCODE_NXDOMAIN ? HUTCH_DNS_RCODE_NXDOMAIN
	                                               : HUTCH_DNS_RCODE_SERVFAIL;
	stub_reply(s, &q->client, &q->q, rcode, a->addrs, a->naddrs);
	note(s, &q->q, q->at_ms, &q->owner, rcode, a->addrs, a->naddrs, false);
}

static void on_query(struct dnsstub *s, const uint8_t *msg, size_t len,
                     const struct sockaddr_in *from)
{
	struct hutch_dns_question q;
	const struct resolver_cached *ce;
	struct resolver_query *uq = NULL;
	struct hutch_net_owner w = { 0 };
	int64_t at = now_real_ms();
	int r = hutch_dns_parse_query(msg, len, &q);

	if (r == -EBADMSG)
		return; /* not even a header to answer to */
	if (r < 0) {
		stub_reply(s, from, &q, HUTCH_DNS_RCODE_NOTIMP, NULL, 0);
		return;
	}
	ask_owner(s, &w);
	switch (hutch_net_allow_dns(s->policy, q.name, q.qtype, q.qclass)) {
	case HUTCH_NET_DNS_FORWARD:
		uq = resolver_forward(s->resolver, msg, len, q.name, q.qtype, on_forwarded, s);
		break;
	case HUTCH_NET_DNS_NXDOMAIN:
		refusals_add(s->refusals, "dns", q.name, NULL,
		             "name not in the allow list: NXDOMAIN");
		stub_reply(s, from, &q, HUTCH_DNS_RCODE_NXDOMAIN, NULL, 0);
		note(s, &q, at, &w, HUTCH_DNS_RCODE_NXDOMAIN, NULL, 0, true);
		return;
	case HUTCH_NET_DNS_NODATA:
		stub_reply(s, from, &q, HUTCH_DNS_RCODE_NOERROR, NULL, 0);
		note(s, &q, at, &w, HUTCH_DNS_RCODE_NOERROR, NULL, 0, false);
		return;
	case HUTCH_NET_DNS_RESOLVE:
		ce = resolver_cache_find(s->resolver, q.name);
		if (ce) {
			stub_reply(s, from, &q, HUTCH_DNS_RCODE_NOERROR, ce->addrs, ce->naddrs);
			note(s, &q, at, &w, HUTCH_DNS_RCODE_NOERROR, ce->addrs, ce->naddrs, false);
			return;
		}
		uq = resolver_lookup(s->resolver, q.name, on_resolved, s);
		break;
	}
	if (!uq) {
		stub_reply(s, from, &q, HUTCH_DNS_RCODE_SERVFAIL, NULL, 0);
		note(s, &q, at, &w, HUTCH_DNS_RCODE_SERVFAIL, NULL, 0, false);
		return;
	}
	uq->client = *from;
	uq->q = q;
	uq->at_ms = at;
	uq->owner = w;
}

void dnsstub_on_readable(struct dnsstub *s)
{
	uint8_t msg[HUTCH_DNS_MSG_MAX];

	for (int i = 0; i < 64; i++) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(s->fd, msg, sizeof(msg), MSG_TRUNC, (struct sockaddr *)&from,
		                     &flen);
		if (n < 0)
			return;
		if ((size_t)n > sizeof(msg) || flen != sizeof(from) || from.sin_family != AF_INET)
			continue;
		on_query(s, msg, (size_t)n, &from);
	}
}
