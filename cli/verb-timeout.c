/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch set-timeout ID SECONDS: the sandbox is deleted SECONDS from now
 * (POST /timeout), longer or shorter than its TTL said; E2B's
 * set_timeout().
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "config.h"
#include "state.h"
#include "stream.h"
#include "util.h"
#include "verbs.h"

static int cmd_set_timeout(struct hutch_cli_args *a)
{
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };
	struct hutch_paths p;
	_cleanup_cjson_ cJSON *j = NULL;
	const cJSON *when;
	char body[64];
	uint64_t secs;
	int r;

	if (a->npos < 2)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing %s: hutch set-timeout ID SECONDS",
		                      a->npos ? "seconds" : "sandbox id");
	if (hutch_parse_u64(a->pos[1], 1, HUTCH_MAX_TTL, &secs) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "invalid timeout '%s': give whole seconds from 1 to %llu "
		                      "(366 days), how long from now until the sandbox is deleted",
		                      a->pos[1], (unsigned long long)HUTCH_MAX_TTL);
	r = hutch_cli_open_live(a->pos[0], &p);
	if (r)
		return r;
	snprintf(body, sizeof(body), "{\"timeout_seconds\": %" PRIu64 "}", secs);
	r = hutch_client_request(p.sock, "POST", "/timeout", body, strlen(body), &resp, &err);
	if (r < 0)
		return hutch_cli_lost(p.sock, r, err.msg);
	if (resp.status != 200) {
		r = hutch_cli_api_error(resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return r;
	}
	j = cJSON_ParseWithLength(resp.body.data, resp.body.len);
	hutch_http_resp_done(&resp);
	when = cJSON_GetObjectItemCaseSensitive(j, "expires_at");
	if (a->json) {
		_cleanup_free_ char *t = j ? cJSON_PrintUnformatted(j) : NULL;
		printf("%s\n", t ? t : "{}");
	} else {
		printf("%s\n", cJSON_IsString(when) ? when->valuestring : "");
	}
	return 0;
}

const struct hutch_cli_verb hutch_verb_set_timeout = {
	.name = "set-timeout",
	.synopsis = "ID SECONDS [--json]",
	.about = "Delete the sandbox SECONDS from now instead of when its TTL said (longer or\n"
	         "shorter; at most 366 days). Prints the new expiry time.\n",
	.opts = hutch_cli_json_opts,
	.max_pos = 2,
	.id_pos = 1,
	.run = cmd_set_timeout,
};
