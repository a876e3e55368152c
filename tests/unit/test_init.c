/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of init's request handling (init/init.c), without root and
 * without being pid 1: the test is the supervisor on one end of a
 * SOCK_SEQPACKET socketpair, the handling serves the other end
 * (hutch_init_server_*(), init.h) and makes its syscalls through fakes
 * (struct hutch_init_sys, init/launch.h) that record what they were asked
 * and answer what the test says: the spawned pid or an error, the
 * processes of /proc, the exits waitpid() reports, a pty.
 *
 * Asserted: the answers (SPAWNED, EXITED, CONNECTED) and their fds, the
 * fds init closes, what reaches the syscalls (argv, the stdio and extra
 * fds, signals, the tree kills of HUTCH_KILL_REST_ON_EXIT), and that
 * broken or hostile requests change nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cleanup.h"
#include "fdutil.h"
#include "init.h"
#include "proctree.h"
#include "proto.h"

#define MAX_KILLS 16

struct fake {
	/* spawn */
	int spawns;
	pid_t next_pid;  /* what spawn returns (a pid or -errno) */
	char argv0[64];  /* of the last spawn */
	uint32_t flags;  /* of the last spawn */
	int stdio_is[3]; /* the last spawn's stdio: the same file as the test's (1) */
	size_t nextra;
	const char *write_out; /* written to the command's stdout by spawn */
	int pipe_check[3];     /* the test's ends to compare stdio with, or -1 */
	/* kill_tree */
	struct {
		pid_t root;
		int sig;
	} kills[MAX_KILLS];
	int nkills;
	/* proc_scan: a table the test fills */
	struct hutch_proc_entry procs[8];
	size_t nprocs;
	/* wait_any: one exit to report, then none */
	pid_t exit_pid;
	int exit_status;
	/* pty_open */
	int ptys;
	/* views: calls, whether with fds, each index's fd's inode (0: none) */
	int views, views_fds;
	ino_t view_ino[HUTCH_ROOTFS_VIEWS];
};

struct env {
	struct fake f;
	struct hutch_init_server *srv;
	int sup; /* the supervisor's end */
	int init;
};

/* Same open file description: fstat's device and inode, plus the flags. */
static bool same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

static pid_t fake_spawn(void *ud, const struct hutch_spawn_req *req, const int fds[3],
                        const int *extra, size_t nextra)
{
	struct fake *f = ud;

	f->spawns++;
	snprintf(f->argv0, sizeof(f->argv0), "%s", req->argv[0]);
	f->flags = req->flags;
	f->nextra = nextra;
	for (int i = 0; i < 3; i++)
		f->stdio_is[i] = f->pipe_check[i] >= 0 && same_file(fds[i], f->pipe_check[i]);
	if (f->write_out)
		assert_true(write(fds[1], f->write_out, strlen(f->write_out)) > 0);
	return f->next_pid;
}

static pid_t fake_wait_any(void *ud, int *status)
{
	struct fake *f = ud;
	pid_t pid = f->exit_pid;

	if (pid <= 0)
		return 0; /* WNOHANG: nothing more */
	*status = f->exit_status;
	f->exit_pid = 0;
	return pid;
}

static void fake_kill_tree(void *ud, pid_t root, int sig)
{
	struct fake *f = ud;

	assert_true(f->nkills < MAX_KILLS);
	f->kills[f->nkills].root = root;
	f->kills[f->nkills++].sig = sig;
}

static size_t fake_proc_scan(void *ud, struct hutch_proc_entry **ret)
{
	struct fake *f = ud;

	*ret = malloc(sizeof(f->procs));
	assert_non_null(*ret);
	memcpy(*ret, f->procs, sizeof(f->procs));
	return f->nprocs;
}

/* A socketpair stands for the pty: the master comes back with SPAWNED. */
static int fake_pty_open(void *ud, uint32_t winsize, uid_t owner, int *ret_master, int *ret_slave)
{
	struct fake *f = ud;
	int sv[2];

	f->ptys++;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	*ret_master = sv[0];
	*ret_slave = sv[1];
	return 0;
}

static int fake_views(void *ud, const int *fds)
{
	struct fake *f = ud;
	struct stat st;

	f->views++;
	f->views_fds = fds != NULL;
	for (size_t i = 0; i < HUTCH_ROOTFS_VIEWS; i++)
		f->view_ino[i] = fds && fds[i] >= 0 && fstat(fds[i], &st) == 0 ? st.st_ino : 0;
	return 0;
}

static const struct hutch_init_sys fake_sys = {
	.spawn = fake_spawn,
	.wait_any = fake_wait_any,
	.kill_tree = fake_kill_tree,
	.proc_scan = fake_proc_scan,
	.pty_open = fake_pty_open,
	.views = fake_views,
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	int sv[2];

	assert_non_null(e);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	e->sup = sv[0];
	e->init = sv[1];
	e->f.next_pid = 100;
	for (int i = 0; i < 3; i++)
		e->f.pipe_check[i] = -1;
	e->srv = hutch_init_server_new(e->init, &fake_sys, &e->f);
	assert_non_null(e->srv);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	hutch_init_server_free(e->srv);
	close(e->sup);
	close(e->init);
	free(e);
	return 0;
}

/* Send a message as the supervisor, have init handle it. */
static void send_and_handle(struct env *e, uint32_t type, uint64_t id, const void *body, size_t len,
                            const int *fds, size_t nfds)
{
	assert_int_equal(hutch_proto_send(e->sup, type, id, body, len, fds, nfds), 0);
	assert_int_equal(hutch_init_server_message(e->srv), 0);
}

static bool sup_readable(struct env *e)
{
	struct pollfd p = { .fd = e->sup, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

/* The answer init sent (it must be there: the handling is synchronous). */
static ssize_t sup_recv(struct env *e, struct hutch_msg_hdr *hdr, void *body, size_t cap, int *fd)
{
	size_t nfds = 1;
	ssize_t n;

	assert_true(sup_readable(e));
	*fd = -EBADF;
	n = hutch_proto_recv(e->sup, hdr, body, cap, fd, &nfds);
	assert_true(n >= 0);
	if (nfds == 0)
		*fd = -EBADF;
	return n;
}

static struct hutch_msg_spawned recv_spawned(struct env *e, uint64_t id, int *fd)
{
	struct hutch_msg_hdr hdr;
	struct hutch_msg_spawned sp;
	int none;

	assert_int_equal(sup_recv(e, &hdr, &sp, sizeof(sp), fd ? fd : &none), sizeof(sp));
	assert_int_equal(hdr.type, HUTCH_MSG_SPAWNED);
	assert_int_equal(hdr.id, id);
	if (!fd)
		assert_int_equal(none, -EBADF);
	return sp;
}

/* A spawn body for argv, with flags. */
static ssize_t spawn_body(const char *const *argv, uint32_t flags, char **body)
{
	static const char *const envp[] = { "PATH=/bin", NULL };
	ssize_t len = hutch_proto_spawn_encode(argv, envp, "/workspace", body);

	assert_true(len > 0);
	memcpy(*body + offsetof(struct hutch_msg_spawn, flags), &flags, sizeof(flags));
	return len;
}

/* Three pipes for stdio: ends[] the command's (sent), keep[] the test's. */
static void stdio_pipes(int ends[3], int keep[3])
{
	for (int i = 0; i < 3; i++) {
		int p[2];
		assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
		ends[i] = i == 0 ? p[0] : p[1];
		keep[i] = i == 0 ? p[1] : p[0];
	}
}

/* The command's ends are closed in init once it answered: reading the
 * test's end of stdout sees end of file, not EAGAIN. */
static void assert_closed_in_init(int keep_out)
{
	char c;

	assert_int_equal(read(keep_out, &c, 1), 0);
}

static const char *const argv_true[] = { "true", NULL };

static void test_spawn_answers_pid_and_closes_fds(void **state)
{
	struct env *e = *state;
	int ends[3], keep[3];
	_cleanup_free_ char *body = NULL;
	ssize_t len = spawn_body(argv_true, 0, &body);
	struct hutch_msg_spawned sp;
	char buf[8];

	stdio_pipes(ends, keep);
	e->f.pipe_check[1] = keep[1];
	e->f.write_out = "out";
	send_and_handle(e, HUTCH_MSG_SPAWN, 7, body, (size_t)len, ends, 3);
	hutch_close_many(ends, 3);
	sp = recv_spawned(e, 7, NULL);
	assert_int_equal(sp.pid, 100);
	assert_int_equal(sp.error, 0);
	assert_int_equal(e->f.spawns, 1);
	assert_string_equal(e->f.argv0, "true");
	assert_true(e->f.stdio_is[1]); /* the command's stdout is the pipe sent */
	assert_int_equal(e->f.nextra, 0);
	assert_int_equal(read(keep[1], buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "out", 3);
	assert_closed_in_init(keep[1]);
	hutch_close_many(keep, 3);

	/* its exit is reported with its id and status */
	e->f.exit_pid = 100;
	e->f.exit_status = 5 << 8;
	hutch_init_server_reap(e->srv);
	{
		struct hutch_msg_hdr hdr;
		struct hutch_msg_exited ex;
		int fd;
		assert_int_equal(sup_recv(e, &hdr, &ex, sizeof(ex), &fd), sizeof(ex));
		assert_int_equal(hdr.type, HUTCH_MSG_EXITED);
		assert_int_equal(hdr.id, 7);
		assert_int_equal(ex.status, 5 << 8);
		assert_int_equal(fd, -EBADF);
	}
	assert_int_equal(e->f.nkills, 0);
	/* reported once: the child is forgotten */
	e->f.exit_pid = 100;
	hutch_init_server_reap(e->srv);
	assert_false(sup_readable(e));
}

/* A reaped process init did not start (an orphan it inherited) is not
 * reported. */
static void test_reap_orphan_silent(void **state)
{
	struct env *e = *state;

	e->f.exit_pid = 555;
	hutch_init_server_reap(e->srv);
	assert_false(sup_readable(e));
}

static void test_spawn_failure_answers_error(void **state)
{
	struct env *e = *state;
	int ends[3], keep[3];
	_cleanup_free_ char *body = NULL;
	ssize_t len = spawn_body(argv_true, 0, &body);
	struct hutch_msg_spawned sp;

	stdio_pipes(ends, keep);
	e->f.next_pid = -EAGAIN;
	send_and_handle(e, HUTCH_MSG_SPAWN, 8, body, (size_t)len, ends, 3);
	hutch_close_many(ends, 3);
	sp = recv_spawned(e, 8, NULL);
	assert_int_equal(sp.pid, 0);
	assert_int_equal(sp.error, -EAGAIN);
	assert_closed_in_init(keep[1]);
	hutch_close_many(keep, 3);
}

/* Broken spawn requests: a body that does not decode, stdio without its
 * three fds, extra fds without the flag or the flag without them; each is
 * answered -EBADMSG, nothing is started, every fd sent is closed. */
static void test_spawn_refuses_broken_requests(void **state)
{
	struct env *e = *state;
	_cleanup_free_ char *plain = NULL, *extra = NULL;
	ssize_t lp = spawn_body(argv_true, 0, &plain);
	ssize_t le = spawn_body(argv_true, HUTCH_SPAWN_EXTRA_FDS, &extra);
	struct {
		const char *body;
		size_t len, nfds;
	} cases[] = {
		{ "garbage!", 8, 3 },
		{ plain, (size_t)lp, 2 },
		{ plain, (size_t)lp, 5 },
		{ extra, (size_t)le, 3 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ends[6], keep[6];
		struct hutch_msg_spawned sp;

		stdio_pipes(ends, keep);
		stdio_pipes(ends + 3, keep + 3);
		send_and_handle(e, HUTCH_MSG_SPAWN, 20 + i, cases[i].body, cases[i].len, ends,
		                cases[i].nfds);
		hutch_close_many(ends, 6);
		sp = recv_spawned(e, 20 + i, NULL);
		assert_int_equal(sp.pid, 0);
		assert_int_equal(sp.error, -EBADMSG);
		assert_closed_in_init(keep[1]);
		if (cases[i].nfds > 4)
			assert_closed_in_init(keep[4]);
		hutch_close_many(keep, 6);
	}
	assert_int_equal(e->f.spawns, 0);
}

/* Extra fds (HUTCH_SPAWN_EXTRA_FDS) reach the spawn after stdio's. */
static void test_spawn_extra_fds(void **state)
{
	struct env *e = *state;
	_cleanup_free_ char *body = NULL;
	ssize_t len = spawn_body(argv_true, HUTCH_SPAWN_EXTRA_FDS, &body);
	int ends[6], keep[6];

	stdio_pipes(ends, keep);
	stdio_pipes(ends + 3, keep + 3);
	send_and_handle(e, HUTCH_MSG_SPAWN, 30, body, (size_t)len, ends, 5);
	hutch_close_many(ends, 6);
	assert_int_equal(recv_spawned(e, 30, NULL).pid, 100);
	assert_int_equal(e->f.nextra, 2);
	assert_int_equal(e->f.flags, HUTCH_SPAWN_EXTRA_FDS);
	assert_closed_in_init(keep[4]);
	hutch_close_many(keep, 6);
}

/* A tty: no stdio fds come, init opens the pty, the master goes back
 * with SPAWNED; the held tty (a container's) exists only when set up. */
static void test_spawn_tty(void **state)
{
	struct env *e = *state;
	_cleanup_free_ char *tty = NULL, *held = NULL;
	ssize_t lt = spawn_body(argv_true, HUTCH_SPAWN_TTY, &tty);
	ssize_t lh = spawn_body(argv_true, HUTCH_SPAWN_TTY | HUTCH_SPAWN_HELD_TTY, &held);
	struct hutch_msg_spawned sp;
	int master = -EBADF;
	char c;

	send_and_handle(e, HUTCH_MSG_SPAWN, 40, tty, (size_t)lt, NULL, 0);
	sp = recv_spawned(e, 40, &master);
	assert_int_equal(sp.pid, 100);
	assert_int_equal(e->f.ptys, 1);
	assert_true(master >= 0);
	/* init kept no copy of the pty: the slave's end is gone too */
	assert_int_equal(read(master, &c, 1), 0);
	close(master);

	send_and_handle(e, HUTCH_MSG_SPAWN, 41, held, (size_t)lh, NULL, 0);
	sp = recv_spawned(e, 41, NULL);
	assert_int_equal(sp.error, -EBADMSG);
	assert_int_equal(e->f.spawns, 1);
}

static void start_one(struct env *e, uint64_t id, pid_t pid)
{
	_cleanup_free_ char *body = NULL;
	ssize_t len = spawn_body(argv_true, 0, &body);
	int ends[3], keep[3];

	stdio_pipes(ends, keep);
	e->f.next_pid = pid;
	send_and_handle(e, HUTCH_MSG_SPAWN, id, body, (size_t)len, ends, 3);
	hutch_close_many(ends, 3);
	hutch_close_many(keep, 3);
	assert_int_equal(recv_spawned(e, id, NULL).pid, pid);
}

/* KILL signals the tree of the command with that id; signals out of
 * range, short bodies and unknown ids do nothing. */
static void test_kill(void **state)
{
	struct env *e = *state;
	struct hutch_msg_kill k = { .signal = SIGTERM };

	start_one(e, 50, 200);
	send_and_handle(e, HUTCH_MSG_KILL, 50, &k, sizeof(k), NULL, 0);
	assert_int_equal(e->f.nkills, 1);
	assert_int_equal(e->f.kills[0].root, 200);
	assert_int_equal(e->f.kills[0].sig, SIGTERM);
	send_and_handle(e, HUTCH_MSG_KILL, 51, &k, sizeof(k), NULL, 0); /* nobody's */
	k.signal = 0;
	send_and_handle(e, HUTCH_MSG_KILL, 50, &k, sizeof(k), NULL, 0);
	k.signal = NSIG;
	send_and_handle(e, HUTCH_MSG_KILL, 50, &k, sizeof(k), NULL, 0);
	k.signal = SIGKILL;
	send_and_handle(e, HUTCH_MSG_KILL, 50, &k, 4, NULL, 0);
	assert_int_equal(e->f.nkills, 1);
	assert_false(sup_readable(e)); /* KILL has no answer */
}

/* HUTCH_KILL_REST_ON_EXIT: the sessions of the command's tree are taken
 * at the kill (a setsid() child of its child among them); at its exit,
 * its own tree and those sessions are killed before EXITED goes out. */
static void test_kill_rest_on_exit(void **state)
{
	struct env *e = *state;
	struct hutch_msg_kill k = { .signal = SIGTERM, .flags = HUTCH_KILL_REST_ON_EXIT };
	struct hutch_msg_hdr hdr;
	struct hutch_msg_exited ex;
	int fd;

	start_one(e, 60, 300);
	/* 300 the command (its own session), 301 its child, 302 a session 301
	 * made; 400 someone else's */
	e->f.procs[0] = (struct hutch_proc_entry){ .pid = 300, .ppid = 1, .sid = 300 };
	e->f.procs[1] = (struct hutch_proc_entry){ .pid = 301, .ppid = 300, .sid = 300 };
	e->f.procs[2] = (struct hutch_proc_entry){ .pid = 302, .ppid = 301, .sid = 302 };
	e->f.procs[3] = (struct hutch_proc_entry){ .pid = 400, .ppid = 1, .sid = 400 };
	e->f.nprocs = 4;
	send_and_handle(e, HUTCH_MSG_KILL, 60, &k, sizeof(k), NULL, 0);
	assert_int_equal(e->f.nkills, 1);
	e->f.exit_pid = 300;
	e->f.exit_status = SIGTERM;
	hutch_init_server_reap(e->srv);
	/* its tree, then sessions 300 and 302; never 400 */
	assert_int_equal(e->f.nkills, 4);
	assert_int_equal(e->f.kills[1].root, 300);
	assert_int_equal(e->f.kills[1].sig, SIGKILL);
	for (int i = 2; i < 4; i++) {
		assert_true(e->f.kills[i].root == 300 || e->f.kills[i].root == 302);
		assert_int_equal(e->f.kills[i].sig, SIGKILL);
	}
	assert_int_equal(sup_recv(e, &hdr, &ex, sizeof(ex), &fd), sizeof(ex));
	assert_int_equal(hdr.type, HUTCH_MSG_EXITED);
	assert_int_equal(ex.status, SIGTERM);
}

/* CONNECT: a socket connected to a loopback port comes back with
 * CONNECTED; a port out of range is refused without one. */
static void test_connect(void **state)
{
	struct env *e = *state;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct hutch_msg_connect m = { .port = 0 };
	struct hutch_msg_connected rep;
	struct hutch_msg_hdr hdr;
	struct pollfd p;
	int lfd, fd, cfd;

	send_and_handle(e, HUTCH_MSG_CONNECT, 70, &m, sizeof(m), NULL, 0);
	assert_int_equal(sup_recv(e, &hdr, &rep, sizeof(rep), &fd), sizeof(rep));
	assert_int_equal(hdr.type, HUTCH_MSG_CONNECTED);
	assert_int_equal(rep.error, -EINVAL);
	assert_int_equal(fd, -EBADF);

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
	m.port = ntohs(a.sin_port);
	send_and_handle(e, HUTCH_MSG_CONNECT, 71, &m, sizeof(m), NULL, 0);
	assert_int_equal(sup_recv(e, &hdr, &rep, sizeof(rep), &fd), sizeof(rep));
	assert_int_equal(hdr.id, 71);
	assert_int_equal(rep.error, 0);
	assert_true(fd >= 0);
	p = (struct pollfd){ .fd = lfd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 60000), 1);
	cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(cfd >= 0);
	close(cfd);
	close(fd);
	close(lfd);
}

/* CONNECT that is not one: a port beyond 65535 is refused (CONNECTED
 * with -EINVAL, no fd); a body of another size has no answer. */
static void test_connect_refuses_broken_requests(void **state)
{
	struct env *e = *state;
	struct hutch_msg_connect m = { .port = 65536 };
	struct hutch_msg_connected rep;
	struct hutch_msg_hdr hdr;
	int fd;

	send_and_handle(e, HUTCH_MSG_CONNECT, 72, &m, sizeof(m), NULL, 0);
	assert_int_equal(sup_recv(e, &hdr, &rep, sizeof(rep), &fd), sizeof(rep));
	assert_int_equal(hdr.type, HUTCH_MSG_CONNECTED);
	assert_int_equal(hdr.id, 72);
	assert_int_equal(rep.error, -EINVAL);
	assert_int_equal(fd, -EBADF);
	m.port = 80;
	send_and_handle(e, HUTCH_MSG_CONNECT, 73, &m, sizeof(m) - 1, NULL, 0);
	assert_false(sup_readable(e));
}

/* Other messages: fds that came with them are closed; a truncated
 * message is dropped; the supervisor's hang-up ends the service. */
static void test_other_messages_and_hangup(void **state)
{
	struct env *e = *state;
	int ends[3], keep[3];
	char big[64];

	stdio_pipes(ends, keep);
	send_and_handle(e, 999, 1, "x", 1, ends, 3);
	hutch_close_many(ends, 3);
	assert_closed_in_init(keep[1]);
	hutch_close_many(keep, 3);
	assert_false(sup_readable(e));
	/* a header that claims more than came: dropped */
	memset(big, 0, sizeof(big));
	((struct hutch_msg_hdr *)big)->type = HUTCH_MSG_KILL;
	((struct hutch_msg_hdr *)big)->len = 1000;
	assert_int_equal(send(e->sup, big, sizeof(big), 0), (ssize_t)sizeof(big));
	assert_int_equal(hutch_init_server_message(e->srv), 0);
	assert_int_equal(e->f.nkills, 0);
	shutdown(e->sup, SHUT_WR);
	assert_int_equal(hutch_init_server_message(e->srv), 1);
}

static ino_t ino_of(int fd)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	return st.st_ino;
}

/* VIEWS: each fd reaches the view of its index, the others none; none
 * at all: detach only; every fd closed by init; broken bodies ignored. */
static void test_views(void **state)
{
	struct env *e = *state;
	int ends[3], keep[3];
	uint32_t which[] = { 7, 0 }, all[HUTCH_ROOTFS_VIEWS], bad[] = { 2, HUTCH_ROOTFS_VIEWS };

	stdio_pipes(ends, keep);
	send_and_handle(e, HUTCH_MSG_VIEWS, 0, which, sizeof(which), ends + 1, 2);
	assert_int_equal(e->f.views, 1);
	assert_true(e->f.views_fds);
	for (size_t i = 0; i < HUTCH_ROOTFS_VIEWS; i++)
		assert_true(e->f.view_ino[i] == (i == 7   ? ino_of(ends[1])
		                                 : i == 0 ? ino_of(ends[2])
		                                          : 0));
	assert_false(sup_readable(e)); /* no answer */
	close(ends[1]);
	assert_closed_in_init(keep[1]);
	for (uint32_t i = 0; i < HUTCH_ROOTFS_VIEWS; i++)
		all[i] = i;
	send_and_handle(e, HUTCH_MSG_VIEWS, 0, all, sizeof(all), NULL, 0);
	assert_int_equal(e->f.views, 2);
	assert_false(e->f.views_fds);
	/* an index out of range, fds one short, a body not of indexes */
	send_and_handle(e, HUTCH_MSG_VIEWS, 0, bad, sizeof(bad), ends + 2, 1);
	send_and_handle(e, HUTCH_MSG_VIEWS, 0, which, sizeof(which), ends + 2, 1);
	send_and_handle(e, HUTCH_MSG_VIEWS, 0, which, 3, NULL, 0);
	assert_int_equal(e->f.views, 2);
	close(ends[2]);
	assert_closed_in_init(keep[2]);
	close(ends[0]);
	hutch_close_many(keep, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_spawn_answers_pid_and_closes_fds, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_reap_orphan_silent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spawn_failure_answers_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spawn_refuses_broken_requests, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_spawn_extra_fds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spawn_tty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_rest_on_exit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_connect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_connect_refuses_broken_requests, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_other_messages_and_hangup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_views, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
