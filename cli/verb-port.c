/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch port ID [SANDBOX_PORT]: where a sandbox's published ports are on
 * the host, as docker port prints them ("8000/tcp -> 127.0.0.1:18080"; with
 * a port, only the host addresses). Read live from GET /status, so ports
 * bound later (POST /bind_port, Python's expose_port) show too.
 */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "state.h"
#include "stream.h"
#include "util.h"
#include "verbs.h"

/* "80" or "80/tcp"; 0 if neither. */
static unsigned parse_port(const char *s)
{
	char buf[16];
	const char *slash = strchr(s, '/');
	uint64_t v;

	if (slash && strcmp(slash, "/tcp") != 0)
		return 0;
	snprintf(buf, sizeof(buf), "%.*s", slash ? (int)(slash - s) : (int)strlen(s), s);
	return hutch_parse_u64(buf, 1, 65535, &v) < 0 ? 0 : (unsigned)v;
}

static int cmd_port(struct hutch_cli_args *a)
{
	struct hutch_paths p;
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };
	_cleanup_cjson_ cJSON *st = NULL, *out = NULL;
	const cJSON *ports, *it;
	unsigned want = 0, found = 0;
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch port ID [PORT]");
	if (a->npos > 1 && !(want = parse_port(a->pos[1])))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "invalid port '%s': give a sandbox TCP port, 1 to 65535 "
		                      "(80 or 80/tcp)",
		                      a->pos[1]);
	/* A sandbox whose supervisor is gone is said so (66, 'hutch gc'),
	 * not as a refused connection (70). */
	r = hutch_cli_open_live(a->pos[0], &p);
	if (r)
		return r;
	r = hutch_client_request(p.sock, "GET", "/status", NULL, 0, &resp, &err);
	if (r < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "sandbox %s: %s", p.id, err.msg);
	if (resp.status != 200) {
		r = hutch_cli_api_error(resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return r;
	}
	st = cJSON_ParseWithLength(resp.body.data, resp.body.len);
	hutch_http_resp_done(&resp);
	ports = cJSON_GetObjectItemCaseSensitive(st, "ports");
	out = cJSON_CreateArray();
	cJSON_ArrayForEach(it, ports) {
		const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "sandbox_port");
		const char *host =
		        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "host"));
		if (!cJSON_IsNumber(sp) || !host || (want && sp->valueint != (int)want))
			continue;
		found++;
		if (a->json)
			cJSON_AddItemToArray(out, cJSON_Duplicate(it, true));
		else if (want)
			printf("%s\n", host);
		else
			printf("%d/tcp -> %s\n", sp->valueint, host);
	}
	if (a->json) {
		_cleanup_free_ char *t = cJSON_Print(out);
		printf("%s\n", t ? t : "[]");
	}
	/* Nothing published there: a lookup that found nothing, not found
	 * (docs/errors.md; 70 until the CLI's error paths were each tested). */
	if (want && !found)
		return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND,
		                      "no host port for port %u/tcp of sandbox %s: publish it with "
		                      "'hutch create -p HOST_PORT:%u' or POST /bind_port",
		                      want, p.id, want);
	return 0;
}

const struct hutch_cli_verb hutch_verb_port = {
	.name = "port",
	.synopsis = "ID [SANDBOX_PORT] [--json]",
	.about = "Print where a sandbox's ports are published on the host: every forward as\n"
	         "'PORT/tcp -> HOST:HOST_PORT', or with SANDBOX_PORT only its host addresses\n"
	         "(exit 65 when none). Forwards come from 'create -p' and POST /bind_port.\n",
	.opts = hutch_cli_json_opts,
	.help_pool = HUTCH_CLI_POOL_OF(hutch_cli_json_pool),
	.max_pos = 2,
	.id_pos = 1,
	.run = cmd_port,
};
