/* SPDX-License-Identifier: Apache-2.0 */
/* Server-sent events of /run_streaming; see sse.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "cleanup.h"
#include "sse.h"

void hutch_sse_init(struct hutch_sse *e)
{
	*e = (struct hutch_sse){ 0 };
	hutch_buf_init(&e->q, SIZE_MAX);
}

void hutch_sse_done(struct hutch_sse *e)
{
	hutch_buf_done(&e->q);
}

void hutch_sse_event(struct hutch_sse *e, const char *event, cJSON *j)
{
	_cleanup_free_ char *text = j ? cJSON_PrintUnformatted(j) : NULL;
	char head[64];

	cJSON_Delete(j);
	snprintf(head, sizeof(head), "event: %s\ndata: ", event);
	(void)hutch_buf_append(&e->q, head, strlen(head));
	if (text)
		(void)hutch_buf_append(&e->q, text, strlen(text));
	(void)hutch_buf_append(&e->q, "\n\n", 2);
}

static void output(struct hutch_sse *e, bool is_err, const char *data, size_t len, bool last)
{
	char *carry = e->carry[is_err];
	size_t *ncarry = &e->ncarry[is_err];
	_cleanup_free_ char *joined = NULL, *clean = NULL;
	size_t total = *ncarry + len, rest = 0;
	cJSON *o;

	joined = malloc(total ? total : 1);
	if (!joined)
		return;
	memcpy(joined, carry, *ncarry);
	memcpy(joined + *ncarry, data, len);
	clean = hutch_utf8_sanitize(joined, total, last ? NULL : &rest);
	if (!clean)
		return;
	if (rest > 3)
		rest = 0;
	memcpy(carry, joined + total - rest, rest);
	*ncarry = rest;
	if (!*clean)
		return;
	o = cJSON_CreateObject();
	if (!o)
		return;
	cJSON_AddStringToObject(o, "data", clean);
	hutch_sse_event(e, is_err ? "stderr" : "stdout", o);
}

void hutch_sse_output(struct hutch_sse *e, bool is_err, const char *buf, size_t n)
{
	_cleanup_free_ char *b64 = NULL;
	cJSON *o;

	if (!e->base64) {
		output(e, is_err, buf, n, false);
		return;
	}
	b64 = hutch_base64_encode(buf, n);
	o = b64 ? cJSON_CreateObject() : NULL;
	if (!o)
		return;
	cJSON_AddStringToObject(o, "data", b64);
	hutch_sse_event(e, is_err ? "stderr" : "stdout", o);
}

void hutch_sse_flush(struct hutch_sse *e)
{
	for (int i = 0; i < 2; i++)
		if (e->ncarry[i])
			output(e, i, "", 0, true);
}

ssize_t hutch_sse_read(struct hutch_sse *e, char *buf, size_t max)
{
	size_t avail = e->q.len - e->off, n = avail < max ? avail : max;

	if (!n)
		return 0;
	memcpy(buf, e->q.data + e->off, n);
	e->off += n;
	if (e->off == e->q.len) {
		e->q.len = 0;
		e->off = 0;
		e->q.total = 0;
		e->q.truncated = false;
	} else if (e->off >= HUTCH_SSE_QUEUE_MAX / 2) {
		/* Compact: a client that never quite catches up must not make
		 * the buffer grow with everything ever sent. */
		memmove(e->q.data, e->q.data + e->off, e->q.len - e->off);
		e->q.len -= e->off;
		e->off = 0;
	}
	return (ssize_t)n;
}

bool hutch_sse_has_room(const struct hutch_sse *e)
{
	return e->q.len - e->off < HUTCH_SSE_QUEUE_MAX / 2;
}

bool hutch_sse_full(const struct hutch_sse *e)
{
	return e->q.len - e->off >= HUTCH_SSE_QUEUE_MAX;
}
