/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP client of the CLI, over a sandbox's unix socket: one request and
 * its answer, or a request that upgrades the connection to a stream.
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

/* The longest wait for an answer in ms (HUTCH_API_TIMEOUT), -1 for none, or
 * -EINVAL with err filled for an invalid value. */
int hutch_client_timeout_ms(struct hutch_err *err);

/* A connected unix stream socket, or -errno with err filled (a missing
 * socket file is -ECONNREFUSED, as a socket nobody listens on). */
int hutch_client_connect(const char *path, struct hutch_err *err);

/* One request; body may be NULL. err is filled only for transport errors
 * (-ECONNREFUSED, -ENOENT when the socket is gone, -ETIMEDOUT when no
 * answer came within hutch_client_timeout_ms()). */
int hutch_client_request(const char *sock, const char *method, const char *path, const char *body,
                         size_t len, struct hutch_http_resp *ret, struct hutch_err *err);

/* hutch_client_request() in two halves, for a caller with something to do
 * while the server works (hutch fork: the first fork's create while the
 * source clones its disk): the request sent (*ret_fd: its connection,
 * readable once the answer comes), then the answer read from it (fd
 * closed, whatever the result). Errors as hutch_client_request()'s. */
int hutch_client_request_begin(const char *sock, const char *method, const char *path,
                               const char *body, size_t len, int *ret_fd, struct hutch_err *err);
int hutch_client_request_end(int fd, const char *sock, struct hutch_http_resp *ret,
                             struct hutch_err *err);

/* POST body to path asking to switch the connection to proto (docs/api.md,
 * POST /exec), with headers (more header lines, each ended by "\r\n",
 * or ""); tail is sent right after the body. On 101 Switching
 * Protocols *ret_fd is the connected socket (the caller closes it) and
 * *ret_extra (malloc'ed, the caller frees) the stream's bytes that came
 * with the answer; any other answer is left in ret and *ret_fd is -EBADF.
 * err is filled only for transport errors. */
int hutch_client_upgrade(const char *sock, const char *path, const char *proto, const char *headers,
                         const char *body, size_t len, const void *tail, size_t tail_len,
                         volatile sig_atomic_t *cancel, struct hutch_http_resp *ret, int *ret_fd,
                         char **ret_extra, size_t *ret_extra_len, struct hutch_err *err);

#endif
