/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File endpoints (see api-files.h and docs/api.md). Each request runs one
 * built-in command inside the sandbox through the ordinary command
 * machinery (hutch_cmd_start_flags with HUTCH_SPAWN_BUILTIN): the child of
 * init does the file operation as appuser, so the supervisor never resolves
 * a sandbox path (DESIGN §2, the docker cp CVE-2018-15664 class).
 *
 * JSON endpoints pass small contents through the command's captured stdin
 * and stdout. The raw PUT/GET /files endpoints stream: the supervisor takes
 * over one pipe end of the command (stdin's write end for PUT, stdout's
 * read end for GET, both 1 MiB pipes) and moves bytes between it and the
 * connection without holding more than what libmicrohttpd already buffers:
 * an upload chunk that does not fit into the pipe stays unconsumed in
 * libmicrohttpd's connection buffer and the connection is suspended until
 * the pipe is writable again (EPOLLOUT, one-shot); a download's content
 * reader suspends on an empty pipe until EPOLLIN. Supervisor memory is flat
 * whatever the file size.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api-files.h"
#include "base64.h"
#include "cleanup.h"
#include "fdutil.h"
#include "fileops.h"
#include "proto.h"
#include "request.h"
#include "supervisor.h"

#define FILE_JSON_MAX     (8u << 20) /* read_file content bound (bytes of the file) */
#define FILE_JSON_MAX_STR "8388608"
#define PIPE_SIZE         (1u << 20)
#define DOWNLOAD_BLOCK    (256u << 10)

enum fop {
	FOP_WRITE_FILE,
	FOP_READ_FILE,
	FOP_DELETE_FILE,
	FOP_MAKE_DIR,
	FOP_DELETE_DIR,
	FOP_LIST_DIR,
	FOP_PUT,
	FOP_GET,
};

static const struct {
	const char *url, *method;
} routes[] = {
	[FOP_WRITE_FILE] = { "/write_file", "POST" },
	[FOP_READ_FILE] = { "/read_file", "POST" },
	[FOP_DELETE_FILE] = { "/delete_file", "POST" },
	[FOP_MAKE_DIR] = { "/make_dir", "POST" },
	[FOP_DELETE_DIR] = { "/delete_dir", "POST" },
	[FOP_LIST_DIR] = { "/list_dir", "POST" },
	[FOP_PUT] = { "/files", "PUT" },
	[FOP_GET] = { "/files", "GET" },
};

struct hutch_file_req {
	struct sup *s;
	struct request *r;
	struct MHD_Connection *conn;
	enum fop op;
	struct hutch_buf body; /* JSON request body */
	char *path;            /* as the client gave it, for answers */
	bool want_base64;      /* read_file: "encoding": "base64" */
	bool tar;              /* /files?format=tar */
	bool answered;
	bool body_done;          /* PUT: the whole body has been received */
	unsigned pending_status; /* PUT: an error answer waiting for the body's end */
	cJSON *pending;
	struct cmd *cmd;
	/* raw streams */
	int pipe_fd; /* PUT: stdin write end; GET: stdout read end */
	struct hutch_watch w_pipe;
	bool pipe_broken; /* PUT: the writer is gone, the rest is dropped */
	uint64_t moved;   /* bytes through the pipe (PUT) or to the client (GET) */
	unsigned char hdr[8];
	size_t nhdr;
	uint64_t size; /* GET: from the header */
};

static enum MHD_Result add_header_size(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
	size_t *total = cls;

	*total += strlen(key) + (value ? strlen(value) : 0) + 4;
	return MHD_YES;
}

bool hutch_api_headers_too_large(struct MHD_Connection *conn)
{
	size_t total = 0;

	(void)hutch_mhd.get_connection_values(conn, MHD_HEADER_KIND, add_header_size, &total);
	return total > HUTCH_MAX_HEADERS;
}

int hutch_api_files_route(const char *url, const char *method)
{
	int known = -1;

	for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
		if (strcmp(url, routes[i].url) != 0)
			continue;
		if (!strcmp(method, routes[i].method))
			return (int)i;
		known = -2;
	}
	return known;
}

/* ---- answers ---- */

static enum MHD_Result answer(struct hutch_file_req *fr, unsigned status, cJSON *j)
{
	if (fr->op == FOP_PUT && !fr->body_done) {
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

static enum MHD_Result answer_error(struct hutch_file_req *fr, unsigned status, const char *code,
                                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum MHD_Result answer_error(struct hutch_file_req *fr, unsigned status, const char *code,
                                    const char *fmt, ...)
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
	return answer(fr, status, o);
}

static const struct {
	int err;
	unsigned status;
	const char *code;
} errmap[] = {
	{ ENOENT, 404, "not_found" },
	{ EISDIR, 400, "is_a_directory" },
	{ ENOTDIR, 400, "not_a_directory" },
	{ EACCES, 403, "permission_denied" },
	{ EPERM, 403, "permission_denied" },
	{ EROFS, 403, "permission_denied" },
	{ ENOSPC, 507, "no_space" },
	{ EDQUOT, 507, "no_space" },
	{ ENOMEM, 507, "no_space" },
	{ EFBIG, 413, "too_large" },
	{ EEXIST, 409, "exists" },
	{ ENOTEMPTY, 409, "exists" },
	{ EBUSY, 409, "busy" },
	{ ELOOP, 400, "invalid_path" },
	{ ENAMETOOLONG, 400, "invalid_path" },
	{ EINVAL, 400, "invalid_path" },
	{ EPIPE, 400, "incomplete_upload" },
	{ ETXTBSY, 409, "busy" },
};

static enum MHD_Result answer_no_space(struct hutch_file_req *fr)
{
	return answer_error(fr, 507, "no_space",
	                    "no space left on device: the sandbox's tmpfs (or memory) is full "
	                    "(instance type %s: %llu MiB memory); nothing was written to '%s'",
	                    fr->s->cfg->type->name,
	                    (unsigned long long)(fr->s->cfg->type->memory_bytes >> 20),
	                    fr->path ? fr->path : "");
}

/* The command failed: turn its "E<errno> message" line (hostile input:
 * parsed strictly, bounded, sanitised) into an error answer. */
static enum MHD_Result answer_failure(struct hutch_file_req *fr)
{
	struct cmd *c = fr->cmd;
	_cleanup_free_ char *msg = NULL;
	const char *text = c->err.data ? c->err.data : "";
	size_t len = c->err.len > 512 ? 512 : c->err.len;
	char *end = NULL;
	long code = 0;

	if (c->spawn_error)
		return answer_error(fr, 500, "spawn_failed", "%s", c->spawn_error);
	if (c->oom_killed)
		return answer_no_space(fr);
	if (WIFSIGNALED(c->status))
		return answer_error(fr, 500, "file_error", "file operation killed by signal %d",
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
	for (size_t i = 0; code && i < ELEMENTSOF(errmap); i++)
		if (errmap[i].err == code)
			return answer_error(fr, errmap[i].status, errmap[i].code, "%s",
			                    msg ? msg : "");
	return answer_error(fr, 500, "file_error", "%s",
	                    msg && *msg ? msg : "file operation failed");
}

static bool cmd_ok(struct cmd *c)
{
	return !c->spawn_error && WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0;
}

static bool is_text(const char *data, size_t len)
{
	_cleanup_free_ char *clean = NULL;

	if (memchr(data, '\0', len))
		return false;
	clean = hutch_utf8_sanitize(data, len, NULL);
	return clean && strlen(clean) == len && memcmp(clean, data, len) == 0;
}

/* ---- starting the built-in ---- */

static void on_builtin_done(void *ud, struct cmd *c)
{
	struct hutch_file_req *fr = ud;

	hutch_api_resume(fr->r);
}

static struct cmd *start_builtin(struct hutch_file_req *fr, const char *const *argv,
                                 const char *stdin_data, size_t stdin_len, uint64_t max_output,
                                 bool stdin_open, struct hutch_err *err)
{
	static const char *const envp[] = { "PATH=" HUTCH_DEFAULT_PATH, "HOME=/home/appuser",
		                            "LANG=C.UTF-8", "USER=appuser", NULL };
	const struct hutch_spawn sp = {
		.argv = argv,
		.envp = envp,
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

/* ---- JSON endpoints ---- */

static int get_string(const cJSON *o, const char *key, bool required, const char **ret,
                      struct hutch_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!v) {
		if (required)
			return hutch_err_set(err, -EINVAL, "missing '%s'", key);
		return 0;
	}
	if (!cJSON_IsString(v))
		return hutch_err_set(err, -EINVAL, "'%s' must be a string", key);
	*ret = v->valuestring;
	return 1;
}

static int check_fields(const cJSON *o, const char *const *known, struct hutch_err *err)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, o) {
		bool ok = false;
		for (size_t i = 0; known[i]; i++)
			ok = ok || !strcmp(it->string, known[i]);
		if (!ok)
			return hutch_err_set(err, -EINVAL, "unknown field '%s'", it->string);
	}
	return 0;
}

static int check_path(const char *path, struct hutch_err *err)
{
	if (!*path)
		return hutch_err_set(err, -EINVAL, "'path' is empty");
	if (strlen(path) >= PATH_MAX)
		return hutch_err_set(err, -EINVAL, "'path' is longer than %d bytes", PATH_MAX - 1);
	return 0;
}

static int check_mode(const char *mode, struct hutch_err *err)
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

static const char *const known_fields[][5] = {
	[FOP_WRITE_FILE] = { "path", "content", "encoding", "mode", NULL },
	[FOP_READ_FILE] = { "path", "encoding", NULL },
	[FOP_DELETE_FILE] = { "path", NULL },
	[FOP_MAKE_DIR] = { "path", "mode", NULL },
	[FOP_DELETE_DIR] = { "path", NULL },
	[FOP_LIST_DIR] = { "path", NULL },
};

/* The built-in's argv for a JSON operation. */
static void json_op_argv(enum fop op, const char *path, const char *mode, const char *size,
                         const char *argv[static 5])
{
	static const char *const ops[] = {
		[FOP_WRITE_FILE] = HUTCH_FOP_WRITE, [FOP_READ_FILE] = HUTCH_FOP_READ,
		[FOP_DELETE_FILE] = HUTCH_FOP_RM,   [FOP_MAKE_DIR] = HUTCH_FOP_MKDIR,
		[FOP_DELETE_DIR] = HUTCH_FOP_RMDIR, [FOP_LIST_DIR] = HUTCH_FOP_LS,
	};

	argv[0] = ops[op];
	argv[1] = path;
	if (op == FOP_WRITE_FILE) {
		argv[2] = mode;
		argv[3] = size;
	} else if (op == FOP_READ_FILE) {
		argv[2] = FILE_JSON_MAX_STR;
	} else if (op == FOP_MAKE_DIR) {
		argv[2] = mode;
	}
}

static enum MHD_Result start_json_op(struct hutch_file_req *fr)
{
	_cleanup_cjson_ cJSON *o = NULL;
	_cleanup_free_ char *data = NULL;
	const char *path = HUTCH_WORKSPACE, *content = NULL, *encoding = NULL, *mode = "";
	const char *argv[5] = { 0 };
	struct hutch_err err = { 0 };
	const char *endp = NULL;
	char sizebuf[32];
	size_t len = 0;

	o = cJSON_ParseWithLengthOpts(fr->body.data ? fr->body.data : "", fr->body.len, &endp,
	                              false);
	if (!o)
		return answer_error(fr, 400, "invalid_request", "invalid JSON at byte %zu",
		                    endp && fr->body.data ? (size_t)(endp - fr->body.data) : 0);
	if (!cJSON_IsObject(o))
		return answer_error(fr, 400, "invalid_request", "the body must be a JSON object");
	if (check_fields(o, known_fields[fr->op], &err) < 0 ||
	    get_string(o, "path", fr->op != FOP_LIST_DIR, &path, &err) < 0 ||
	    check_path(path, &err) < 0 || get_string(o, "encoding", false, &encoding, &err) < 0 ||
	    get_string(o, "mode", false, &mode, &err) < 0 ||
	    (cJSON_HasObjectItem(o, "mode") && check_mode(mode, &err) < 0) ||
	    get_string(o, "content", fr->op == FOP_WRITE_FILE, &content, &err) < 0)
		return answer_error(fr, 400, "invalid_request", "%s", err.msg);
	if (encoding && strcmp(encoding, "utf-8") && strcmp(encoding, "utf8") &&
	    strcmp(encoding, "base64"))
		return answer_error(fr, 400, "invalid_request",
		                    "invalid 'encoding' \"%.32s\": use \"utf-8\" or \"base64\"",
		                    encoding);
	fr->path = strdup(path);
	fr->want_base64 = encoding && !strcmp(encoding, "base64");
	if (fr->op == FOP_WRITE_FILE) {
		if (fr->want_base64) {
			if (hutch_base64_decode(content, &data, &len) < 0)
				return answer_error(fr, 400, "invalid_request",
				                    "'content' is not valid base64");
		} else {
			len = strlen(content);
		}
	}
	snprintf(sizebuf, sizeof(sizebuf), "%zu", len);
	json_op_argv(fr->op, path, mode, sizebuf, argv);
	if (!start_builtin(fr, argv, data ? data : content, len, FILE_JSON_MAX + 64, 0, &err))
		return answer_error(fr, 500, "spawn_failed", "%s", err.msg);
	hutch_api_suspend(fr->r);
	return MHD_YES;
}

static enum MHD_Result finish_read(struct hutch_file_req *fr, cJSON *o)
{
	struct cmd *c = fr->cmd;
	const char *data = c->out.data + 8;
	uint64_t size;
	size_t len;

	if (c->out.len < 8 || c->out.truncated)
		return answer_error(fr, 500, "file_error", "short answer from the sandbox");
	memcpy(&size, c->out.data, 8);
	len = c->out.len - 8;
	if (size != len)
		return answer_error(fr, 409, "busy", "'%s' changed while it was read", fr->path);
	cJSON_AddNumberToObject(o, "size", (double)len);
	if (!fr->want_base64 && is_text(data, len)) {
		_cleanup_free_ char *s = strndup(data, len);
		cJSON_AddStringToObject(o, "encoding", "utf-8");
		cJSON_AddStringToObject(o, "content", s ? s : "");
	} else {
		_cleanup_free_ char *s = hutch_base64_encode(data, len);
		cJSON_AddStringToObject(o, "encoding", "base64");
		cJSON_AddStringToObject(o, "content", s ? s : "");
	}
	return answer(fr, 200, o);
}

static enum MHD_Result finish_json_op(struct hutch_file_req *fr)
{
	struct cmd *c = fr->cmd;
	cJSON *o;

	if (fr->s->state != SUP_RUNNING)
		return answer(fr, 410, hutch_api_ended_json(fr->s));
	if (!cmd_ok(c))
		return answer_failure(fr);
	o = cJSON_CreateObject();
	if (!o)
		return MHD_NO;
	cJSON_AddStringToObject(o, "path", fr->path);
	switch (fr->op) {
	case FOP_READ_FILE:
		return finish_read(fr, o);
	case FOP_WRITE_FILE:
		cJSON_AddNumberToObject(o, "size", (double)c->stdin_len);
		break;
	case FOP_LIST_DIR: {
		cJSON *entries =
		        c->out.truncated
		                ? NULL
		                : cJSON_ParseWithLength(c->out.data ? c->out.data : "", c->out.len);
		if (!cJSON_IsArray(entries)) {
			cJSON_Delete(entries);
			cJSON_Delete(o);
			return answer_error(fr, 500, "file_error",
			                    "directory listing of '%s' too large or malformed",
			                    fr->path);
		}
		cJSON_AddItemToObject(o, "entries", entries);
		break;
	}
	default:
		break;
	}
	return answer(fr, 200, o);
}

/* ---- raw streams ---- */

static void on_pipe(struct hutch_watch *w, uint32_t events)
{
	struct hutch_file_req *fr = w->ptr;

	hutch_api_resume(fr->r);
}

/* One-shot: the connection is resumed once, then suspends again. */
static void arm_pipe(struct hutch_file_req *fr, uint32_t what)
{
	struct hutch_loop *loop = &fr->s->loop;

	if (fr->pipe_fd < 0)
		return;
	if (!hutch_watch_active(&fr->w_pipe))
		(void)hutch_loop_add(loop, &fr->w_pipe, fr->pipe_fd, what | EPOLLONESHOT);
	else
		(void)hutch_loop_mod(loop, &fr->w_pipe, what | EPOLLONESHOT);
}

static void close_pipe(struct hutch_file_req *fr)
{
	hutch_loop_close(&fr->s->loop, &fr->w_pipe, &fr->pipe_fd);
}

static enum MHD_Result start_stream(struct hutch_file_req *fr)
{
	const char *path =
	        hutch_mhd.lookup_connection_value(fr->conn, MHD_GET_ARGUMENT_KIND, "path");
	const char *mode =
	        hutch_mhd.lookup_connection_value(fr->conn, MHD_GET_ARGUMENT_KIND, "mode");
	const char *fmt =
	        hutch_mhd.lookup_connection_value(fr->conn, MHD_GET_ARGUMENT_KIND, "format");
	const char *cl = hutch_mhd.lookup_connection_value(fr->conn, MHD_HEADER_KIND,
	                                                   MHD_HTTP_HEADER_CONTENT_LENGTH);
	struct hutch_err err = { 0 };
	const char *argv[5] = { 0 };
	char sizebuf[32] = "-1";
	struct cmd *c;

	if (!path)
		return answer_error(fr, 400, "invalid_request", "missing query parameter 'path'");
	if (check_path(path, &err) < 0 || (mode && check_mode(mode, &err) < 0))
		return answer_error(fr, 400, "invalid_request", "%s", err.msg);
	if (fmt && strcmp(fmt, "tar") != 0)
		return answer_error(fr, 400, "invalid_request",
		                    "invalid 'format' \"%.16s\": only \"tar\" (a directory)", fmt);
	fr->path = strdup(path);
	fr->tar = fmt != NULL;
	if (cl)
		snprintf(sizebuf, sizeof(sizebuf), "%llu", strtoull(cl, NULL, 10));
	if (fr->op == FOP_PUT && fr->tar)
		argv[0] = HUTCH_FOP_TAR_X, argv[1] = path;
	else if (fr->op == FOP_PUT)
		argv[0] = HUTCH_FOP_WRITE, argv[1] = path, argv[2] = mode ? mode : "",
		argv[3] = sizebuf;
	else if (fr->tar)
		argv[0] = HUTCH_FOP_TAR_C, argv[1] = path;
	else
		argv[0] = HUTCH_FOP_READ, argv[1] = path, argv[2] = "-1";
	c = start_builtin(fr, argv, NULL, 0, 64u << 10, fr->op == FOP_PUT, &err);
	if (!c)
		return answer_error(fr, 500, "spawn_failed", "%s", err.msg);
	/* Take over the streaming end from the command engine. */
	fr->pipe_fd = fr->op == FOP_PUT ? hutch_cmd_take_stdin(c) : hutch_cmd_take_stdout(c);
	(void)fcntl(fr->pipe_fd, F_SETPIPE_SZ, PIPE_SIZE);
	(void)hutch_fd_nonblock(fr->pipe_fd, true);
	hutch_api_kill_on_hangup(fr->r, c);
	return MHD_YES;
}

static enum MHD_Result put_data(struct hutch_file_req *fr, const char *data, size_t *size)
{
	while (*size > 0 && fr->pipe_fd >= 0 && !fr->pipe_broken) {
		ssize_t n = write(fr->pipe_fd, data, *size);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			/* Leave the rest in libmicrohttpd's buffer; come back
			 * when the writer in the sandbox has made room. */
			arm_pipe(fr, EPOLLOUT);
			hutch_api_suspend(fr->r);
			return MHD_YES;
		}
		if (n < 0) {
			fr->pipe_broken = true; /* the writer failed: it says why */
			close_pipe(fr);
			break;
		}
		data += n;
		*size -= (size_t)n;
		fr->moved += (uint64_t)n;
	}
	*size = 0; /* all written, or dropped after the writer failed */
	return MHD_YES;
}

static enum MHD_Result finish_put(struct hutch_file_req *fr)
{
	cJSON *o;

	close_pipe(fr); /* end of data: the writer publishes the file */
	if (fr->cmd->state != CMD_DONE) {
		hutch_api_suspend(fr->r);
		return MHD_YES;
	}
	if (fr->s->state != SUP_RUNNING)
		return answer(fr, 410, hutch_api_ended_json(fr->s));
	if (!cmd_ok(fr->cmd))
		return answer_failure(fr);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "path", fr->path);
	if (!fr->tar)
		cJSON_AddNumberToObject(o, "size", (double)fr->moved);
	return answer(fr, 200, o);
}

static ssize_t get_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct hutch_file_req *fr = cls;
	ssize_t n;

	if (fr->size != HUTCH_FOP_SIZE_UNKNOWN && max > fr->size - fr->moved)
		max = (size_t)(fr->size - fr->moved);
	if (fr->pipe_fd < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	do
		n = read(fr->pipe_fd, buf, max);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		fr->moved += (uint64_t)n;
		return n;
	}
	if (n < 0 && errno == EAGAIN) {
		arm_pipe(fr, EPOLLIN);
		hutch_api_suspend(fr->r);
		return 0;
	}
	if (n == 0 && (fr->size == HUTCH_FOP_SIZE_UNKNOWN || fr->moved == fr->size))
		return MHD_CONTENT_READER_END_OF_STREAM;
	return MHD_CONTENT_READER_END_WITH_ERROR; /* shrank, or the reader failed */
}

/* GET: wait for the size header (or the reader's failure), then answer
 * with a streamed body. */
static enum MHD_Result start_get_response(struct hutch_file_req *fr)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	while (fr->nhdr < sizeof(fr->hdr) && fr->pipe_fd >= 0) {
		ssize_t n = read(fr->pipe_fd, fr->hdr + fr->nhdr, sizeof(fr->hdr) - fr->nhdr);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			arm_pipe(fr, EPOLLIN);
			hutch_api_suspend(fr->r);
			return MHD_YES;
		}
		if (n <= 0) {
			close_pipe(fr);
			break;
		}
		fr->nhdr += (size_t)n;
	}
	if (fr->nhdr < sizeof(fr->hdr)) {
		/* No header: the reader failed; its reason comes with its exit. */
		if (fr->cmd->state != CMD_DONE) {
			hutch_api_suspend(fr->r);
			return MHD_YES;
		}
		if (fr->s->state != SUP_RUNNING)
			return answer(fr, 410, hutch_api_ended_json(fr->s));
		if (!cmd_ok(fr->cmd))
			return answer_failure(fr);
		return answer_error(fr, 500, "file_error", "short answer from the sandbox");
	}
	memcpy(&fr->size, fr->hdr, sizeof(fr->size));
	resp = hutch_mhd.create_response_from_callback(
	        fr->size == HUTCH_FOP_SIZE_UNKNOWN ? MHD_SIZE_UNKNOWN : fr->size, DOWNLOAD_BLOCK,
	        get_reader, fr, NULL);
	if (!resp)
		return MHD_NO;
	(void)hutch_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
	                                    fr->tar ? "application/x-tar"
	                                            : "application/octet-stream");
	fr->answered = true;
	ret = hutch_mhd.queue_response(fr->conn, MHD_HTTP_OK, resp);
	hutch_mhd.destroy_response(resp);
	return ret;
}

/* ---- entry points ---- */

static struct hutch_file_req *file_req_new(struct sup *s, struct request *r,
                                           struct MHD_Connection *conn, int op)
{
	struct hutch_file_req *fr = calloc(1, sizeof(*fr));

	if (!fr)
		return NULL;
	fr->s = s;
	fr->r = r;
	fr->conn = conn;
	fr->op = (enum fop)op;
	fr->pipe_fd = -EBADF;
	hutch_watch_init(&fr->w_pipe, on_pipe, fr);
	hutch_buf_init(&fr->body, HUTCH_MAX_BODY);
	return fr;
}

enum MHD_Result hutch_api_files_access(struct sup *s, struct request *r,
                                       struct MHD_Connection *conn, int op,
                                       struct hutch_file_req **pfr, const char *upload_data,
                                       size_t *upload_data_size)
{
	struct hutch_file_req *fr = *pfr;

	if (!fr) {
		fr = *pfr = file_req_new(s, r, conn, op);
		if (!fr)
			return MHD_NO;
	}
	if (fr->op == FOP_PUT && *upload_data_size == 0)
		fr->body_done = true;
	if (fr->pending) {
		if (!fr->body_done) {
			*upload_data_size = 0; /* the rest of a refused upload */
			return MHD_YES;
		}
		fr->answered = true;
		return hutch_api_respond_json(fr->conn, fr->pending_status, TAKE_PTR(fr->pending));
	}
	if (fr->answered)
		return MHD_YES;
	if (!fr->cmd && s->state != SUP_RUNNING)
		return answer(fr, 410, hutch_api_ended_json(s));
	if (fr->op == FOP_PUT || fr->op == FOP_GET) {
		if (!fr->cmd) {
			enum MHD_Result ret = start_stream(fr);
			if (fr->pending)
				return hutch_api_files_access(s, r, conn, op, pfr, upload_data,
				                              upload_data_size);
			if (fr->answered || ret != MHD_YES)
				return ret;
		}
		if (fr->op == FOP_GET)
			return start_get_response(fr);
		if (*upload_data_size)
			return put_data(fr, upload_data, upload_data_size);
		return finish_put(fr);
	}
	if (*upload_data_size) {
		if (hutch_buf_append(&fr->body, upload_data, *upload_data_size) < 0 ||
		    fr->body.truncated)
			fr->body.len = 0, fr->body.truncated = true;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (fr->body.truncated)
		return answer_error(fr, 413, "too_large",
		                    "request body larger than %u bytes: use PUT /files for large "
		                    "files",
		                    HUTCH_MAX_BODY);
	if (!fr->cmd)
		return start_json_op(fr);
	if (fr->cmd->state != CMD_DONE) {
		hutch_api_suspend(fr->r);
		return MHD_YES;
	}
	return finish_json_op(fr);
}

void hutch_api_files_free(struct hutch_file_req *fr)
{
	struct cmd *c;

	if (!fr)
		return;
	c = fr->cmd;
	if (c && fr->op == FOP_PUT && fr->pipe_fd >= 0 && c->state != CMD_DONE) {
		/* The upload did not end: keep the writer's stdin open so it
		 * never sees a clean EOF, and kill it. Its O_TMPFILE inode
		 * goes with it; no partial file is ever published. */
		hutch_loop_del(&fr->s->loop, &fr->w_pipe);
		hutch_cmd_hold_fd(c, fr->pipe_fd);
		fr->pipe_fd = -EBADF;
	}
	close_pipe(fr);
	if (c)
		hutch_cmd_release(c);
	cJSON_Delete(fr->pending);
	hutch_buf_done(&fr->body);
	free(fr->path);
	free(fr);
}
