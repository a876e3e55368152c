/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The refusal log of the DNS stub and the proxy (refusals-internal.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "refusals-internal.h"

void refusals_fmt_addr(const struct sockaddr_in *sa, char *buf, size_t size)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
	snprintf(buf, size, "%s:%u", ip, ntohs(sa->sin_port));
}

void refusals_add(struct refusals *log, const char *what, const char *host,
                  const struct sockaddr_in *addr, const char *fmt, ...)
{
	struct refusal *r = &log->ring[log->n % HUTCH_EGRESS_REFUSED_LOG];
	struct timespec ts;
	va_list ap;

	memset(r, 0, sizeof(*r));
	if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
		r->at_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	snprintf(r->what, sizeof(r->what), "%s", what);
	snprintf(r->host, sizeof(r->host), "%s", host ? host : "");
	if (addr)
		refusals_fmt_addr(addr, r->address, sizeof(r->address));
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
	log->n++;
}

void refusals_to_json(const struct refusals *log, cJSON *o)
{
	uint64_t first = log->n > HUTCH_EGRESS_REFUSED_LOG ? log->n - HUTCH_EGRESS_REFUSED_LOG : 0;
	cJSON *arr;

	cJSON_AddNumberToObject(o, "refused_total", (double)log->n);
	arr = cJSON_AddArrayToObject(o, "refused");
	for (uint64_t i = first; arr && i < log->n; i++) {
		const struct refusal *r = &log->ring[i % HUTCH_EGRESS_REFUSED_LOG];
		cJSON *item = cJSON_CreateObject();
		if (!item)
			break;
		cJSON_AddNumberToObject(item, "at", (double)r->at_ms / 1000.0);
		cJSON_AddStringToObject(item, "what", r->what);
		cJSON_AddStringToObject(item, "host", r->host);
		cJSON_AddStringToObject(item, "address", r->address);
		cJSON_AddStringToObject(item, "reason", r->reason);
		cJSON_AddItemToArray(arr, item);
	}
}

void refusals_verdict(struct refusals *log, struct refusal_verdict *v, const char *what,
                      const char *host, const struct sockaddr_in *addr, const char *code,
                      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
	v->refused = true;
	snprintf(v->rule, sizeof(v->rule), "%s", code);
	refusals_add(log, what, host, addr, "%s", v->reason);
}
