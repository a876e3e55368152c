/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /diff (docs/api.md, "hutch diff"): what changed in the sandbox's
 * writable tmpfs mounts over a span, in the change lists' form. Body {}
 * (since the sandbox started), {"since_command": SEQ} (since the start of
 * the command of journal line SEQ), {"since_process": ID} (since a
 * background process started: what it and whatever ran meanwhile changed,
 * while it runs; its record has its own list at its exit) or
 * {"since_snapshot": "NAME"} (since snapshot NAME of this sandbox). The span's start is a change
 * generation of init's (init/changes.h); the diff is computed by the builtin "diff" in a fork of
 * init and comes back on its stdout in the wire form of changes-format.h, decoded here as hostile
 * input like any change list.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/wait.h>

#include "changes-format.h"
#include "cleanup.h"
#include "cmdenv.h"
#include "fields.h"
#include "http.h"
#include "journal.h"
#include "procs.h"
#include "routes.h"
#include "snapshot.h"
#include "supervisor.h"

/* The builtin's answer: a list and its records, at most its bound. */
#define DIFF_OUT_MAX (HUTCH_CHANGES_MAX_BYTES + 4096)

static const struct hutch_field diff_fields[] = {
	{ "since_command", HUTCH_FIELD_INTEGER, HUTCH_FIELD_NULLABLE, 0, 9007199254740991.0,
	  "'since_command' must be a journal line's seq (hutch journal)" },
	{ "since_snapshot", HUTCH_FIELD_STRING, HUTCH_FIELD_NULLABLE | HUTCH_FIELD_NONEMPTY, 0, 0,
	  "'since_snapshot' must be the name of a snapshot of this sandbox" },
	{ "since_process", HUTCH_FIELD_STRING, HUTCH_FIELD_NULLABLE | HUTCH_FIELD_NONEMPTY, 0, 0,
	  "'since_process' must be a background process's id (p1, or its uuid)" },
};

static void on_done(void *ud, struct cmd *c)
{
	(void)c;
	hutch_api_resume(ud);
}

/* The generation the span starts at, from the body; 0 or an answer sent
 * (*answered). */
static enum MHD_Result span_start(struct request *r, const cJSON *body, uint64_t *gen,
                                  bool *answered)
{
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(body, "since_command");
	const cJSON *snap = cJSON_GetObjectItemCaseSensitive(body, "since_snapshot");
	const cJSON *proc = cJSON_GetObjectItemCaseSensitive(body, "since_process");
	const struct hutch_proc *p;
	uint64_t id = 0;
	int e;

	*answered = true;
	*gen = 0;
	if (cJSON_IsNumber(cmd) + cJSON_IsString(snap) + cJSON_IsString(proc) > 1)
		return hutch_api_refuse(
		        r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		        "give one of 'since_command', 'since_snapshot', 'since_process'");
	if (cJSON_IsString(proc)) {
		p = hutch_proc_find(r->s, proc->valuestring);
		if (!p)
			return hutch_api_refuse(r->conn, HUTCH_ERRC_NOT_FOUND, "not_found",
			                        "no background process '%.64s' (hutch ps)",
			                        proc->valuestring);
		*gen = 2 * p->cmd_id;
	} else if (cJSON_IsNumber(cmd)) {
		e = hutch_journal_command_of(r->s, (uint64_t)cmd->valuedouble, &id);
		if (e == -ENODATA)
			return hutch_api_refuse(
			        r->conn, HUTCH_ERRC_CONFLICT, "no_journal",
			        "this sandbox keeps no journal (--journal-max 0), whose lines name "
			        "the commands");
		if (e < 0)
			return hutch_api_refuse(r->conn, HUTCH_ERRC_NOT_FOUND, "not_found",
			                        "journal line %" PRIu64
			                        " started no command (a run, exec or "
			                        "process line of the last 4,096: hutch journal ID)",
			                        (uint64_t)cmd->valuedouble);
		*gen = 2 * id;
	} else if (cJSON_IsString(snap)) {
		if (hutch_sup_snapshot_gen(r->s, snap->valuestring, gen) < 0)
			return hutch_api_refuse(
			        r->conn, HUTCH_ERRC_NOT_FOUND, "not_found",
			        "no snapshot '%.200s' of this sandbox (one of the last 16 it took)",
			        snap->valuestring);
	}
	*answered = false;
	return MHD_YES;
}

static enum MHD_Result start(struct request *r)
{
	const char *text = r->body.data && r->body.len ? r->body.data : "{}";
	size_t len = r->body.data && r->body.len ? r->body.len : 2;
	_cleanup_cjson_ cJSON *body = cJSON_ParseWithLength(text, len);
	struct hutch_err err = { 0 };
	char genbuf[24];
	const char *argv[] = { "diff", genbuf, NULL };
	struct hutch_spawn sp = { .argv = argv,
		                  .envp = r->s->cmdenv,
		                  .cwd = HUTCH_WORKSPACE,
		                  .builtin = true,
		                  .max_output = DIFF_OUT_MAX };
	const struct hutch_cmd_sink sink = { .done = on_done, .ud = r };
	enum MHD_Result ret;
	bool answered;
	uint64_t gen;

	if (!cJSON_IsObject(body))
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_json",
		                        "the body must be a JSON object: {}, "
		                        "{\"since_command\": SEQ}, {\"since_process\": "
		                        "ID} or {\"since_snapshot\": \"NAME\"}");
	if (hutch_fields_check(body, diff_fields, ELEMENTSOF(diff_fields), HUTCH_FIELDS_LIST_KNOWN,
	                       &err) < 0)
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request", "%s",
		                        err.msg);
	if (!r->s->cfg->change_lists)
		return hutch_api_refuse(r->conn, HUTCH_ERRC_CONFLICT, "change_lists_off",
		                        "this sandbox was created with --change-lists off: "
		                        "nothing keeps what changed");
	ret = span_start(r, body, &gen, &answered);
	if (answered)
		return ret;
	snprintf(genbuf, sizeof(genbuf), "%" PRIu64, gen);
	r->cmd = hutch_cmd_start(&r->s->cmds, &sp, &sink, &err);
	if (!r->cmd)
		return hutch_api_respond_err(r->conn, &err, hutch_api_spawn_code(&err));
	hutch_api_suspend(r);
	return MHD_YES;
}

static enum MHD_Result finish(struct request *r)
{
	struct cmd *c = r->cmd;
	enum MHD_Result ret;
	cJSON *o, *ch;

	if (hutch_api_cmd_wait(r, c, &ret))
		return ret;
	if (c->spawn_error)
		return hutch_api_refuse(r->conn, HUTCH_ERRC_INTERNAL, "spawn_failed", "%s",
		                        c->spawn_error);
	if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 3)
		return hutch_api_refuse(
		        r->conn, HUTCH_ERRC_NOT_CAPABLE, "not_capable",
		        "no change lists in this sandbox: the kernel cannot mark its tmpfs "
		        "mounts from a user namespace (Linux 6.8), or /workspace, /home/appuser "
		        "and /tmp are in a snapshot's layers, not mounts of their own");
	if (!WIFEXITED(c->status) || WEXITSTATUS(c->status) != 0 || c->out.truncated ||
	    !(ch = hutch_changes_to_json(c->out.data, c->out.len)))
		return hutch_api_refuse(r->conn, HUTCH_ERRC_INTERNAL, "internal",
		                        "the sandbox's diff failed (status %d)", c->status);
	if (!(o = cJSON_CreateObject()))
		return cJSON_Delete(ch), MHD_NO;
	cJSON_AddItemToObject(o, "changes", ch);
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, o);
}

enum MHD_Result hutch_api_serve_diff(struct request *r, const char *upload, size_t *size)
{
	(void)upload;
	(void)size;
	return r->cmd ? finish(r) : start(r);
}
