/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The command's request body (POST /exec, hutch run's hand-over), written
 * without libcjson (base/cjson-dl.c): exec and run then never load it on
 * their way, the exit frame coming in brief (base/frame.h, RESULT). The
 * JSON is the API's (docs/api.md), its strings escaped as cJSON_Print()
 * escapes them (hutch_buf_append_json_str()). On hutch's own sockets (run's
 * hand-over, exec.sock) the same request goes in the form that needs no
 * JSON parser (base/frame.h, HUTCH_REQ_MAGIC), so that the supervisor does
 * not load libcjson either. hutch run's made ready before its create,
 * whole on a socketpair (hutch_cli_run_prepare()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "fdutil.h"
#include "frame.h"
#include "stream.h"
#include "util.h"

bool hutch_cli_window_size(uint16_t *rows, uint16_t *cols)
{
	struct winsize ws;

	if (ioctl(0, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		return false;
	*rows = ws.ws_row;
	*cols = ws.ws_col;
	return true;
}

/* exec -it ID alone: appuser's login shell, as its passwd entry says. */
static char *login_shell[] = { "/bin/sh", "-c",
	                       "s=$(getent passwd \"$(id -u)\" | cut -d: -f7); "
	                       "exec \"${s:-/bin/sh}\" -l",
	                       NULL };

/* Append text; -ENOMEM. */
static int put(struct hutch_buf *b, const char *text)
{
	return hutch_buf_append(b, text, strlen(text));
}

/* One field of the JSON-free form: its tag, then value and its NUL. */
static int field(struct hutch_buf *b, char tag, const char *value)
{
	return hutch_buf_append(b, &tag, 1) ?: hutch_buf_append(b, value, strlen(value) + 1);
}

/* The same request in the form that needs no JSON parser (base/frame.h,
 * HUTCH_REQ_MAGIC): what POST /exec's JSON below carries, every byte of
 * a word, name or value as given. */
static int exec_body_bin(struct hutch_buf *b, char **argv, const struct hutch_cli_args *a,
                         bool brief)
{
	const char *term = getenv("TERM");
	bool term_set = false;
	char num[64] = "";
	uint16_t rows, cols;
	int r = hutch_buf_append(b, HUTCH_REQ_MAGIC, HUTCH_REQ_MAGIC_LEN);

	for (char **w = argv ? argv : login_shell; r >= 0 && *w; w++)
		r = field(b, HUTCH_REQ_ARG, *w);
	if (a->cwd)
		r = r ?: field(b, HUTCH_REQ_CWD, a->cwd);
	if (a->tty && hutch_cli_window_size(&rows, &cols))
		snprintf(num, sizeof(num), "%u %u", rows, cols);
	if (a->tty)
		r = r ?: field(b, HUTCH_REQ_TTY, num);
	for (size_t i = 0; r >= 0 && i < a->env.n; i++) {
		r = field(b, HUTCH_REQ_ENV, a->env.kv[i]);
		term_set |= !strncmp(a->env.kv[i], "TERM=", 5);
	}
	/* The caller's terminal type, unless -e says otherwise. */
	if (a->tty && term && *term && !term_set) {
		_cleanup_free_ char *kv = NULL;

		if (asprintf(&kv, "TERM=%s", term) < 0)
			return -ENOMEM;
		r = r ?: field(b, HUTCH_REQ_ENV, kv);
	}
	if (a->timeout > 0) {
		snprintf(num, sizeof(num), "%.17g", a->timeout);
		r = r ?: field(b, HUTCH_REQ_TIMEOUT, num);
	}
	if (brief)
		r = r ?: field(b, HUTCH_REQ_BRIEF, "");
	return r;
}

char *hutch_cli_exec_body(char **argv, const struct hutch_cli_args *a, unsigned flags,
                          size_t *ret_len)
{
	struct hutch_buf b;
	const char *term = getenv("TERM");
	bool term_set = false, first = true, brief = flags & HUTCH_CLI_BODY_BRIEF;
	char num[64];
	uint16_t rows, cols;
	int r;

	hutch_buf_init(&b, SIZE_MAX);
	if (flags & HUTCH_CLI_BODY_OWN) {
		r = exec_body_bin(&b, argv, a, brief);
		if (r < 0) {
			hutch_buf_done(&b);
			return NULL;
		}
		*ret_len = b.len;
		return b.data;
	}
	r = put(&b, "{\"argv\":[");
	for (char **w = argv ? argv : login_shell; r >= 0 && *w; w++, first = false)
		r = (first ? 0 : put(&b, ",")) ?: hutch_buf_append_json_str(&b, *w);
	r = r ?: put(&b, "]");
	if (a->cwd)
		r = r ?: put(&b, ",\"cwd\":") ?: hutch_buf_append_json_str(&b, a->cwd);
	if (a->tty && hutch_cli_window_size(&rows, &cols)) {
		snprintf(num, sizeof(num), ",\"tty\":{\"rows\":%u,\"cols\":%u}", rows, cols);
		r = r ?: put(&b, num);
	} else if (a->tty) {
		r = r ?: put(&b, ",\"tty\":{}");
	}
	first = true;
	for (size_t i = 0; r >= 0 && i < a->env.n; i++) {
		const char *kv = a->env.kv[i], *eq = strchr(kv, '=');
		_cleanup_free_ char *name = strndup(kv, (size_t)(eq - kv));

		r = name ? put(&b, first ? ",\"env\":{" : ",") : -ENOMEM;
		r = r ?: hutch_buf_append_json_str(&b, name) ?: put(&b, ":") ?:
		    hutch_buf_append_json_str(&b, eq + 1);
		term_set |= name && !strcmp(name, "TERM");
		first = false;
	}
	/* The caller's terminal type, unless -e says otherwise. */
	if (a->tty && term && *term && !term_set) {
		r = r ?: put(&b, first ? ",\"env\":{" : ",") ?: put(&b, "\"TERM\":") ?:
		    hutch_buf_append_json_str(&b, term);
		first = false;
	}
	r = r ?: (first ? 0 : put(&b, "}"));
	if (a->timeout > 0) {
		snprintf(num, sizeof(num), ",\"timeout\":%.17g", a->timeout);
		r = r ?: put(&b, num);
	}
	if (brief)
		r = r ?: put(&b, ",\"exit_frame\":\"brief\"");
	r = r ?: hutch_buf_append(&b, "}", 2); /* with its NUL */
	if (r < 0) {
		hutch_buf_done(&b);
		return NULL;
	}
	*ret_len = b.len - 1;
	return b.data;
}

int hutch_cli_run_prepare(char **argv, const struct hutch_cli_args *a, int *ret_ours,
                          int *ret_theirs)
{
	_cleanup_free_ char *body = NULL;
	uint8_t head[4], eof[HUTCH_FRAME_HDR];
	struct iovec iov[3];
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 3 };
	size_t len, total;
	int sp[2];
	ssize_t n;

	/* -t sets the terminal raw before the request (stream()) */
	if (a->tty)
		return 1;
	body = hutch_cli_exec_body(argv, a,
	                           HUTCH_CLI_BODY_OWN | (a->json ? 0 : HUTCH_CLI_BODY_BRIEF), &len);
	if (!body)
		return 1;
	head[0] = (uint8_t)(len >> 24);
	head[1] = (uint8_t)(len >> 16);
	head[2] = (uint8_t)(len >> 8);
	head[3] = (uint8_t)len;
	hutch_frame_header(eof, HUTCH_FRAME_STDIN, 0);
	iov[0] = (struct iovec){ head, sizeof(head) };
	iov[1] = (struct iovec){ body, len };
	iov[2] = (struct iovec){ eof, a->interactive ? 0 : sizeof(eof) };
	total = sizeof(head) + len + iov[2].iov_len;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return 1;
	/* whole at once, or the acknowledgement carries it as before */
	do
		n = sendmsg(sp[0], &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 || (size_t)n != total) {
		hutch_close_many(sp, 2);
		return 1;
	}
	*ret_ours = sp[0];
	*ret_theirs = sp[1];
	return 0;
}
