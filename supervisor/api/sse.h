/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Server-sent events of POST /run_streaming: a command's output framed as
 * "event: stdout|stderr" with a JSON {"data": text} payload (or base64 of
 * the exact bytes, when asked), then one
 * "exit" (or "error") event. The queue is bounded: the command's pipes are
 * not read while it holds HUTCH_SSE_QUEUE_MAX bytes the client has not
 * taken, so a slow client slows the command instead of growing memory.
 * Pure (no I/O): unit-tested in test_sse.c.
 */
#ifndef HUTCH_SSE_H
#define HUTCH_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "util.h"

#define HUTCH_SSE_QUEUE_MAX (256u << 10)

struct hutch_sse {
	struct hutch_buf q; /* encoded events not yet sent */
	size_t off;         /* of q, sent already */
	bool end_queued;    /* the last event is in q */
	bool base64;        /* output as exact bytes in base64, not as text */
	char carry[2][4];   /* per stream: an incomplete UTF-8 sequence */
	size_t ncarry[2];
};

void hutch_sse_init(struct hutch_sse *e);
void hutch_sse_done(struct hutch_sse *e);
/* Queue one event whose data is the JSON object j (consumed; NULL: none). */
void hutch_sse_event(struct hutch_sse *e, const char *event, cJSON *j);
/* Queue output of stdout or stderr as text: invalid UTF-8 is replaced, an
 * incomplete sequence at the end waits for the next chunk. With base64
 * set, each chunk's exact bytes in base64 instead. */
void hutch_sse_output(struct hutch_sse *e, bool is_err, const char *buf, size_t n);
/* The output ended: queue what incomplete sequences are left. */
void hutch_sse_flush(struct hutch_sse *e);
/* Copy up to max queued bytes to buf; returns how many (0: none queued). */
ssize_t hutch_sse_read(struct hutch_sse *e, char *buf, size_t max);
/* At the bound: stop reading the command's output. */
bool hutch_sse_full(const struct hutch_sse *e);
/* Below half of the bound: the command's output may be read again. */
bool hutch_sse_has_room(const struct hutch_sse *e);

#endif
