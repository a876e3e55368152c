/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounded DNS message handling for the DNS stub (queries from inside a
 * sandbox) and the supervisor's resolver (answers from an upstream server).
 * Both directions are hostile input: every read is checked against the
 * message length, name compression is followed a bounded number of times and
 * only backwards. Depends on libc alone (the fuzz target links it).
 */
#ifndef HUTCH_DNS_INTERNAL_H
#define HUTCH_DNS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HUTCH_DNS_MSG_MAX   4096 /* larger messages are refused */
#define HUTCH_DNS_NAME_MAX  253  /* text form, without the trailing dot */
#define HUTCH_DNS_ADDRS_MAX 16

#define HUTCH_DNS_TYPE_A    1
#define HUTCH_DNS_TYPE_AAAA 28
#define HUTCH_DNS_CLASS_IN  1

#define HUTCH_DNS_RCODE_NOERROR  0
#define HUTCH_DNS_RCODE_FORMERR  1
#define HUTCH_DNS_RCODE_SERVFAIL 2
#define HUTCH_DNS_RCODE_NXDOMAIN 3
#define HUTCH_DNS_RCODE_NOTIMP   4
#define HUTCH_DNS_RCODE_REFUSED  5

struct hutch_dns_question {
	uint16_t id;
	uint16_t flags;                    /* header flags as sent (RD is echoed in replies) */
	char name[HUTCH_DNS_NAME_MAX + 1]; /* lowercase, no trailing dot; "" = root */
	uint16_t qtype, qclass;
	size_t end; /* offset just past the question in the message */
};

/* Parse a query: QR clear, opcode QUERY, exactly one question (answer and
 * authority sections empty; an additional section, e.g. EDNS OPT, is
 * allowed and ignored). Returns 0, -EBADMSG if malformed (too short, bad
 * label, a compression pointer in a query, name too long, ...) or -ENOTSUP
 * for a well-formed message we do not serve (a response, another opcode,
 * no or several questions). On -ENOTSUP q->id and q->flags are set when the
 * header was readable, so a reply with NOTIMP/FORMERR can still be built;
 * then name is "", qtype and qclass 0 and end 12 (no question). q is left
 * alone on -EBADMSG. Header counts: ancount and nscount must be 0 (else
 * -ENOTSUP); arcount and any bytes after the question are not looked at. */
int hutch_dns_parse_query(const uint8_t *msg, size_t len, struct hutch_dns_question *q);

/* Build a reply to q: header (same id, QR, RD echoed, RA set, rcode), the
 * question re-encoded from q, and one A record per address (network byte
 * order, owner = the question name through a pointer) with the given TTL.
 * Returns the length written, or 0 if out is too small (or q->name is not
 * a valid name). A q with qtype 0 (as parse_query leaves it on -ENOTSUP)
 * gets a reply without question and without answers (qdcount 0). The
 * opcode is echoed with RD; rcode is taken modulo 16. Bytes of out may be
 * written even when 0 is returned, never past outsz. */
size_t hutch_dns_build_reply(const struct hutch_dns_question *q, int rcode, const uint32_t *addrs,
                             size_t naddrs, uint32_t ttl, uint8_t *out, size_t outsz);

/* Build a recursive query (RD set) for name/qtype, class IN. Returns the
 * length written, or 0 if the name is invalid or out too small. name may
 * carry one trailing dot and any case; "" or "." is the root. */
size_t hutch_dns_build_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *out,
                             size_t outsz);

struct hutch_dns_answer {
	int rcode;
	bool truncated; /* TC bit */
	size_t naddrs;  /* A records found (at most HUTCH_DNS_ADDRS_MAX kept) */
	uint32_t addrs[HUTCH_DNS_ADDRS_MAX]; /* network byte order */
	uint32_t ttl;                        /* smallest TTL of the records used, 0 if none */
};

/* Parse an upstream response and check that it answers exactly the query
 * (id, QR set, opcode, one question equal to name/qtype/IN, compared
 * case-insensitively). Collects the A records of the answer section whose
 * owner is the name or a name reached from it through CNAME records in the
 * same section. Returns 0, -EBADMSG if malformed, -ESRCH if it does not
 * answer this query (also when name itself is not a valid name). ret is
 * written only on 0.
 * Details: the question may use compression (pointers strictly backwards,
 * at most 16 hops per name); the CNAME chain is followed at most 8 links
 * and stops quietly at a loop; naddrs is the number kept (never more than
 * HUTCH_DNS_ADDRS_MAX) and only kept A records and followed CNAMEs count
 * for ttl; TTLs above 2^31 - 1 count as 0 (RFC 2181 §8); an IN-class A
 * record on the chain whose rdlength is not 4 is -EBADMSG; with TC set, the
 * walk stops at the first answer that does not parse instead of failing;
 * the authority and additional sections are not looked at. */
int hutch_dns_parse_response(const uint8_t *msg, size_t len, uint16_t id, const char *name,
                             uint16_t qtype, struct hutch_dns_answer *ret);

#endif
