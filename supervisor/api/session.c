/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's own endpoints (docs/api.md): GET /health, GET /status,
 * POST /claim (a pooled sandbox starts its session: claim.c), POST
 * /timeout (the session ends that long from now), DELETE / (waits for the
 * teardown, answered by hutch_api_sandbox_ended()), GET /v1/net_log (the
 * egress log: supervisor/netlog.c).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "claim.h"
#include "cleanup.h"
#include "config.h"
#include "events.h"
#include "fields.h"
#include "mhd.h"
#include "netlog.h"
#include "routes.h"
#include "stats.h"
#include "status.h"
#include "supervisor.h"

enum MHD_Result hutch_api_serve_health(struct request *r, const char *upload, size_t *size)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "status", r->s->state == SUP_RUNNING ? "ok" : "closing");
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, o);
}

enum MHD_Result hutch_api_serve_status(struct request *r, const char *upload, size_t *size)
{
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, hutch_sup_status_json(r->s));
}

enum MHD_Result hutch_api_serve_stats(struct request *r, const char *upload, size_t *size)
{
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, hutch_sup_stats_json(r->s));
}

enum MHD_Result hutch_api_serve_delete(struct request *r, const char *upload, size_t *size)
{
	struct sup *s = r->s;
	cJSON *o;

	if (s->state == SUP_GONE) {
		o = cJSON_CreateObject();
		r->answered = true;
		cJSON_AddStringToObject(o, "id", s->id);
		cJSON_AddBoolToObject(o, "deleted", true);
		return hutch_api_respond_json(r->conn, MHD_HTTP_OK, o);
	}
	if (s->state != SUP_RUNNING)
		return hutch_api_respond_ended(r->conn, s);
	hutch_api_wait_end(r);
	return MHD_YES;
}

enum MHD_Result hutch_api_serve_claim(struct request *r, const char *upload, size_t *size)
{
	_cleanup_cjson_ cJSON *body = cJSON_ParseWithLength(r->body.data ? r->body.data : "{}",
	                                                    r->body.data ? r->body.len : 2);
	struct hutch_err err = { 0 };
	cJSON *o;

	if (!body)
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_json",
		                        "the body is not JSON");
	o = hutch_sup_claim(r->s, body, &err);
	if (!o)
		return hutch_api_respond_err(r->conn, &err,
		                             hutch_err_class(&err) == HUTCH_ERRC_CONFLICT
		                                     ? "not_pooled"
		                                     : "invalid_request");
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, o);
}

static const struct hutch_field timeout_fields[] = {
	{ "timeout_seconds", HUTCH_FIELD_INTEGER, HUTCH_FIELD_REQUIRED, 1, (double)HUTCH_MAX_TTL,
	  "'timeout_seconds' must be whole seconds from 1 to {max} (366 days): how long from now "
	  "until the sandbox is deleted" },
};

enum MHD_Result hutch_api_serve_timeout(struct request *r, const char *upload, size_t *size)
{
	const char *text = r->body.data ? r->body.data : "";
	_cleanup_cjson_ cJSON *body = NULL;
	struct hutch_err err = { 0 };
	char when[40];
	uint64_t secs;
	cJSON *o;
	int e;

	if (hutch_fields_check_text(text, r->body.len, &err) < 0)
		return hutch_api_respond_err(r->conn, &err, "invalid_request");
	body = cJSON_ParseWithLength(text, r->body.len);
	if (!cJSON_IsObject(body))
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_json",
		                        "the body must be a JSON object: "
		                        "{\"timeout_seconds\": 3600}");
	if (hutch_fields_check(body, timeout_fields, ELEMENTSOF(timeout_fields),
	                       HUTCH_FIELDS_LIST_KNOWN, &err) < 0)
		return hutch_api_respond_err(r->conn, &err, "invalid_request");
	secs = (uint64_t)cJSON_GetObjectItemCaseSensitive(body, "timeout_seconds")->valuedouble;
	e = hutch_sup_set_expiry(r->s, secs);
	if (e < 0)
		return hutch_api_refuse(r->conn, HUTCH_ERRC_INTERNAL, "internal",
		                        "cannot re-arm the TTL timer: %s", strerror(-e));
	(void)hutch_sup_write_state(r->s, "running");
	hutch_event(r->s, "timeout set: deleted in %llu s", (unsigned long long)secs);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "id", r->s->id);
	hutch_format_time(r->s->expires_at, when, sizeof(when));
	cJSON_AddStringToObject(o, "expires_at", when);
	cJSON_AddNumberToObject(o, "expires_at_unix", (double)r->s->expires_at);
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, o);
}

/* GET /v1/net_log[?since=SEQ][&limit=N]: the egress log's records from seq
 * since on (supervisor/netlog.h). */
enum MHD_Result hutch_api_serve_net_log(struct request *r, const char *upload, size_t *size)
{
	const char *since =
	        hutch_mhd.lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "since");
	const char *limit =
	        hutch_mhd.lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "limit");
	uint64_t from = 0, max = HUTCH_NETLOG_RING;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;

	if (since && hutch_parse_u64(since, 0, UINT64_MAX / 2, &from) < 0)
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		                        "'since' must be a record's seq, a number >= 0 "
		                        "(got '%.32s')",
		                        since);
	if (limit && hutch_parse_u64(limit, 1, HUTCH_NETLOG_RING, &max) < 0)
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		                        "'limit' must be a number from 1 to %d (got '%.32s')",
		                        HUTCH_NETLOG_RING, limit);
	text = hutch_netlog_answer(r->s, from, (size_t)max, &len);
	if (!text)
		return hutch_api_refuse(r->conn, HUTCH_ERRC_INTERNAL, "internal", "out of memory");
	return hutch_api_respond_buffer(r->conn, MHD_HTTP_OK, "application/json", text, len);
}
