/* SPDX-License-Identifier: Apache-2.0 */
/* A file endpoint's answers and built-in command; see file-req.h. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cleanup.h"
#include "file-errno.h"
#include "file-req.h"
#include "request.h"
#include "supervisor.h"

enum MHD_Result hutch_file_answer(struct hutch_file_req *fr, unsigned status, cJSON *j)
{
	if ((fr->op == HUTCH_FILE_PUT || fr->op == HUTCH_FILE_GET) && !fr->body_done) {
		/* libmicrohttpd answers only once the body is in: keep the
		 * answer, drop the rest of the upload. */
		cJSON_Delete(fr->pending);
		fr->pending = j;
		fr->pending_status = status;
		return MHD_YES;
	}
	fr->answered = true;
	return hutch_api_respond_json(fr->conn, status, j);
}

enum MHD_Result hutch_file_answer_error(struct hutch_file_req *fr, unsigned status,
                                        const char *code, const char *fmt, ...)
{
	cJSON *o;
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o = hutch_api_error_json(code, msg);
	if (!o)
		return MHD_NO;
	if (fr->path)
		cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(o, "error"), "path",
		                        fr->path);
	return hutch_file_answer(fr, status, o);
}

static enum MHD_Result answer_no_space(struct hutch_file_req *fr)
{
	return hutch_file_answer_error(
	        fr, 507, "no_space",
	        "no space left on device: the sandbox's tmpfs (or memory) is full "
	        "(instance type %s: %llu MiB memory); nothing was written to '%s'",
	        fr->s->cfg->type->name, (unsigned long long)(fr->s->cfg->type->memory_bytes >> 20),
	        fr->path ? fr->path : "");
}

/* The command failed: turn its "E<errno> message" line (hostile input:
 * parsed strictly, bounded, sanitised) into an error answer. */
enum MHD_Result hutch_file_answer_failure(struct hutch_file_req *fr)
{
	struct cmd *c = fr->cmd;
	_cleanup_free_ char *msg = NULL;
	const char *text = c->err.data ? c->err.data : "";
	size_t len = c->err.len > 512 ? 512 : c->err.len;
	const struct hutch_file_errno *e;
	char *end = NULL;
	long code = 0;

	if (c->spawn_error)
		return hutch_file_answer_error(fr, 500, "spawn_failed", "%s", c->spawn_error);
	if (c->oom_killed)
		return answer_no_space(fr);
	if (WIFSIGNALED(c->status))
		return hutch_file_answer_error(fr, 500, "file_error",
		                               "file operation killed by signal %d",
		                               WTERMSIG(c->status));
	if (len > 1 && text[0] == 'E') {
		code = strtol(text + 1, &end, 10);
		if (end == text + 1 || *end != ' ' || code <= 0 || code > 4095)
			code = 0;
	}
	msg = hutch_utf8_sanitize(code ? end + 1 : text,
	                          code ? len - (size_t)(end + 1 - text) : len, NULL);
	if (msg)
		msg[strcspn(msg, "\n")] = '\0';
	if (code == ENOSPC || code == EDQUOT || code == ENOMEM ||
	    (!code && msg && strstr(msg, "No space left on device")))
		return answer_no_space(fr); /* our writer, or tar's message */
	e = code ? hutch_file_errno_find((int)code) : NULL;
	if (e)
		return hutch_file_answer_error(fr, e->status, e->code, "%s", msg ? msg : "");
	return hutch_file_answer_error(fr, 500, "file_error", "%s",
	                               msg && *msg ? msg : "file operation failed");
}

bool hutch_file_cmd_ok(const struct cmd *c)
{
	return !c->spawn_error && WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0;
}

static void on_builtin_done(void *ud, struct cmd *c)
{
	struct hutch_file_req *fr = ud;

	hutch_api_resume(fr->r);
}

struct cmd *hutch_file_start_builtin(struct hutch_file_req *fr, const char *const *argv,
                                     const char *stdin_data, size_t stdin_len, uint64_t max_output,
                                     bool stdin_open, struct hutch_err *err)
{
	const struct hutch_spawn sp = {
		.argv = argv,
		.envp = fr->s->cmdenv,
		.cwd = HUTCH_WORKSPACE,
		.stdin_data = stdin_data,
		.stdin_len = stdin_len,
		.stdin_open = stdin_open,
		.builtin = true,
		.max_output = max_output,
	};
	const struct hutch_cmd_sink sink = { .done = on_builtin_done, .ud = fr };
	struct cmd *c = hutch_cmd_start(&fr->s->cmds, &sp, &sink, err);

	if (c)
		fr->cmd = c;
	return c;
}

int hutch_file_check_path(const char *path, struct hutch_err *err)
{
	if (!*path)
		return hutch_err_set(err, -EINVAL, "'path' is empty");
	if (strlen(path) >= PATH_MAX)
		return hutch_err_set(err, -EINVAL, "'path' is longer than %d bytes", PATH_MAX - 1);
	return 0;
}

int hutch_file_check_mode(const char *mode, struct hutch_err *err)
{
	char *end;
	unsigned long m;

	if (!*mode)
		return hutch_err_set(err, -EINVAL,
		                     "'mode' is empty: give octal digits like \"644\"");
	m = strtoul(mode, &end, 8);
	if (*end || m > 07777 || mode[0] == '-' || mode[0] == '+' || mode[0] == ' ')
		return hutch_err_set(err, -EINVAL,
		                     "invalid 'mode' \"%.16s\": give octal digits like \"644\"",
		                     mode);
	return 0;
}
