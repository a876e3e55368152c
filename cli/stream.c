/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running a command in a sandbox with its output streamed (hutch run and
 * exec): standard input sent along, the API's events written out as they
 * come, the command's exit turned into hutch's exit code, Ctrl-C and
 * SIGTERM ending the command only.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "fdutil.h"
#include "stream.h"
#include "util.h"

#define STDIN_MAX (6u << 20)

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	interrupted = sig;
}

void hutch_cli_catch_interrupts(void)
{
	struct sigaction sa = { .sa_handler = on_interrupt };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int hutch_cli_interrupted(void)
{
	return interrupted;
}

/* Read all of stdin when it is not a terminal. */
static int read_stdin(char **ret, size_t *ret_len)
{
	struct hutch_buf b;
	char chunk[65536];

	*ret = NULL;
	*ret_len = 0;
	if (isatty(0))
		return 0;
	hutch_buf_init(&b, STDIN_MAX + 1);
	for (;;) {
		ssize_t n = read(0, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR) {
			if (interrupted)
				break;
			continue;
		}
		if (n <= 0)
			break;
		(void)hutch_buf_append(&b, chunk, (size_t)n);
		if (b.truncated) {
			hutch_buf_done(&b);
			return hutch_cli_fail(
			        HUTCH_EXIT_USAGE,
			        "standard input is larger than %u bytes: copy the data into the "
			        "sandbox as a file, or pass -n to not send stdin",
			        STDIN_MAX);
		}
	}
	*ret = hutch_utf8_sanitize(b.data ? b.data : "", b.len, NULL);
	*ret_len = *ret ? strlen(*ret) : 0;
	hutch_buf_done(&b);
	return 0;
}

/* ---- streaming a command ---- */

struct run_state {
	int exit_code;
	bool got_exit;
};

static int json_exit_code(const cJSON *res)
{
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(res, "exit_code");
	const cJSON *sig = cJSON_GetObjectItemCaseSensitive(res, "signal");
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(res, "message");

	if (cJSON_IsString(msg))
		fprintf(stderr, "hutch: %s\n", msg->valuestring);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "timed_out")))
		return HUTCH_EXIT_TIMEOUT;
	if (cJSON_IsNumber(code))
		return code->valueint;
	if (cJSON_IsNumber(sig))
		return 128 + sig->valueint;
	return HUTCH_EXIT_FAILURE;
}

static int on_event(void *ud, const char *event, const char *data, size_t len)
{
	struct run_state *rs = ud;
	_cleanup_cjson_ cJSON *j = cJSON_ParseWithLength(data, len);
	const cJSON *d;

	if (!j)
		return 0;
	if (!strcmp(event, "stdout") || !strcmp(event, "stderr")) {
		d = cJSON_GetObjectItemCaseSensitive(j, "data");
		if (cJSON_IsString(d))
			(void)hutch_write_all(event[3] == 'o' ? 1 : 2, d->valuestring,
			                      strlen(d->valuestring));
	} else if (!strcmp(event, "exit")) {
		rs->exit_code = json_exit_code(j);
		rs->got_exit = true;
	} else if (!strcmp(event, "error")) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
		fprintf(stderr, "hutch: %s\n", cJSON_IsString(m) ? m->valuestring : "error");
		rs->exit_code = HUTCH_EXIT_GONE;
		rs->got_exit = true;
	}
	return 0;
}

int hutch_cli_api_error(long status, const char *body)
{
	_cleanup_cjson_ cJSON *j = cJSON_Parse(body);
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");

	fprintf(stderr, "hutch: %s\n", cJSON_IsString(m) ? m->valuestring : body);
	if (status == 410)
		return HUTCH_EXIT_GONE;
	if (status == 400 || status == 413)
		return HUTCH_EXIT_USAGE;
	return HUTCH_EXIT_FAILURE;
}
int hutch_cli_stream_command(const char *sock, char **argv, const struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *req = cJSON_CreateObject();
	_cleanup_free_ char *body = NULL, *in = NULL;
	struct hutch_http_resp resp;
	struct hutch_err err = { 0 };
	struct run_state rs = { .exit_code = HUTCH_EXIT_FAILURE };
	cJSON *arr = cJSON_AddArrayToObject(req, "argv");
	size_t in_len = 0;
	int r;

	for (char **w = argv; *w; w++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(*w));
	if (a->cwd)
		cJSON_AddStringToObject(req, "cwd", a->cwd);
	if (a->env)
		cJSON_AddItemReferenceToObject(req, "env", a->env);
	if (a->timeout > 0)
		cJSON_AddNumberToObject(req, "timeout", a->timeout);
	if (!a->no_stdin) {
		r = read_stdin(&in, &in_len);
		if (r)
			return r;
		if (interrupted) /* while reading stdin: CMD never starts */
			return 128 + interrupted;
		if (in_len)
			cJSON_AddStringToObject(req, "stdin", in);
	}
	body = cJSON_PrintUnformatted(req);
	if (!body)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	r = hutch_client_stream(sock, "/run_streaming", body, strlen(body), on_event, &rs,
	                        &interrupted, &resp, &err);
	if (r < 0) {
		hutch_http_resp_done(&resp);
		if (r == -ECANCELED)
			return 128 + (interrupted ? interrupted : SIGINT);
		if (rs.got_exit)
			return rs.exit_code; /* the last event came; a broken end does not matter */
		return hutch_cli_lost(sock, r, err.msg);
	}
	if (resp.status != 200) {
		r = hutch_cli_api_error(resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return r;
	}
	hutch_http_resp_done(&resp);
	if (interrupted)
		return 128 + interrupted;
	if (!rs.got_exit)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE,
		                      "the sandbox closed the stream before the command "
		                      "finished");
	return rs.exit_code;
}
