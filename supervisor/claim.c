/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The session's clocks: a warm-pool claim (POST /claim; see cli/pool.h for
 * the protocol) applies the per-session options and starts them now;
 * POST /timeout moves the end of the session.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>

#include "claim.h"
#include "cleanup.h"
#include "events.h"
#include "idle.h"
#include "log.h"
#include "options.h"
#include "status.h"
#include "supervisor.h"

/* The session's options from the body onto the sandbox's; what the body
 * leaves out takes its default. Nothing changes on a refused body. */
static int apply_options(struct sup *s, const cJSON *body, struct hutch_err *err)
{
	const struct hutch_option *opts;
	struct hutch_config tmp;
	size_t n;
	int r;

	if (!cJSON_IsObject(body))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "the body must be a JSON object");
	hutch_config_init(&tmp);
	r = hutch_options_from_json(&tmp, body, HUTCH_OPT_SESSION, err);
	/* The fixed options, borrowed for the cross-option rules (the region
	 * rule needs the network); not freed below. */
	hutch_net_policy_done(&tmp.net);
	tmp.net = s->cfg->net;
	if (r >= 0)
		r = hutch_config_validate(&tmp, err);
	tmp.net = (struct hutch_net_policy){ 0 };
	/* A value refused is the caller's: the options say no class. */
	if (r < 0 && err->cls == HUTCH_ERRC_NONE)
		err->cls = HUTCH_ERRC_USAGE;
	/* Accepted: the new values take their place, tmp keeps the old ones
	 * to be freed. */
	opts = hutch_options(&n);
	for (size_t i = 0; r >= 0 && i < n; i++)
		if (opts[i].flags & HUTCH_OPT_SESSION)
			hutch_option_swap(&opts[i], &tmp, s->cfg);
	hutch_config_done(&tmp);
	return r;
}

/* The answer: like `hutch create --json`'s. */
static cJSON *claim_answer(struct sup *s, struct hutch_err *err)
{
	char when[40];
	cJSON *o = cJSON_CreateObject();

	if (!o) {
		hutch_err_set(err, -ENOMEM, "answer");
		return NULL;
	}
	cJSON_AddStringToObject(o, "id", s->id);
	cJSON_AddStringToObject(o, "socket", s->paths.sock);
	cJSON_AddNumberToObject(o, "created_at_unix", (double)s->created_at);
	cJSON_AddNumberToObject(o, "expires_at_unix", (double)s->expires_at);
	hutch_format_time(s->expires_at, when, sizeof(when));
	cJSON_AddStringToObject(o, "expires_at", when);
	cJSON_AddItemToObject(o, "config", hutch_config_to_json(s->cfg));
	return o;
}

int hutch_sup_set_expiry(struct sup *s, uint64_t seconds)
{
	struct itimerspec its = { .it_value.tv_sec = (time_t)seconds };

	if (timerfd_settime(s->ttl_fd, 0, &its, NULL) < 0)
		return -errno;
	s->expires_at = hutch_now_realtime() + (int64_t)seconds;
	return 0;
}

int hutch_sup_claim_start(struct sup *s, const cJSON *body, struct hutch_err *err)
{
	int r;

	if (!s->cfg->pool_key[0])
		return hutch_err_set_class(err, HUTCH_ERRC_CONFLICT, -EALREADY,
		                           "sandbox %s is not a pooled sandbox waiting for a claim",
		                           s->id);
	r = apply_options(s, body, err);
	if (r < 0)
		return r;
	s->cfg->pool_key[0] = '\0';
	hutch_event(s, "claimed from a warm pool: ttl %llu s",
	            (unsigned long long)s->cfg->ttl_seconds);

	/* The session starts now. */
	s->created_at = hutch_now_realtime();
	if (hutch_sup_set_expiry(s, s->cfg->ttl_seconds) < 0)
		hutch_log(HUTCH_LOG_WARN, "claim: re-arm the TTL timer: %m");
	if (hutch_idle_start(s) < 0)
		hutch_log(HUTCH_LOG_WARN, "claim: idle timer: %m");
	(void)hutch_sup_write_state(s, "running");
	return 0;
}

cJSON *hutch_sup_claim(struct sup *s, const cJSON *body, struct hutch_err *err)
{
	return hutch_sup_claim_start(s, body, err) < 0 ? NULL : claim_answer(s, err);
}
