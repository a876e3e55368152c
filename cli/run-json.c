/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run --json and exec --json: the command's output is kept instead of
 * written out, and one JSON object says how it went: the fields of the
 * API's /run answer (status, exit_code, signal, signal_name, timed_out,
 * oom_killed, duration_ms, message; stdout, stderr and *_truncated), the
 * bytes each stream wrote in all (*_bytes, counted past the kept part) and
 * the sandbox's id. Output is text when both streams are valid UTF-8
 * without NUL bytes, else both are base64 with "encoding": "base64", so
 * nothing is lost or altered silently. At most max_output_bytes of each
 * stream are kept (the sandbox's --max-output, 4 MiB by default), as /run
 * keeps them; the rest is counted and dropped.
 */
#include <stdio.h>
#include <string.h>

#include "base64.h"
#include "cleanup.h"
#include "cli.h"
#include "state.h"
#include "stream.h"

void hutch_cli_capture_init(struct hutch_cli_capture *c, uint64_t max_bytes)
{
	memset(c, 0, sizeof(*c));
	hutch_buf_init(&c->out, (size_t)max_bytes);
	hutch_buf_init(&c->err, (size_t)max_bytes);
}

void hutch_cli_capture_done(struct hutch_cli_capture *c)
{
	hutch_buf_done(&c->out);
	hutch_buf_done(&c->err);
	cJSON_Delete(c->result);
	c->result = NULL;
}

uint64_t hutch_cli_capture_limit(const struct hutch_paths *p)
{
	_cleanup_cjson_ cJSON *state = NULL;
	const cJSON *max;

	if (hutch_state_read(p, &state) < 0)
		return HUTCH_CLI_CAPTURE_DEFAULT;
	max = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(state, "config"),
	                                       "max_output_bytes");
	if (!cJSON_IsNumber(max) || max->valuedouble < 0)
		return HUTCH_CLI_CAPTURE_DEFAULT;
	return (uint64_t)max->valuedouble;
}

/* Valid UTF-8 without NUL bytes (a cut at the cap of a truncated stream
 * may split the last character: those bytes are dropped, *len says how
 * many are kept). */
static bool is_text(const struct hutch_buf *b, size_t *len)
{
	size_t carry = 0;
	_cleanup_free_ char *clean = hutch_utf8_sanitize(b->data ? b->data : "", b->len, &carry);

	if (!clean || (carry && !b->truncated))
		return false;
	*len = b->len - carry;
	return strlen(clean) == *len && !memcmp(clean, b->data ? b->data : "", *len);
}

static int add_stream(cJSON *o, const char *key, const struct hutch_buf *b, bool text, size_t len)
{
	_cleanup_free_ char *s = NULL;
	char k[32];

	if (text)
		s = strndup(b->data ? b->data : "", len);
	else
		s = hutch_base64_encode(b->data ? b->data : "", b->len);
	if (!s || !cJSON_AddStringToObject(o, key, s))
		return -1;
	snprintf(k, sizeof(k), "%s_bytes", key);
	cJSON_AddNumberToObject(o, k, (double)b->total);
	snprintf(k, sizeof(k), "%s_truncated", key);
	cJSON_AddBoolToObject(o, k, b->truncated);
	return 0;
}

int hutch_cli_capture_print(struct hutch_cli_capture *c, const char *sandbox_id)
{
	_cleanup_cjson_ cJSON *o = cJSON_CreateObject();
	_cleanup_free_ char *t = NULL;
	size_t out_len = 0, err_len = 0;
	bool text = is_text(&c->out, &out_len) && is_text(&c->err, &err_len);
	cJSON *item, *sandbox;

	if (!o || !c->result)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	/* The sandbox as docs/sandbox.schema.json names it ("id"), and
	 * "sandbox_id", its older alias. */
	sandbox = cJSON_AddObjectToObject(o, "sandbox");
	if (!sandbox || !cJSON_AddStringToObject(sandbox, "id", sandbox_id))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	cJSON_AddStringToObject(o, "sandbox_id", sandbox_id);
	/* The exit frame's fields, in its order, then the output. */
	while ((item = c->result->child)) {
		cJSON_DetachItemViaPointer(c->result, item);
		cJSON_AddItemToObject(o, item->string, item);
	}
	if (add_stream(o, "stdout", &c->out, text, out_len) < 0 ||
	    add_stream(o, "stderr", &c->err, text, err_len) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if (!text)
		cJSON_AddStringToObject(o, "encoding", "base64");
	t = cJSON_Print(o);
	if (!t)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	printf("%s\n", t);
	return 0;
}
