/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the command request parsers of the sandbox's
 * sockets (supervisor/api/request.c, scripts/fuzz): the input as a POST
 * /exec JSON body, and after the JSON-free form's magic (base/frame.h,
 * HUTCH_REQ_MAGIC: what exec.sock and a run's hand-over take from any
 * client of the sandbox's user). Besides memory safety: a parse either
 * fails with a message or gives an argv of at least one word, each inside
 * the request, and an env whose entries all have a '='.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "frame.h"
#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int r, struct hutch_run_req *req, const struct hutch_err *err)
{
	if (r < 0) {
		if (!err->msg[0])
			abort();
		return;
	}
	if (!req->argv || !req->argv[0])
		abort();
	for (char **e = req->envp; e && *e; e++)
		if (!strchr(*e, '='))
			abort();
	hutch_run_req_done(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hutch_run_req req;
	struct hutch_err err;
	char *buf = malloc(HUTCH_REQ_MAGIC_LEN + size + 1);
	int r;

	if (!buf)
		return 0;
	memset(&req, 0, sizeof(req));
	memset(&err, 0, sizeof(err));
	memcpy(buf, data, size);
	buf[size] = '\0';
	r = hutch_exec_req_parse(buf, size, NULL, &req, &err);
	check(r, &req, &err);
	memcpy(buf, HUTCH_REQ_MAGIC, HUTCH_REQ_MAGIC_LEN);
	memcpy(buf + HUTCH_REQ_MAGIC_LEN, data, size);
	memset(&req, 0, sizeof(req));
	memset(&err, 0, sizeof(err));
	r = hutch_exec_req_parse_bin(buf, HUTCH_REQ_MAGIC_LEN + size, NULL, &req, &err);
	check(r, &req, &err);
	free(buf);
	return 0;
}
