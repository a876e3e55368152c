/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's side of a warm-pool claim (POST /claim; see cli/pool.h
 * for the protocol): the per-session options are applied and the session's
 * clocks start now.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>

#include "claim.h"
#include "cleanup.h"
#include "idle.h"
#include "log.h"
#include "status.h"
#include "supervisor.h"

cJSON *hutch_sup_claim(struct sup *s, const cJSON *body, struct hutch_err *err)
{
	static const char *const keys[] = { "ttl_seconds", "idle_timeout_seconds",
		                            "max_output_bytes", "region", "on_destroy" };
	struct hutch_config tmp;
	struct itimerspec its = { 0 };
	const cJSON *it;
	cJSON *o;
	char num[32];
	int r = 0;

	if (!s->cfg->pool_key[0]) {
		hutch_err_set(err, -EALREADY,
		              "sandbox %s is not a pooled sandbox waiting for a claim", s->id);
		return NULL;
	}
	if (!cJSON_IsObject(body)) {
		hutch_err_set(err, -EINVAL, "the body must be a JSON object");
		return NULL;
	}
	cJSON_ArrayForEach(it, body) {
		bool known = false;
		for (size_t i = 0; i < ELEMENTSOF(keys); i++)
			known = known || !strcmp(it->string, keys[i]);
		if (!known) {
			hutch_err_set(err, -EINVAL, "unknown field '%s'", it->string);
			return NULL;
		}
	}
	hutch_config_init(&tmp);
	tmp.type = s->cfg->type;
	tmp.net = s->cfg->net; /* borrowed for the region rule; not freed below */
	cJSON_ArrayForEach(it, body) {
		const char *v = cJSON_GetStringValue(it);
		if (cJSON_IsNumber(it)) {
			snprintf(num, sizeof(num), "%.0f", it->valuedouble);
			v = num;
		}
		r = v ? hutch_config_set(&tmp, it->string, v, err)
		      : hutch_err_set(err, -EINVAL, "field '%s' has the wrong type", it->string);
		if (r < 0)
			break;
	}
	if (r >= 0)
		r = hutch_config_validate(&tmp, err);
	tmp.net = (struct hutch_net_policy){ 0 };
	if (r < 0) {
		hutch_config_done(&tmp);
		return NULL;
	}
	s->cfg->ttl_seconds = tmp.ttl_seconds;
	s->cfg->idle_timeout_seconds = tmp.idle_timeout_seconds;
	s->cfg->max_output_bytes = tmp.max_output_bytes;
	memcpy(s->cfg->region, tmp.region, sizeof(s->cfg->region));
	free(s->cfg->on_destroy);
	s->cfg->on_destroy = TAKE_PTR(tmp.on_destroy);
	hutch_config_done(&tmp);
	s->cfg->pool_key[0] = '\0';

	/* The session starts now. */
	s->created_at = hutch_now_realtime();
	s->expires_at = s->created_at + (int64_t)s->cfg->ttl_seconds;
	its.it_value.tv_sec = (time_t)s->cfg->ttl_seconds;
	if (timerfd_settime(s->ttl_fd, 0, &its, NULL) < 0)
		hutch_log(HUTCH_LOG_WARN, "claim: re-arm the TTL timer: %m");
	if (hutch_idle_start(s) < 0)
		hutch_log(HUTCH_LOG_WARN, "claim: idle timer: %m");
	(void)hutch_sup_write_state(s, "running");
	o = cJSON_CreateObject();
	if (!o) {
		hutch_err_set(err, -ENOMEM, "answer");
		return NULL;
	}
	cJSON_AddStringToObject(o, "id", s->id);
	cJSON_AddStringToObject(o, "socket", s->paths.sock);
	cJSON_AddNumberToObject(o, "created_at_unix", (double)s->created_at);
	cJSON_AddNumberToObject(o, "expires_at_unix", (double)s->expires_at);
	{
		char when[40];
		hutch_format_time(s->expires_at, when, sizeof(when));
		cJSON_AddStringToObject(o, "expires_at", when);
	}
	cJSON_AddItemToObject(o, "config", hutch_config_to_json(s->cfg));
	return o;
}
