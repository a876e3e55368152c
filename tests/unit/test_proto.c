/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the supervisor <-> init protocol: spawn bodies encoded and
 * decoded (and malformed ones refused), and messages with fds over a
 * SOCK_SEQPACKET socketpair, including hostile ones: too long, lying about
 * their length, carrying more fds than asked for.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "changes-format.h"

#include "caps.h"
#include "pipe-util.h"
#include "proto.h"

/* Big (HUTCH_SPAWN_MAX_ARGS pointers): not on the stack. */
static struct hutch_spawn_req req;

static void test_spawn_round_trip(void **state)
{
	const char *argv[] = { "/bin/echo", "a b", "", "\xc3\xa9", NULL };
	const char *envp[] = { "PATH=/bin", "EMPTY=", NULL };
	char *buf = NULL;
	ssize_t n;

	(void)state;
	n = hutch_proto_spawn_encode(argv, envp, "/workspace", &buf);
	assert_true(n > 0);
	assert_int_equal(n, sizeof(struct hutch_msg_spawn) + 10 + 4 + 1 + 3 + 10 + 7 + 11);
	memset(&req, 0, sizeof(req));
	assert_int_equal(hutch_proto_spawn_decode(buf, (size_t)n, &req), 0);
	assert_int_equal(req.argc, 4);
	assert_int_equal(req.envc, 2);
	for (int i = 0; i < 4; i++)
		assert_string_equal(req.argv[i], argv[i]);
	assert_null(req.argv[4]);
	assert_string_equal(req.envp[0], "PATH=/bin");
	assert_string_equal(req.envp[1], "EMPTY=");
	assert_null(req.envp[2]);
	assert_string_equal(req.cwd, "/workspace");
	/* Pointers point into the body. */
	assert_true(req.argv[0] > buf && req.cwd < buf + n);
	free(buf);

	/* No environment at all. */
	n = hutch_proto_spawn_encode((const char *[]){ "x", NULL }, (const char *[]){ NULL }, "/",
	                             &buf);
	assert_true(n > 0);
	assert_int_equal(hutch_proto_spawn_decode(buf, (size_t)n, &req), 0);
	assert_int_equal(req.envc, 0);
	assert_null(req.envp[0]);
	free(buf);
}

static void test_spawn_encode_limits(void **state)
{
	static const char *many[HUTCH_SPAWN_MAX_ENV + 2];
	const char *argv[] = { "x", NULL };
	char *buf = NULL, *huge;

	(void)state;
	assert_int_equal(hutch_proto_spawn_encode((const char *[]){ NULL }, argv, "/", &buf),
	                 -EINVAL);
	for (size_t i = 0; i < HUTCH_SPAWN_MAX_ENV + 1; i++)
		many[i] = "A=1";
	assert_int_equal(hutch_proto_spawn_encode(argv, many, "/", &buf), -EINVAL);
	many[HUTCH_SPAWN_MAX_ENV] = NULL;
	assert_true(hutch_proto_spawn_encode(argv, many, "/", &buf) > 0);
	free(buf);
	buf = NULL;
	huge = malloc(HUTCH_PROTO_MAX);
	assert_non_null(huge);
	memset(huge, 'a', HUTCH_PROTO_MAX - 1);
	huge[HUTCH_PROTO_MAX - 1] = '\0';
	assert_int_equal(hutch_proto_spawn_encode((const char *[]){ huge, NULL }, argv, "/", &buf),
	                 -E2BIG);
	assert_null(buf);
	free(huge);
}

/* Decode a copy of body[0..len) in a buffer of exactly len bytes, so ASan
 * sees any read past it. */
static int decode_exact(const char *body, size_t len)
{
	char *copy = malloc(len ? len : 1);
	int r;

	assert_non_null(copy);
	memcpy(copy, body, len);
	r = hutch_proto_spawn_decode(copy, len, &req);
	free(copy);
	return r;
}

/* buf's fixed part replaced by fixed, decoded. */
static int decode_fixed(char *buf, size_t n, const struct hutch_msg_spawn *fixed)
{
	memcpy(buf, fixed, sizeof(*fixed));
	return decode_exact(buf, n);
}

static void test_spawn_decode_bad(void **state)
{
	const char *argv[] = { "sh", "-c", "true", NULL };
	const char *envp[] = { "A=1", NULL };
	static const struct {
		uint32_t argc, envc;
	} lies[] = {
		{ 0, 1 },          { HUTCH_SPAWN_MAX_ARGS + 1, 1 },
		{ UINT32_MAX, 1 }, { 3, HUTCH_SPAWN_MAX_ENV + 1 },
		{ 3, UINT32_MAX }, { 3, 2 },
		{ 3, 0 },
	};
	struct hutch_msg_spawn fixed;
	char *buf = NULL, *junk;
	ssize_t n;

	(void)state;
	n = hutch_proto_spawn_encode(argv, envp, "/w", &buf);
	assert_true(n > 0);
	assert_int_equal(decode_exact(buf, (size_t)n), 0);

	/* Truncated anywhere: shorter than the fixed part, not NUL-terminated,
	 * or cut after a NUL with strings missing. */
	for (size_t len = 0; len < (size_t)n; len++)
		assert_int_equal(decode_exact(buf, len), -EBADMSG);
	/* Trailing junk, with or without a final NUL. */
	junk = malloc((size_t)n + 3);
	assert_non_null(junk);
	memcpy(junk, buf, (size_t)n);
	memcpy(junk + n, "x\0", 2);
	assert_int_equal(decode_exact(junk, (size_t)n + 2), -EBADMSG);
	assert_int_equal(decode_exact(junk, (size_t)n + 1), -EBADMSG);
	junk[n] = '\0';
	assert_int_equal(decode_exact(junk, (size_t)n + 1), -EBADMSG);
	free(junk);

	/* Counts that lie, and one string more or fewer than the body holds
	 * (it holds 3 and 1). */
	memcpy(&fixed, buf, sizeof(fixed));
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		fixed.argc = lies[i].argc;
		fixed.envc = lies[i].envc;
		if (decode_fixed(buf, (size_t)n, &fixed) != -EBADMSG)
			fail_msg("argc %u envc %u decoded", lies[i].argc, lies[i].envc);
	}
	/* A capability beyond a container's set, in any of the five. */
	fixed.argc = 3;
	fixed.envc = 1;
	for (int i = 0; i < HUTCH_CAPS_SETS; i++) {
		fixed.caps[i] = HUTCH_CAPS_CONTAINER_MAX;
		assert_int_equal(decode_fixed(buf, (size_t)n, &fixed), 0);
		fixed.caps[i] |= HUTCH_CAP_BIT(CAP_SYS_ADMIN);
		assert_int_equal(decode_fixed(buf, (size_t)n, &fixed), -EBADMSG);
		fixed.caps[i] = 0;
	}
	/* Additional groups: at most HUTCH_SPAWN_MAX_GROUPS, each an id of
	 * the sandbox's range. */
	fixed.ngroups = 2;
	fixed.groups[0] = 5;
	fixed.groups[1] = HUTCH_SPAWN_MAX_ID;
	assert_int_equal(decode_fixed(buf, (size_t)n, &fixed), 0);
	assert_int_equal(req.ngroups, 2);
	assert_int_equal(req.groups[0], 5);
	assert_int_equal(req.groups[1], HUTCH_SPAWN_MAX_ID);
	fixed.groups[1] = HUTCH_SPAWN_MAX_ID + 1;
	assert_int_equal(decode_fixed(buf, (size_t)n, &fixed), -EBADMSG);
	fixed.groups[1] = 0;
	fixed.ngroups = HUTCH_SPAWN_MAX_GROUPS + 1;
	assert_int_equal(decode_fixed(buf, (size_t)n, &fixed), -EBADMSG);
	free(buf);
}

static void seqpacket(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

static void test_send_recv_fds(void **state)
{
	static const char body[] = "hello";
	struct hutch_msg_hdr hdr;
	char buf[64], c = 0;
	int sv[2], p[2], fds[4] = { -1, -1, -1, -1 };
	size_t nfds = 4;

	(void)state;
	seqpacket(sv);
	nb_pipe(p);
	assert_int_equal(hutch_proto_send(sv[0], HUTCH_MSG_SPAWN, 42, body, sizeof(body), &p[1], 1),
	                 0);
	close(p[1]);
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, sizeof(buf), fds, &nfds), sizeof(body));
	assert_int_equal(hdr.type, HUTCH_MSG_SPAWN);
	assert_int_equal(hdr.id, 42);
	assert_int_equal(hdr.len, sizeof(body));
	assert_string_equal(buf, "hello");
	assert_int_equal(nfds, 1);
	assert_true(fds[0] >= 0);
	assert_true(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	/* The fd received works: it is the pipe's write end. */
	assert_int_equal(write(fds[0], "z", 1), 1);
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(c, 'z');
	close(fds[0]);
	assert_true(write_end_closed(p[0]));
	close(p[0]);

	/* No body, no fds; a message with an empty body is not EOF. */
	nfds = 4;
	assert_int_equal(hutch_proto_send(sv[1], HUTCH_MSG_READY, 0, NULL, 0, NULL, 0), 0);
	assert_int_equal(hutch_proto_recv(sv[0], &hdr, buf, sizeof(buf), fds, &nfds), 0);
	assert_int_equal(hdr.type, HUTCH_MSG_READY);
	assert_int_equal(nfds, 0);

	/* More than HUTCH_PROTO_FDS_MAX fds are refused at send. */
	{
		int many[HUTCH_PROTO_FDS_MAX + 1] = { 0 };
		assert_int_equal(hutch_proto_send(sv[0], HUTCH_MSG_SPAWN, 1, NULL, 0, many,
		                                  sizeof(many) / sizeof(many[0])),
		                 -EINVAL);
	}

	/* Nonblocking with nothing queued. */
	assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, sizeof(buf), NULL, NULL), -EAGAIN);

	/* EOF: 0 with type 0. */
	close(sv[0]);
	hdr.type = 77;
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, sizeof(buf), NULL, NULL), 0);
	assert_int_equal(hdr.type, 0);
	close(sv[1]);
}

static void test_recv_extra_fds_closed(void **state)
{
	struct hutch_msg_hdr hdr;
	char buf[16];
	int sv[2], p[2], fds[4], got[4] = { -1, -1, -1, -1 };
	size_t nfds = 1;

	(void)state;
	seqpacket(sv);
	nb_pipe(p);
	for (int i = 0; i < 4; i++)
		fds[i] = p[1];
	/* Four copies of the write end; the receiver takes one. */
	assert_int_equal(hutch_proto_send(sv[0], HUTCH_MSG_SPAWN, 1, "x", 1, fds, 4), 0);
	close(p[1]);
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, sizeof(buf), got, &nfds), 1);
	assert_int_equal(nfds, 1);
	assert_int_equal(got[1], -1);
	assert_false(write_end_closed(p[0]));
	close(got[0]);
	assert_true(write_end_closed(p[0]));
	close(p[0]);

	/* A receiver that takes none (nfds NULL) closes them all. */
	nb_pipe(p);
	for (int i = 0; i < 4; i++)
		fds[i] = p[1];
	assert_int_equal(hutch_proto_send(sv[0], HUTCH_MSG_SPAWN, 2, "x", 1, fds, 4), 0);
	close(p[1]);
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, sizeof(buf), NULL, NULL), 1);
	assert_true(write_end_closed(p[0]));
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}

/* sendmsg() a raw datagram with nfds copies of fd, bypassing hutch_proto_send. */
static void send_raw(int sock, const void *data, size_t len, int fd, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * (HUTCH_PROTO_FDS_MAX + 8))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	assert_true(nfds <= HUTCH_PROTO_FDS_MAX + 8);
	if (nfds) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		for (size_t i = 0; i < nfds; i++)
			memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
	}
	assert_int_equal(sendmsg(sock, &msg, 0), (ssize_t)len);
}

/* The next message on sock refused (-EBADMSG) with the fds it carried
 * closed: the only other holder of the pipe's write end is gone. */
static void assert_refused(int sock, int read_end)
{
	struct hutch_msg_hdr hdr;
	int got[4] = { -1, -1, -1, -1 };
	char buf[16];
	size_t nfds = 4;

	assert_int_equal(hutch_proto_recv(sock, &hdr, buf, sizeof(buf), got, &nfds), -EBADMSG);
	assert_int_equal(nfds, 0);
	assert_true(write_end_closed(read_end));
	close(read_end);
}

static void test_recv_hostile(void **state)
{
	struct hutch_msg_hdr hdr, lie = { .type = HUTCH_MSG_EXITED, .len = 50, .id = 1 };
	char big[200] = { 0 }, buf[16];
	int sv[2], p[2];

	(void)state;
	seqpacket(sv);

	/* Longer than the buffer: MSG_TRUNC, refused, its fds closed. */
	nb_pipe(p);
	assert_int_equal(hutch_proto_send(sv[0], HUTCH_MSG_EXITED, 1, big, sizeof(big), &p[1], 1),
	                 0);
	close(p[1]);
	assert_refused(sv[1], p[0]);

	/* A header that lies about the body length. */
	memcpy(big, &lie, sizeof(lie));
	nb_pipe(p);
	send_raw(sv[0], big, sizeof(lie) + 10, p[1], 2);
	close(p[1]);
	assert_refused(sv[1], p[0]);

	/* Shorter than a header. */
	send_raw(sv[0], "abcd", 4, -1, 0);
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, sizeof(buf), NULL, NULL), -EBADMSG);

	/* More fds than the control buffer holds (MSG_CTRUNC): all closed. */
	lie.len = 0;
	nb_pipe(p);
	send_raw(sv[0], &lie, sizeof(lie), p[1], HUTCH_PROTO_FDS_MAX + 4);
	close(p[1]);
	assert_refused(sv[1], p[0]);

	/* The socket still works after all that. */
	assert_int_equal(hutch_proto_send(sv[0], HUTCH_MSG_GO, 9, NULL, 0, NULL, 0), 0);
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, sizeof(buf), NULL, NULL), 0);
	assert_int_equal(hdr.type, HUTCH_MSG_GO);
	assert_int_equal(hdr.id, 9);
	close(sv[0]);
	close(sv[1]);
}

/* A message larger than the sender's buffer allows (SO_SNDBUF stops at
 * net.core.wmem_max without CAP_NET_ADMIN: 212,992 bytes on Debian 12's
 * 6.1, where a rootless run with a 900 KB env failed EMSGSIZE): sent with
 * its body in a memfd after its fds, received as one message. */
static void test_send_larger_than_the_buffer(void **state)
{
	size_t len = 900 * 1024, nfds = HUTCH_PROTO_FDS_MAX;
	char *body = malloc(len), *buf = malloc(HUTCH_PROTO_MAX);
	int sv[2], p[2], fds[HUTCH_PROTO_FDS_MAX], got[HUTCH_PROTO_FDS_MAX], small = 64 * 1024;
	struct hutch_msg_hdr hdr;

	(void)state;
	assert_non_null(body);
	assert_non_null(buf);
	for (size_t i = 0; i < len; i++)
		body[i] = (char)(i * 7 + i / 4096);
	seqpacket(sv);
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	nb_pipe(p);
	for (size_t i = 0; i < HUTCH_PROTO_FDS_MAX; i++)
		fds[i] = p[1];
	assert_int_equal(hutch_proto_send(sv[0], HUTCH_MSG_SPAWN, 5, body, len, fds, nfds), 0);
	close(p[1]);
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, HUTCH_PROTO_MAX, got, &nfds),
	                 (ssize_t)len);
	assert_int_equal(hdr.type, HUTCH_MSG_SPAWN);
	assert_int_equal(hdr.id, 5);
	assert_int_equal(nfds, HUTCH_PROTO_FDS_MAX); /* the memfd is not among them */
	assert_memory_equal(buf, body, len);
	for (size_t i = 0; i < nfds; i++)
		close(got[i]);
	assert_true(write_end_closed(p[0]));
	close(p[0]);
	/* a receiver's buffer too small for it: refused, nothing left open */
	nfds = HUTCH_PROTO_FDS_MAX;
	assert_int_equal(hutch_proto_send(sv[0], HUTCH_MSG_SPAWN, 6, body, len, NULL, 0), 0);
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, len - 1, got, &nfds), -EBADMSG);
	assert_int_equal(nfds, 0);
	/* over HUTCH_PROTO_MAX, or a type with the flag already: refused */
	assert_int_equal(hutch_proto_send(sv[0], HUTCH_MSG_SPAWN, 7, buf, HUTCH_PROTO_MAX, NULL, 0),
	                 -EINVAL);
	assert_int_equal(
	        hutch_proto_send(sv[0], HUTCH_MSG_SPAWN | HUTCH_MSG_F_MEMFD, 7, "x", 1, NULL, 0),
	        -EINVAL);
	free(body);
	free(buf);
	close(sv[0]);
	close(sv[1]);
}

/* A hostile HUTCH_MSG_F_MEMFD message: its "memfd" a pipe (a read could
 * block), unsealed (could change while read), shorter than it says, or
 * missing, or with a body in the datagram too: refused, its fds closed. */
static void test_recv_memfd_hostile(void **state)
{
	struct hutch_msg_hdr hdr, lie = { .type = HUTCH_MSG_SPAWN | HUTCH_MSG_F_MEMFD, .len = 8 };
	char buf[64], with_body[sizeof(lie) + 8] = { 0 };
	int sv[2], p[2], mfd, got[4] = { -1, -1, -1, -1 };
	size_t nfds;

	(void)state;
	seqpacket(sv);
	nb_pipe(p);
	send_raw(sv[0], &lie, sizeof(lie), p[1], 1);
	close(p[1]);
	assert_refused(sv[1], p[0]);
	mfd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(mfd >= 0);
	assert_int_equal(write(mfd, "1234", 4), 4);
	for (int i = 0; i < 3; i++) {
		if (i == 1) /* sealed but 4 bytes, not 8 */
			assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK), 0);
		memcpy(with_body, &lie, sizeof(lie));
		/* the third: the body in the datagram as well */
		send_raw(sv[0], with_body, i < 2 ? sizeof(lie) : sizeof(with_body), mfd, 1);
		nfds = 4;
		assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, sizeof(buf), got, &nfds),
		                 -EBADMSG);
		assert_int_equal(nfds, 0);
	}
	close(mfd);
	send_raw(sv[0], &lie, sizeof(lie), -1, 0); /* no fd at all */
	assert_int_equal(hutch_proto_recv(sv[1], &hdr, buf, sizeof(buf), NULL, NULL), -EBADMSG);
	close(sv[0]);
	close(sv[1]);
}

/* A change list as init sends it: decoded into its JSON; anything out of
 * shape (a kind, a length, a path not absolute or with a NUL) refused. */
static size_t change_list(char *buf, uint8_t kind, const char *path, uint16_t plen)
{
	struct hutch_changes_hdr h = { .n = 1, .omitted = 7 };
	struct hutch_change_rec r = { .kind = kind,
		                      .what = HUTCH_CHANGED_MODE,
		                      .path_len = plen,
		                      .mode = 0100640,
		                      .size = 12 };

	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &r, sizeof(r));
	memcpy(buf + sizeof(h) + sizeof(r), path, strlen(path));
	return sizeof(h) + sizeof(r) + strlen(path);
}

static void test_changes_decode(void **state)
{
	char buf[256], *text;
	size_t n = change_list(buf, HUTCH_CHANGE_MODIFIED, "/workspace/a", 12);
	cJSON *o = hutch_changes_to_json(buf, n);

	(void)state;
	assert_non_null(o);
	text = cJSON_PrintUnformatted(o);
	assert_string_equal(text,
	                    "{\"created\":[],\"modified\":[{\"path\":\"/workspace/a\","
	                    "\"type\":\"file\",\"size\":12,\"mode\":416,\"what\":[\"mode\"]}],"
	                    "\"deleted\":[],\"omitted\":7,\"shared\":false,\"complete\":true}");
	free(text);
	cJSON_Delete(o);
	assert_null(hutch_changes_to_json(buf, n - 1)); /* cut */
	assert_null(hutch_changes_to_json(buf, n + 1)); /* trailing byte */
	assert_null(hutch_changes_to_json(buf, 3));     /* no header */
	n = change_list(buf, 4, "/workspace/a", 12);    /* no such kind */
	assert_null(hutch_changes_to_json(buf, n));
	n = change_list(buf, HUTCH_CHANGE_CREATED, "workspace/a", 11); /* relative */
	assert_null(hutch_changes_to_json(buf, n));
	n = change_list(buf, HUTCH_CHANGE_CREATED, "/a", 200); /* longer than the message */
	assert_null(hutch_changes_to_json(buf, n));
	n = change_list(buf, HUTCH_CHANGE_DELETED, "/a\xff", 3); /* bytes kept as UTF-8 */
	assert_non_null(o = hutch_changes_to_json(buf, n));
	cJSON_Delete(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spawn_round_trip),
		cmocka_unit_test(test_spawn_encode_limits),
		cmocka_unit_test(test_spawn_decode_bad),
		cmocka_unit_test(test_send_recv_fds),
		cmocka_unit_test(test_recv_extra_fds_closed),
		cmocka_unit_test(test_recv_hostile),
		cmocka_unit_test(test_send_larger_than_the_buffer),
		cmocka_unit_test(test_recv_memfd_hostile),
		cmocka_unit_test(test_changes_decode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
