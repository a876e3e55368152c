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
	r = hutch_cli_call(p.sock, "POST", "/timeout", body, 200, &j);
	if (r)
		return r;
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
	.help_pool = HUTCH_CLI_POOL_OF(hutch_cli_json_pool),
	.max_pos = 2,
	.id_pos = 1,
	.run = cmd_set_timeout,
};
