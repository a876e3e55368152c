/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A warm pool's claim of one sandbox, its token taken (pool.c): POST
 * /claim, or hutch run's on the sandbox's exec.sock, the claim and the
 * command in one message (supervisor/api/exec-run.c; docs/api.md, "POST
 * /claim"): no connection to the API, no DELETE / after the command (the
 * connection that claimed is the run's hand-over, as a cold run's).
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "client.h"
#include "frame.h"
#include "pool.h"
#include "state.h"
#include "syscalls.h"

/* Send POST /claim to one sandbox taken from the pool (ret's id and
 * paths filled). */
static int claim_one(const char *body, struct hutch_created *ret, struct hutch_err *err)
{
	struct hutch_http_resp resp = { 0 };
	_cleanup_cjson_ cJSON *j = NULL;
	int r;

	r = hutch_client_request(ret->paths.sock, "POST", "/claim", body, strlen(body), &resp, err);
	if (r < 0)
		return r;
	if (resp.status == 200)
		j = cJSON_ParseWithLength(resp.body.data ? resp.body.data : "", resp.body.len);
	if (!j) {
		r = hutch_err_set(err, -EPROTO, "claim of pooled sandbox %s answered %ld: %.200s",
		                  ret->id, resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return r;
	}
	hutch_http_resp_done(&resp);
	ret->created_at = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "created_at_unix"));
	ret->expires_at = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "expires_at_unix"));
	return 1;
}

/* exec.sock's answer to a warm run's claim: one control frame, CLAIMED or
 * REFUSED, within the API's timeout; its payload in d->ctl. */
static int claim_answer(int fd, const char *id, struct hutch_frame_ev *ev,
                        struct hutch_frame_dec *d, struct hutch_err *err)
{
	int timeout = hutch_client_timeout_ms(err);
	char buf[512];

	if (timeout == -EINVAL)
		return timeout;
	hutch_frame_dec_init(d, HUTCH_FRAME_BIT(HUTCH_FRAME_CLAIMED) |
	                                HUTCH_FRAME_BIT(HUTCH_FRAME_REFUSED));
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;
		size_t off = 0;
		int r = poll(&p, 1, timeout);

		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return hutch_err_set(err, -ETIMEDOUT,
			                     "pooled sandbox %s did not answer its claim", id);
		/* nothing follows the answer before the sandbox's end */
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return hutch_err_set(err, n < 0 ? -errno : -ECONNRESET,
			                     "pooled sandbox %s closed its claim", id);
		while (off < (size_t)n) {
			ssize_t used = hutch_frame_decode(d, buf + off, (size_t)n - off, ev);
			if (used < 0)
				return hutch_err_set(err, -EPROTO, "claim of pooled sandbox %s: %s",
				                     id, d->error);
			off += (size_t)used;
			if (ev->kind == HUTCH_FRAME_EV_CTL)
				return 0;
		}
	}
}

/* A pidfd of the process that listens on the socket fd is connected to
 * (its pid in *ret_pid), or -errno. */
static int peer_pidfd(int fd, pid_t *ret_pid)
{
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);
	int pidfd = -EBADF;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	*ret_pid = cred.pid;
	len = sizeof(pidfd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
		return -errno;
	return pidfd;
}

/* A warm run's claim on exec.sock (supervisor/api/exec-run.c): the body
 * as {"claim": body}, the command's stream (stream_fd, its request
 * written in it) passed with it; the connection, once CLAIMED answered,
 * is the run's hand-over (ret->handover_fd, as a cold run's). 1:
 * claimed; 0: not served so (no exec.sock, or a supervisor older than
 * the claim there): POST /claim instead; -errno with err set: refused. */
static int claim_run_one(const char *body, int stream_fd, struct hutch_created *ret,
                         struct hutch_err *err)
{
	static const char pre[] = "{\"claim\":", post[] = "}";
	struct hutch_err ignored = { 0 };
	char path[sizeof(ret->paths.exec)];
	/* the command's request in stream_fd is in the form without JSON:
	 * exec.sock's name for it (runtime/state.h), absent on an older
	 * supervisor's sandbox, which POST /claim and POST /exec then serve */
	_cleanup_close_ int fd = snprintf(path, sizeof(path), "%s/" HUTCH_EXEC_FORMS_NAME,
	                                  ret->paths.dir) < (int)sizeof(path)
	                                 ? hutch_client_connect(path, &ignored)
	                                 : -ENAMETOOLONG;
	_cleanup_cjson_ cJSON *j = NULL;
	struct hutch_frame_dec d;
	struct hutch_frame_ev ev = { 0 };
	size_t blen = strlen(body), len = sizeof(pre) - 1 + blen + sizeof(post) - 1;
	uint8_t head[4] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
		            (uint8_t)len };
	struct iovec iov[4] = { { head, sizeof(head) },
		                { (void *)pre, sizeof(pre) - 1 },
		                { (void *)body, blen },
		                { (void *)post, sizeof(post) - 1 } };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u = { 0 };
	struct msghdr m = {
		.msg_iov = iov, .msg_iovlen = 4, .msg_control = u.b, .msg_controllen = sizeof(u.b)
	};
	const cJSON *e;
	ssize_t n;
	int r;

	if (fd < 0)
		return 0;
	u.h.cmsg_level = SOL_SOCKET;
	u.h.cmsg_type = SCM_RIGHTS;
	u.h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&u.h), &stream_fd, sizeof(int));
	do
		n = sendmsg(fd, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)(sizeof(head) + len)) /* small: the empty socket takes it whole */
		return hutch_err_set(err, n < 0 ? -errno : -EPROTO,
		                     "claim of pooled sandbox %s: its socket took %zd bytes",
		                     ret->id, n);
	r = claim_answer(fd, ret->id, &ev, &d, err);
	if (r < 0)
		return r;
	j = cJSON_ParseWithLength(ev.data, ev.len);
	if (ev.type == HUTCH_FRAME_REFUSED) {
		e = cJSON_GetObjectItem(j, "error");
		if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "code")) ?: "",
		            "sandbox_pooled"))
			return 0; /* an older supervisor took it for a command */
		return hutch_err_set(
		        err, -EPROTO, "claim of pooled sandbox %s refused: %.200s", ret->id,
		        cJSON_GetStringValue(cJSON_GetObjectItem(e, "message")) ?: "(no message)");
	}
	ret->created_at = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "created_at_unix"));
	ret->expires_at = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "expires_at_unix"));
	ret->handover_fd = TAKE_FD(fd);
	ret->command_sent = true;
	/* The listener's process, its supervisor: bounds the run's waits
	 * (supervisor/sandbox.h; SO_PEERPIDFD: Linux 6.5, else none). */
	ret->sup_pidfd = peer_pidfd(ret->handover_fd, &ret->sup_pid);
	return 1;
}

int hutch_pool_claim_taken(const char *rt, const char *id, const char *body, int stream_fd,
                           struct hutch_created *ret, struct hutch_err *err)
{
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->handover_fd = ret->sup_pidfd = -EBADF; /* the pool's, unless a run's claim */
	memcpy(ret->id, id, HUTCH_ID_LEN);          /* a valid id: checked by the caller */
	ret->id[HUTCH_ID_LEN] = '\0';
	r = hutch_paths_init(rt, id, &ret->paths);
	if (r < 0)
		return hutch_err_set_errno(err, r, "sandbox paths");
	r = stream_fd >= 0 ? claim_run_one(body, stream_fd, ret, err) : 0;
	return r ? r : claim_one(body, ret, err);
}
