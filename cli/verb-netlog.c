/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch net-log ID [--since SEQ] [--json]: the egress log of a sandbox of
 * network allow or all (GET /v1/net_log; docs/api.md, "The egress log"):
 * one line per connection, allowed or refused, by which rule, its bytes
 * each way and the command that made it; --json the answer as it is.
 */
#include <inttypes.h>
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

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* "cmd 3 (curl ...)", "cmds 3, 4 (shared)" or "no command". */
static void print_owner(const cJSON *rec)
{
	const cJSON *cmds = cJSON_GetObjectItemCaseSensitive(rec, "commands"), *c;
	int n = cJSON_GetArraySize(cmds), i = 0;

	if (n == 0) {
		printf("  no command");
		return;
	}
	printf("  %s", n > 1 ? "cmds" : "cmd");
	cJSON_ArrayForEach(c, cmds) {
		printf("%s%.0f", i++ ? ", " : " ", num(c, "id"));
		if (n == 1 && *str(c, "command"))
			printf(" (%.60s)", str(c, "command"));
	}
	if (n > 1)
		printf(" (shared: told apart by time only)");
}

/* "3 TIME allowed dns api.test.example A -> 198.51.100.10  all  cmd 4". */
static void print_dns(const cJSON *rec)
{
	const cJSON *a, *type = cJSON_GetObjectItemCaseSensitive(rec, "type");
	int i = 0;

	printf("%.0f %s %-7s dns %s ", num(rec, "seq"), str(rec, "time"), str(rec, "verdict"),
	       str(rec, "host"));
	if (cJSON_IsString(type))
		printf("%s", type->valuestring);
	else
		printf("type %.0f", num(rec, "type"));
	printf(" -> %s", str(rec, "answer"));
	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(rec, "addresses"))
		printf("%s%s", i++ ? ", " : " ", cJSON_IsString(a) ? a->valuestring : "?");
	printf("  %s", str(rec, "rule"));
	print_owner(rec);
	printf("\n");
}

static void print_conn(const cJSON *rec)
{
	const char *host = str(rec, "host"), *proto = str(rec, "proto");

	printf("%.0f %s %-7s %s%s%s%s%s %s  %s", num(rec, "seq"), str(rec, "time"),
	       str(rec, "verdict"), proto, *proto ? " " : "", *host ? host : "", *host ? " " : "",
	       str(rec, "address"), str(rec, "kind"), str(rec, "rule"));
	if (!strcmp(str(rec, "verdict"), "refused"))
		printf(": %s", str(rec, "reason"));
	else if (cJSON_GetObjectItemCaseSensitive(rec, "bytes_up"))
		printf("  up %.0f down %.0f", num(rec, "bytes_up"), num(rec, "bytes_down"));
	else
		printf("  (still open at the end)");
	print_owner(rec);
	printf("\n");
}

static void print_record(const cJSON *rec)
{
	if (!strcmp(str(rec, "kind"), "dns")) {
		print_dns(rec);
		return;
	}
	print_conn(rec);
}

static int cmd_net_log(struct hutch_cli_args *a)
{
	struct hutch_paths p;
	_cleanup_cjson_ cJSON *j = NULL;
	char url[96];
	uint64_t since = 0;
	const cJSON *rec;
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch net-log ID "
		                                        "[--since SEQ] [--json]");
	if (a->since && hutch_parse_u64(a->since, 0, UINT64_MAX / 2, &since) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "--since takes a record's number (its seq, 0 or more), not "
		                      "'%s'",
		                      a->since);
	snprintf(url, sizeof(url), "/v1/net_log?since=%" PRIu64, since);
	r = hutch_cli_open_live(a->pos[0], &p);
	if (r)
		return r;
	r = hutch_cli_call_classed(p.sock, "GET", url, NULL, 200, &j);
	if (r)
		return r;
	if (a->json) {
		_cleanup_free_ char *t = j ? cJSON_PrintUnformatted(j) : NULL;
		printf("%s\n", t ? t : "{}");
		return 0;
	}
	if (!strcmp(str(j, "mode"), "none")) {
		printf("network none: no connection can leave this sandbox, nothing is logged\n");
		return 0;
	}
	if (num(j, "dropped") > 0)
		printf("... %.0f older records are no longer kept (see the sandbox's net.jsonl)\n",
		       num(j, "dropped"));
	cJSON_ArrayForEach(rec, cJSON_GetObjectItemCaseSensitive(j, "records"))
		print_record(rec);
	if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "complete")))
		printf("network all: what left through NAT is not logged (this kernel lacks the "
		       "netfilter log or conntrack's events); only host ports and header bindings' "
		       "connections are\n");
	return 0;
}

static const struct hutch_cli_opt net_log_opts[] = {
	{ .name = "since",
	  .kind = HUTCH_CLI_STRING,
	  .offset = offsetof(struct hutch_cli_args, since),
	  .metavar = "SEQ",
	  .help = "from the record of this number on (an earlier answer's \"next\")" },
	{ .name = "json",
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, json),
	  .help = "the answer as JSON: {\"mode\", \"dropped\", \"next\", \"records\": [...]}" },
	{ 0 },
};

const struct hutch_cli_verb hutch_verb_net_log = {
	.name = "net-log",
	.synopsis = "ID [--since SEQ] [--json]",
	.about = "The sandbox's egress log (network allow and all): every connection the\n"
	         "egress proxy decided and, in network all, every TCP or UDP flow that left\n"
	         "through NAT, allowed or refused and by which rule (the allow-list entry,\n"
	         "\"all\", or a refusal's code and reason), the server name and address, bytes\n"
	         "each way at its close (a NAT flow's: IP packets, headers included), and the\n"
	         "command that made it (exact when several run at once, else by time). The\n"
	         "last 1,024 records; all of them in net.jsonl of the sandbox's state dir\n"
	         "(4 MiB, rotated). Never anything of a header binding's value.\n",
	.opts = net_log_opts,
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_net_log,
};
