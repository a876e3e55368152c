/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch diff ID [--since SNAPSHOT|COMMAND | --process PROC] [--json]: what
 * changed in the sandbox's /workspace, /home/appuser and /tmp since it
 * started, since a snapshot of it, since the start of the command of a
 * journal line or of a background process (running: what it changed so far)
 * (POST /diff; docs/api.md, "hutch diff"). One line per path: "+" created,
 * "~" modified (and what), "-" deleted; --json the answer as it is.
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

static void print_list(const cJSON *ch, const char *name, char mark)
{
	const cJSON *e, *w;

	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(ch, name)) {
		const cJSON *path = cJSON_GetObjectItemCaseSensitive(e, "path");
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
		const cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
		char what[64] = "";
		size_t n = 0;

		cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(e, "what"))
			if (cJSON_IsString(w) && n < sizeof(what))
				n += (size_t)snprintf(what + n, sizeof(what) - n, "%s%s",
				                      n ? ", " : " (", w->valuestring);
		if (n && n < sizeof(what) - 1)
			strcat(what, ")");
		printf("%c %s  %s %.0f%s\n", mark, cJSON_IsString(path) ? path->valuestring : "?",
		       cJSON_IsString(type) ? type->valuestring : "?",
		       cJSON_IsNumber(size) ? size->valuedouble : 0, what);
	}
}

static int cmd_diff(struct hutch_cli_args *a)
{
	struct hutch_paths p;
	_cleanup_cjson_ cJSON *j = NULL, *body = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;
	const cJSON *ch, *om;
	uint64_t seq;
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch diff ID "
		                                        "[--since SNAPSHOT|COMMAND]");
	if (!body)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if (a->since && !*a->since)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "empty --since: give a snapshot's name or a journal line's "
		                      "number (hutch journal ID)");
	if (a->since && a->process)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "--since and --process do not go together");
	if (a->process && !*a->process)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "empty --process: give a background "
		                                        "process's id (hutch ps ID)");
	if (a->process)
		cJSON_AddStringToObject(body, "since_process", a->process);
	if (a->since && hutch_parse_u64(a->since, 0, UINT64_MAX, &seq) == 0)
		cJSON_AddNumberToObject(body, "since_command", (double)seq);
	else if (a->since)
		cJSON_AddStringToObject(body, "since_snapshot", a->since);
	text = cJSON_PrintUnformatted(body);
	r = hutch_cli_open_live(a->pos[0], &p);
	if (r)
		return r;
	/* 404: 65; not_capable: 69 (docs/errors.md) */
	r = hutch_cli_call(p.sock, "POST", "/v1/diff", text, 200, &j);
	if (r)
		return r;
	if (a->json) {
		_cleanup_free_ char *t = j ? cJSON_PrintUnformatted(j) : NULL;
		printf("%s\n", t ? t : "{}");
		return 0;
	}
	ch = cJSON_GetObjectItemCaseSensitive(j, "changes");
	print_list(ch, "created", '+');
	print_list(ch, "modified", '~');
	print_list(ch, "deleted", '-');
	om = cJSON_GetObjectItemCaseSensitive(ch, "omitted");
	if (cJSON_IsNumber(om) && om->valuedouble > 0)
		printf("... %.0f more not listed (at most 1,000 are)\n", om->valuedouble);
	if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(ch, "complete")))
		printf("incomplete: the kernel's event queue overflowed, or the history reached "
		       "its bound\n");
	return 0;
}

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                            \
	X(since, "from a snapshot of this sandbox (its name), or from the start of the command " \
	         "of a journal line (its number: hutch journal ID); default: the sandbox's "     \
	         "start")                                                                        \
	X(process, "from the start of background process PROC (hutch ps ID), running or ended: " \
	           "what changed since it started (its own list comes with its record at its "   \
	           "exit)")                                                                      \
	X(json, "the answer as JSON: {\"changes\": {\"created\", \"modified\", \"deleted\", "    \
	        "\"omitted\", \"shared\", \"complete\"}}")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt diff_opts[] = {
	{ .name = "since",
	  .kind = HUTCH_CLI_STRING,
	  .offset = offsetof(struct hutch_cli_args, since),
	  .metavar = "SNAPSHOT|COMMAND",
	  HELP(since) },
	{ .name = "process",
	  .kind = HUTCH_CLI_STRING,
	  .offset = offsetof(struct hutch_cli_args, process),
	  .metavar = "PROC",
	  .complete = "@procs",
	  HELP(process) },
	{ .name = "json",
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, json),
	  HELP(json) },
	{ .name = "" },
};

const struct hutch_cli_verb hutch_verb_diff = {
	.name = "diff",
	.synopsis = "ID [--since SNAPSHOT|COMMAND | --process PROC] [--json]",
	.about = "What changed in the sandbox's /workspace, /home/appuser and /tmp since it\n"
	         "started, since a snapshot of it, or since the start of the command of a\n"
	         "journal line: '+' created, '~' modified (what), '-' deleted, with type and\n"
	         "size; the same entries as a command's change list (at most 1,000 listed).\n"
	         "Needs change lists (--change-lists on, Linux 6.8).\n",
	.opts = diff_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_diff,
};
