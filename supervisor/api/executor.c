/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the executor's handlers share (executor.h), and its TCP listener:
 * with --executor-port the supervisor serves the contract on a TCP socket
 * too (loopback unless an address is named), so that a client written for
 * the cloud works unmodified. Anything that reaches that socket can run
 * commands, so every route but /health wants the sandbox's secret as a
 * bearer token (the executor's own rule); the secret is 32 random bytes,
 * kept in the supervisor and in a file of the sandbox's directory that
 * only the creator can read.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "executor.h"
#include "fdutil.h"
#include "fields.h"
#include "request.h"
#include "supervisor.h"

#define SECRET_FILE "executor.secret"

/* Go's kinds of JSON value: true and false are one (a bool field). */
static int kind_of(const cJSON *v)
{
	return cJSON_IsBool(v) ? cJSON_True : (v->type & 0xff);
}

static bool listed(const char *const *fields, const char *name)
{
	for (; *fields; fields++)
		if (!strcasecmp(*fields, name))
			return true;
	return false;
}

/* Move the members of from to the end of to (Go fills the map it has). */
static void merge_into(cJSON *to, cJSON *from)
{
	while (from->child)
		cJSON_AddItemToArray(to, cJSON_DetachItemViaPointer(from, from->child));
}

static int go_object(cJSON *o, const char *const *fields, bool fold, int depth)
{
	cJSON *it = o->child, *next, *e;
	int r;

	/* Invariant: the members before it have distinct names. */
	for (; it; it = next) {
		next = it->next;
		if (fields && !listed(fields, it->string)) {
			cJSON_Delete(cJSON_DetachItemViaPointer(o, it));
			continue;
		}
		for (e = o->child; e != it; e = e->next)
			if (fold ? !strcasecmp(e->string, it->string)
			         : !strcmp(e->string, it->string))
				break;
		if (e == it)
			continue;
		if (!cJSON_IsNull(e) && !cJSON_IsNull(it) && kind_of(e) != kind_of(it))
			return -EINVAL;
		if (cJSON_IsObject(e) && cJSON_IsObject(it)) {
			merge_into(e, it);
			cJSON_Delete(cJSON_DetachItemViaPointer(o, it));
		} else {
			cJSON_Delete(cJSON_DetachItemViaPointer(o, e));
		}
	}
	if (depth >= 32)
		return 0; /* no field of the contract is this deep */
	cJSON_ArrayForEach(it, o) {
		if (cJSON_IsObject(it) && (r = go_object(it, NULL, false, depth + 1)) < 0)
			return r;
	}
	return 0;
}

int hutch_exec_go_object(cJSON *o, const char *const *fields, bool fold)
{
	return cJSON_IsObject(o) ? go_object(o, fields, fold, 0) : -EINVAL;
}

int hutch_exec_body(const struct request *r, const char *const *fields, cJSON **ret)
{
	const char *body = r->body.data ? r->body.data : "";
	const char *end = NULL;
	cJSON *j;

	*ret = NULL;
	if (memchr(body, '\0', r->body.len))
		return -EINVAL; /* a raw NUL is not JSON; "\u0000" would cut a C string */
	j = cJSON_ParseWithLengthOpts(body, r->body.len, &end, false);
	if (!j)
		return -EINVAL;
	if (cJSON_IsNull(j)) {
		cJSON_Delete(j);
		return 0;
	}
	/* Not an object, or a key given twice with values of two types. */
	if (!cJSON_IsObject(j) || hutch_exec_go_object(j, fields, true) < 0) {
		cJSON_Delete(j);
		return -EINVAL;
	}
	/* "\u0000" in any string: the executor's exec would refuse it too. */
	if (hutch_fields_check_text(body, r->body.len, &(struct hutch_err){ 0 }) < 0) {
		cJSON_Delete(j);
		return -EINVAL;
	}
	*ret = j;
	return 0;
}

const char *hutch_exec_string(const cJSON *o, const char *key, bool *bad)
{
	/* Go matches a JSON key to a struct field without regard to case. */
	const cJSON *v = o ? cJSON_GetObjectItem(o, key) : NULL;

	if (!v || cJSON_IsNull(v))
		return "";
	if (!cJSON_IsString(v)) {
		*bad = true;
		return "";
	}
	return v->valuestring;
}

enum MHD_Result hutch_exec_respond_raw(struct MHD_Connection *conn, unsigned status,
                                       const char *text, size_t len)
{
	_cleanup_free_ char *body = malloc(len + 1);

	if (!body)
		return MHD_NO;
	memcpy(body, text, len);
	body[len] = '\n';
	return hutch_api_respond_buffer(conn, status, "application/json", body, len + 1);
}

enum MHD_Result hutch_exec_respond_json(struct MHD_Connection *conn, unsigned status, cJSON *j)
{
	_cleanup_free_ char *text = j ? cJSON_PrintUnformatted(j) : NULL;

	cJSON_Delete(j);
	return text ? hutch_exec_respond_raw(conn, status, text, strlen(text)) : MHD_NO;
}

void hutch_exec_path_error(char *buf, size_t size, const char *op, const char *path, int code)
{
	int n = snprintf(buf, size, "%s %s: %s", op, path, strerror(code < 0 ? -code : code));
	size_t at = strlen(op) + strlen(path) + 3;

	/* Go words errno as strerror does, but starts it in lower case. */
	if (n > 0 && at < size && buf[at] >= 'A' && buf[at] <= 'Z')
		buf[at] = (char)(buf[at] - 'A' + 'a');
}

int hutch_exec_cmd_parse(const struct request *r, struct hutch_exec_cmd *x)
{
	static const char *const fields[] = { "cmd", "cwd", "env", NULL };
	_cleanup_cjson_ cJSON *in = NULL, *out = cJSON_CreateObject();
	const cJSON *env;
	cJSON *argv;
	bool bad = false;
	const char *cmd, *cwd;

	if (!out || hutch_exec_body(r, fields, &in) < 0)
		return -EINVAL;
	cmd = hutch_exec_string(in, "cmd", &bad);
	cwd = hutch_exec_string(in, "cwd", &bad);
	env = in ? cJSON_GetObjectItem(in, "env") : NULL;
	if (bad || (env && !cJSON_IsNull(env) && !cJSON_IsObject(env)))
		return -EINVAL;
	x->empty = !*cmd;
	argv = cJSON_AddArrayToObject(out, "argv");
	cJSON_AddItemToArray(argv, cJSON_CreateString("/bin/sh"));
	cJSON_AddItemToArray(argv, cJSON_CreateString("-c"));
	cJSON_AddItemToArray(argv, cJSON_CreateString(cmd));
	if (*cwd) {
		cJSON_AddStringToObject(out, "cwd", cwd);
		x->cwd = strdup(cwd);
		if (!x->cwd)
			return -ENOMEM;
	}
	if (cJSON_IsObject(env))
		cJSON_AddItemToObject(out, "env", cJSON_Duplicate(env, true));
	x->body = cJSON_PrintUnformatted(out);
	if (!x->body)
		return -ENOMEM;
	x->len = strlen(x->body);
	return 0;
}

static void on_check_done(void *ud, struct cmd *c)
{
	hutch_api_resume(ud);
}

bool hutch_exec_cmd_checked(struct request *r, struct hutch_exec_cmd *x)
{
	const char *argv[] = { "/bin/sh", "-c", "test -d \"$1\"", "sh", x->cwd, NULL };
	struct hutch_cmd_sink sink = { .done = on_check_done, .ud = r };
	struct hutch_spawn sp = {
		.argv = argv,
		.envp = r->s->cmdenv,
		.cwd = HUTCH_WORKSPACE,
		.max_output = 1,
	};
	struct hutch_err err = { 0 };
	_cleanup_free_ char *msg = NULL;
	const struct cmd *c;

	if (!x->cwd)
		return true;
	if (!x->check) {
		x->check = hutch_cmd_start(&r->s->cmds, &sp, &sink, &err);
		if (!x->check) {
			hutch_api_refuse_text(r->conn, HUTCH_ERRC_INTERNAL, NULL,
			                      "Failed to start command");
			return false;
		}
	}
	c = x->check;
	if (c->state != CMD_DONE) {
		hutch_api_suspend(r);
		return false;
	}
	if (r->s->state != SUP_RUNNING) {
		hutch_api_respond_ended(r->conn, r->s);
		return false;
	}
	if (!c->spawn_error && WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0)
		return true;
	if (asprintf(&msg, "Invalid working directory: %s", x->cwd) < 0)
		msg = NULL;
	hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL,
	                      msg ? msg : "Invalid working directory");
	return false;
}

void hutch_exec_cmd_done(struct hutch_exec_cmd *x)
{
	if (x->check)
		hutch_cmd_release(x->check);
	free(x->body);
	free(x->cwd);
	*x = (struct hutch_exec_cmd){ 0 };
}

int hutch_exec_code(int wait_status)
{
	return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

void hutch_exec_lines(struct hutch_buf *b, bool end, size_t max,
                      void (*emit)(void *ud, const char *p, size_t n), void *ud)
{
	size_t start = 0;

	for (size_t i = 0; i < b->len; i++)
		if (b->data[i] == '\n' || i + 1 - start >= max) {
			emit(ud, b->data + start, i + 1 - start);
			start = i + 1;
		}
	if (end && start < b->len) {
		emit(ud, b->data + start, b->len - start);
		start = b->len;
	}
	memmove(b->data, b->data + start, b->len - start);
	b->len -= start;
}

int hutch_executor_listen(struct sup *s, struct hutch_err *err)
{
	struct sockaddr_in sa = s->cfg->executor_addr;
	unsigned char raw[32];
	socklen_t len = sizeof(sa);
	int one = 1, r;
	_cleanup_close_ int fd = -EBADF;

	if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
		return hutch_err_set_errno(err, -errno, "make the executor's secret");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(s->executor.secret + 2 * i, 3, "%02x", raw[i]);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "make the executor's TCP socket");
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		if (r == -EADDRINUSE)
			return hutch_err_set(err, r,
			                     "--executor-port: %s is already in use on this host: "
			                     "choose another port (0: any free one)",
			                     s->cfg->executor_listen);
		return hutch_err_set_errno(err, r, "--executor-port: listen on %s",
		                           s->cfg->executor_listen);
	}
	if (listen(fd, 256) < 0 || getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return hutch_err_set_errno(err, -errno, "--executor-port: listen on %s",
		                           s->cfg->executor_listen);
	s->executor.port = ntohs(sa.sin_port);
	return TAKE_FD(fd);
}

int hutch_executor_publish(struct sup *s, struct hutch_err *err)
{
	char path[4300];
	_cleanup_close_ int fd = -EBADF;

	snprintf(path, sizeof(path), "%s/" SECRET_FILE, s->paths.dir);
	/* Created 0600 by the creator's own process: no window in which
	 * another user could open it. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "write '%s'", path);
	if (hutch_write_all(fd, s->executor.secret, strlen(s->executor.secret)) < 0)
		return hutch_err_set_errno(err, -EIO, "write '%s'", path);
	return 0;
}

bool hutch_executor_authorized(struct sup *s, struct MHD_Connection *conn)
{
	const char *h = hutch_mhd.lookup_connection_value(conn, MHD_HEADER_KIND,
	                                                  MHD_HTTP_HEADER_AUTHORIZATION);
	const char *want = s->executor.secret;
	size_t n = strlen(want), got;
	unsigned char diff = 0;

	if (!h || strncmp(h, "Bearer ", 7) != 0 || !*want)
		return false;
	h += 7;
	got = strlen(h);
	/* Constant time in the secret: every byte compared whatever differs
	 * first; only the length (public: 64 hex digits) shows. */
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(want[i] ^ (i < got ? h[i] : 0));
	return got == n && diff == 0;
}

void hutch_executor_write(const struct hutch_config *cfg, uint16_t port, const char *key,
                          struct hutch_jw *w)
{
	char addr[INET_ADDRSTRLEN] = "", url[64];

	if (!cfg->executor_listen[0] || !port)
		return;
	inet_ntop(AF_INET, &cfg->executor_addr.sin_addr, addr, sizeof(addr));
	snprintf(url, sizeof(url), "http://%s:%u", addr, port);
	hutch_jw_open(w, key, '{');
	hutch_jw_str(w, "address", addr);
	hutch_jw_num(w, "port", port);
	hutch_jw_str(w, "url", url);
	hutch_jw_close(w, '{');
}

cJSON *hutch_executor_json(const struct hutch_config *cfg, uint16_t port)
{
	struct hutch_jw w;

	if (!cfg->executor_listen[0] || !port)
		return NULL;
	hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
	hutch_executor_write(cfg, port, NULL, &w);
	return hutch_jw_to_cjson(&w);
}
