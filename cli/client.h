/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP client of the CLI, over a sandbox's unix socket (libcurl), with a
 * server-sent-events reader for /run_streaming.
 */
#ifndef HUTCH_CLIENT_H
#define HUTCH_CLIENT_H

#include <signal.h>
#include <stddef.h>

#include "error.h"
#include "util.h"

struct hutch_http_resp {
	long status;
	struct hutch_buf body;
};

void hutch_http_resp_done(struct hutch_http_resp *r);

/* One request; body may be NULL. err is filled only for transport errors
 * (-ECONNREFUSED, -ENOENT when the socket is gone). */
int hutch_client_request(const char *sock, const char *method, const char *path, const char *body,
                         size_t len, struct hutch_http_resp *ret, struct hutch_err *err);

/* Called per event; return < 0 to abort the stream. */
typedef int (*hutch_sse_cb)(void *ud, const char *event, const char *data, size_t len);

/* POST body to path and feed each event to cb. A non-200 answer is left in
 * ret (body not parsed as events). *cancel, when set by a signal handler,
 * aborts the transfer (the server then kills the command). */
int hutch_client_stream(const char *sock, const char *path, const char *body, size_t len,
                        hutch_sse_cb cb, void *ud, volatile sig_atomic_t *cancel,
                        struct hutch_http_resp *ret, struct hutch_err *err);

#endif
