/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the DNS wire format (scripts/fuzz): the input as a
 * query (and the reply built from it, into buffers of exactly the needed
 * size and one byte less, parsed back as a response), and as a response
 * to a fixed question. Results must be documented codes; round trips must
 * agree.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dns-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint32_t addrs[3] = { 0x0100000a, 0x0200000a, 0x0300000a };

/* The reply to a parsed query, into exactly-sized heap buffers so ASan
 * sees a write past outsz; parsed back as a response when it is an A
 * question of class IN. */
static void reply_round_trip(const struct hutch_dns_question *q)
{
	uint8_t big[1024], *tight;
	struct hutch_dns_answer a;
	size_t n =
	        hutch_dns_build_reply(q, HUTCH_DNS_RCODE_NOERROR, addrs, 3, 60, big, sizeof(big));

	if (n == 0)
		abort(); /* every parsed name fits 1024 bytes */
	tight = malloc(n);
	if (!tight)
		return;
	if (hutch_dns_build_reply(q, 0, addrs, 3, 60, tight, n) != n || memcmp(tight, big, n))
		abort();
	if (hutch_dns_build_reply(q, 0, addrs, 3, 60, tight, n - 1) != 0)
		abort();
	free(tight);
	if (q->qtype != HUTCH_DNS_TYPE_A || q->qclass != HUTCH_DNS_CLASS_IN)
		return;
	if (hutch_dns_parse_response(big, n, q->id, q->name, q->qtype, &a) != 0 || a.naddrs != 3 ||
	    a.ttl != 60 || memcmp(a.addrs, addrs, sizeof(addrs)) != 0)
		abort();
}

/* A query built from the parsed name parses back to the same question. */
static void query_round_trip(const struct hutch_dns_question *q)
{
	uint8_t out[300];
	struct hutch_dns_question back;
	size_t n = hutch_dns_build_query(q->id, q->name, q->qtype, out, sizeof(out));

	if (n == 0 || hutch_dns_parse_query(out, n, &back) != 0 || back.id != q->id ||
	    strcmp(back.name, q->name) != 0 || back.qtype != q->qtype || back.end != n)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hutch_dns_question q;
	struct hutch_dns_answer a;
	int r = hutch_dns_parse_query(data, size, &q);

	if (r == 0) {
		if (q.end > size || strlen(q.name) > HUTCH_DNS_NAME_MAX)
			abort();
		reply_round_trip(&q);
		query_round_trip(&q);
	} else if (r == -ENOTSUP) {
		uint8_t out[12];

		if (hutch_dns_build_reply(&q, HUTCH_DNS_RCODE_NOTIMP, NULL, 0, 0, out,
		                          sizeof(out)) != sizeof(out))
			abort();
	} else if (r != -EBADMSG) {
		abort();
	}
	/* As a response: the id is the input's, so the header check passes
	 * and the fuzzer reaches the question and answers. */
	r = hutch_dns_parse_response(data, size, size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0,
	                             "www.example.com", HUTCH_DNS_TYPE_A, &a);
	if (r == 0 && a.naddrs > HUTCH_DNS_ADDRS_MAX)
		abort();
	if (r != 0 && r != -EBADMSG && r != -ESRCH)
		abort();
	return 0;
}
