/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's own endpoints (docs/api.md): GET /health, GET /status,
 * POST /claim (a pooled sandbox starts its session: claim.c), DELETE /
 * (waits for the teardown, answered by hutch_api_sandbox_ended()).
 */
#include <errno.h>

#include "claim.h"
#include "cleanup.h"
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
		return hutch_api_respond_json(r->conn, MHD_HTTP_GONE, hutch_api_ended_json(s));
	s->delete_pending = true;
	r->next_waiter = s->waiters;
	s->waiters = r;
	hutch_api_suspend(r);
	return MHD_YES;
}

enum MHD_Result hutch_api_serve_claim(struct request *r, const char *upload, size_t *size)
{
	_cleanup_cjson_ cJSON *body = cJSON_ParseWithLength(r->body.data ? r->body.data : "{}",
	                                                    r->body.data ? r->body.len : 2);
	struct hutch_err err = { 0 };
	cJSON *o;

	if (!body)
		return hutch_api_respond_error(r->conn, MHD_HTTP_BAD_REQUEST, "invalid_json",
		                               "the body is not JSON");
	o = hutch_sup_claim(r->s, body, &err);
	if (!o)
		return hutch_api_respond_error(
		        r->conn, err.code == -EALREADY ? MHD_HTTP_CONFLICT : MHD_HTTP_BAD_REQUEST,
		        err.code == -EALREADY ? "not_pooled" : "invalid_request", "%s", err.msg);
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, o);
}
