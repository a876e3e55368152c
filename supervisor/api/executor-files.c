/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The executor's file endpoints (executor.h): /write_file, /read_file,
 * /delete_file, /make_dir, /delete_dir, /list_dir with {"path"} (and
 * "content"). As the executor does, an operation that fails still answers
 * 200, saying why in "error" with Go's wording ("open P: no such file or
 * directory"), which the cloud client matches to raise its own errors:
 * changes answer {"success": true} or {"error": ..., "success": false},
 * /read_file {"content"} or {"error"}, /list_dir {"entries": [names]} or
 * {"error"} (Go leaves an empty "content" or "entries" out). The semantics
 * are Go's: write_file makes no parent directory, delete_file removes a
 * file or an empty directory (os.Remove), delete_dir removes a tree or a
 * file and is fine with a missing path (os.RemoveAll).
 *
 * Every operation is a built-in of init run as appuser inside the sandbox
 * (init/fileops.c), as the native file endpoints' are; /read_file reads
 * files up to 8 MiB ("file too large" beyond: GET /v1/files streams any
 * size).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cleanup.h"
#include "cmdenv.h"
#include "executor.h"
#include "file-req.h"
#include "fileops.h"
#include "routes.h"
#include "supervisor.h"

#define READ_MAX     (8u << 20)
#define READ_MAX_STR "8388608"

struct exec_file {
	enum hutch_file_op op;
	char *path;
	struct cmd *cmd;
};

static void file_free(void *p)
{
	struct exec_file *x = p;

	if (!x)
		return;
	if (x->cmd)
		hutch_cmd_release(x->cmd);
	free(x->path);
	free(x);
}

static bool is_change(enum hutch_file_op op)
{
	return op != HUTCH_FILE_READ_FILE && op != HUTCH_FILE_LIST_DIR;
}

/* The Go call that failed with code, as its error names it. */
static const char *go_op(enum hutch_file_op op, int code)
{
	switch (op) {
	case HUTCH_FILE_READ_FILE:
		return code == EISDIR || code == EFBIG ? "read" : "open";
	case HUTCH_FILE_DELETE_FILE:
		return "remove";
	case HUTCH_FILE_MAKE_DIR:
		return "mkdir";
	case HUTCH_FILE_DELETE_DIR:
		return "unlinkat";
	case HUTCH_FILE_LIST_DIR:
		return code == ENOTDIR ? "readdirent" : "open";
	default:
		return "open";
	}
}

/* {"error": msg} (+ "success": false for a change), 200 as the executor. */
static enum MHD_Result answer_error(struct request *r, struct exec_file *x, const char *msg)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return MHD_NO;
	cJSON_AddStringToObject(o, "error", msg);
	if (is_change(x->op))
		cJSON_AddBoolToObject(o, "success", false);
	return hutch_exec_respond_json(r->conn, MHD_HTTP_OK, o);
}

static enum MHD_Result answer_success(struct request *r)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return MHD_NO;
	cJSON_AddBoolToObject(o, "success", true);
	return hutch_exec_respond_json(r->conn, MHD_HTTP_OK, o);
}

static enum MHD_Result answer_errno(struct request *r, struct exec_file *x, int code)
{
	char msg[4400];

	hutch_exec_path_error(msg, sizeof(msg), go_op(x->op, code), x->path, code);
	return answer_error(r, x, msg);
}

static void on_done(void *ud, struct cmd *c)
{
	hutch_api_resume(ud);
}

static int start(struct request *r, struct exec_file *x, const char *content)
{
	static const char *const ops[] = {
		[HUTCH_FILE_WRITE_FILE] = HUTCH_FOP_WRITE,
		[HUTCH_FILE_READ_FILE] = HUTCH_FOP_READ,
		[HUTCH_FILE_DELETE_FILE] = HUTCH_FOP_REMOVE,
		[HUTCH_FILE_MAKE_DIR] = HUTCH_FOP_MKDIR,
		[HUTCH_FILE_DELETE_DIR] = HUTCH_FOP_REMOVE_ALL,
		[HUTCH_FILE_LIST_DIR] = HUTCH_FOP_LS,
	};
	const char *argv[6] = { ops[x->op], x->path };
	size_t len = content ? strlen(content) : 0;
	char size[32];
	struct hutch_spawn sp = {
		.argv = argv,
		.envp = r->s->cmdenv,
		.cwd = HUTCH_WORKSPACE,
		.stdin_data = content,
		.stdin_len = len,
		.builtin = true,
		.max_output = x->op == HUTCH_FILE_READ_FILE ? READ_MAX + 64 : HUTCH_MAX_BODY,
	};
	struct hutch_cmd_sink sink = { .done = on_done, .ud = r };
	struct hutch_err err = { 0 };

	snprintf(size, sizeof(size), "%zu", len);
	if (x->op == HUTCH_FILE_WRITE_FILE) {
		argv[2] = ""; /* 644, or the existing file's mode: os.WriteFile's */
		argv[3] = size;
		argv[4] = "noparents";
	} else if (x->op == HUTCH_FILE_READ_FILE) {
		argv[2] = READ_MAX_STR;
	} else if (x->op == HUTCH_FILE_MAKE_DIR) {
		argv[2] = "755";
	}
	x->cmd = hutch_cmd_start(&r->s->cmds, &sp, &sink, &err);
	return x->cmd ? 0 : err.code;
}

/* The built-in's "E<errno> ..." line; 0 if it has none. */
static int failure_code(const struct cmd *c)
{
	const char *t = c->err.data;
	char *end = NULL;
	long code;

	if (!t || c->err.len < 2 || t[0] != 'E')
		return 0;
	code = strtol(t + 1, &end, 10);
	return end != t + 1 && *end == ' ' && code > 0 && code < 4096 ? (int)code : 0;
}

static enum MHD_Result answer_read(struct request *r, const struct cmd *c)
{
	_cleanup_free_ char *text = NULL;
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return MHD_NO;
	if (c->out.len > 8) {
		text = hutch_utf8_sanitize(c->out.data + 8, c->out.len - 8, NULL);
		cJSON_AddStringToObject(o, "content", text ? text : "");
	}
	return hutch_exec_respond_json(r->conn, MHD_HTTP_OK, o);
}

static enum MHD_Result answer_list(struct request *r, struct exec_file *x, const struct cmd *c)
{
	_cleanup_cjson_ cJSON *all =
	        c->out.truncated
	                ? NULL
	                : cJSON_ParseWithLength(c->out.data ? c->out.data : "", c->out.len);
	cJSON *o = cJSON_CreateObject(), *names = NULL;
	const cJSON *e;

	if (!o)
		return MHD_NO;
	if (!cJSON_IsArray(all)) {
		cJSON_Delete(o);
		return answer_error(r, x, "directory listing too large");
	}
	cJSON_ArrayForEach(e, all) {
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
		if (!names)
			names = cJSON_AddArrayToObject(o, "entries");
		if (name && names)
			cJSON_AddItemToArray(names, cJSON_CreateString(name));
	}
	return hutch_exec_respond_json(r->conn, MHD_HTTP_OK, o);
}

static enum MHD_Result finish(struct request *r, struct exec_file *x)
{
	struct cmd *c = x->cmd;
	int code;

	if (r->s->state != SUP_RUNNING)
		return hutch_api_respond_ended(r->conn, r->s);
	if (c->spawn_error || !WIFEXITED(c->status) || WEXITSTATUS(c->status) != 0) {
		code = failure_code(c);
		if (code)
			return answer_errno(r, x, code);
		return answer_error(r, x,
		                    c->oom_killed ? "no space left on device (memory limit)"
		                                  : "file operation failed");
	}
	if (x->op == HUTCH_FILE_READ_FILE)
		return answer_read(r, c);
	if (x->op == HUTCH_FILE_LIST_DIR)
		return answer_list(r, x, c);
	return answer_success(r);
}

static enum MHD_Result begin(struct request *r, struct exec_file *x)
{
	static const char *const fields[] = { "path", "content", NULL };
	_cleanup_cjson_ cJSON *in = NULL;
	const char *path, *content;
	bool bad = false;

	if (hutch_exec_body(r, fields, &in) < 0)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL, HUTCH_EXEC_INVALID);
	path = hutch_exec_string(in, "path", &bad);
	content = hutch_exec_string(in, "content", &bad);
	if (bad)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL, HUTCH_EXEC_INVALID);
	x->path = strdup(path);
	if (!x->path)
		return MHD_NO;
	/* Go's calls with "": RemoveAll does nothing, the others ENOENT. */
	if (!*path && x->op == HUTCH_FILE_DELETE_DIR)
		return answer_success(r);
	if (!*path)
		return answer_errno(r, x, ENOENT);
	if (strlen(path) >= 4096)
		return answer_errno(r, x, ENAMETOOLONG);
	if (start(r, x, x->op == HUTCH_FILE_WRITE_FILE ? content : NULL) < 0)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_INTERNAL, NULL,
		                             "Internal Server Error");
	hutch_api_suspend(r);
	return MHD_YES;
}

enum MHD_Result hutch_exec_serve_file(struct request *r, const char *upload, size_t *size)
{
	struct exec_file *x = r->state;

	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x)
			return MHD_NO;
		x->op = (enum hutch_file_op)r->route->arg;
		r->state = x;
		r->state_free = file_free;
		return begin(r, x);
	}
	if (x->cmd && x->cmd->state != CMD_DONE) {
		hutch_api_suspend(r);
		return MHD_YES;
	}
	r->answered = true;
	return finish(r, x);
}
