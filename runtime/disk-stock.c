/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Disks made ahead of time (disk.h, "The stock"). Making a disk costs a
 * create 20-120 ms under load (LOOP_CONFIGURE and the mount wait for RCU
 * grace periods and I/O), more than the rest of a create overlaps: a
 * process per runtime dir and size keeps HUTCH_DISK_STOCK makers
 * (hutch_disk_maker()) whose disk is made and waits for its taker, and a
 * create takes one through its socket: the CLI asks, its supervisor reads
 * the answer at its disk step (no round trip on the CLI's path). The
 * layout of $RT/.disk/:
 *
 *   ext4-<bytes>        the template (disk.c)
 *   stock-<bytes>.lock  flock'ed by the stock's process for its life
 *   stock-<bytes>.sock  its socket (SOCK_SEQPACKET): a request
 *                       HUTCH_MSG_GO answers HUTCH_MSG_READY with a
 *                       maker's socket (or no fd: none in stock);
 *                       HUTCH_MSG_KILL ends the stock (`hutch gc`)
 *
 * The stock is started by the CLI's create that found none (in the
 * creator's cgroup, as lxcfs, in a session of its own) and refills, its
 * makers at nice 10 (the one taken is set back to 0), once its takers are
 * done: a taker keeps its connection (a hold) until its process exits (a
 * `hutch run` after its command, a `hutch create` once the id is out),
 * so a maker's ~10 ms of CPU does not compete with the run that took the
 * disk; an empty stock refills at once (a burst, creates at once). It
 * ends once the dir has had no sandbox and no take for STOCK_IDLE_SECONDS,
 * when its socket is gone (the dir removed), or at `hutch gc`; its makers
 * end with it (EOF on their sockets) and their disks with them. A maker
 * handed out is its taker's: it ends when its taker has its disk or is
 * gone. Sockets are reached through /proc/self/fd/N/: a runtime dir's
 * path may be longer than sun_path.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "disk-internal.h"
#include "disk.h"
#include "fdutil.h"
#include "proto.h"
#include "state.h"
#include "syscalls.h"
#include "util.h"

#define STOCK_IDLE_SECONDS 30
#define STOCK_TICK_MS      5000
#define STOCK_ASK_MS       2000
#define STOCK_STOP_MS      10000
#define STOCK_NICE         10
#define STOCK_FAIL_MAX     3
#define STOCK_HOLDS        16 /* takers' connections kept; the oldest goes */

struct maker {
	pid_t pid;
	int sock;
};

static struct {
	const char *runtime_dir;
	uint64_t bytes;
	int dirfd, listen_fd, lock_fd;
	char sock_name[64];
	ino_t sock_ino;
	struct maker makers[HUTCH_DISK_STOCK];
	size_t n;
	int holds[STOCK_HOLDS]; /* takers not done: their connections */
	size_t nholds;
	unsigned failures;
	sigset_t wait_mask; /* ppoll()'s: SIGCHLD let in (reap_at_once()) */
} stock;

static int sock_at(int dirfd, const char *name, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	return snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", dirfd, name) <
	                       (int)sizeof(sa->sun_path)
	               ? 0
	               : -ENAMETOOLONG;
}

static void fill(void)
{
	/* A taker not done yet (a run whose command may still be starting)
	 * gets the CPU a maker would take, while one disk is left. */
	if (stock.nholds > 0 && stock.n > 0)
		return;
	while (stock.n < HUTCH_DISK_STOCK && stock.failures < STOCK_FAIL_MAX) {
		int sv[2];
		pid_t pid;

		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
			return;
		pid = fork();
		if (pid < 0) {
			close(sv[0]);
			close(sv[1]);
			return;
		}
		if (pid == 0) {
			/* Only its own end: EOF from the stock or its taker ends it,
			 * and the stock's lock goes with the stock. */
			signal(SIGCHLD, SIG_DFL);
			sigprocmask(SIG_SETMASK, &stock.wait_mask, NULL);
			close(sv[0]);
			close(stock.listen_fd);
			close(stock.lock_fd);
			for (size_t i = 0; i < stock.n; i++)
				close(stock.makers[i].sock);
			for (size_t i = 0; i < stock.nholds; i++)
				close(stock.holds[i]);
			(void)setpriority(PRIO_PROCESS, 0, STOCK_NICE);
			hutch_disk_maker(stock.runtime_dir, stock.bytes, sv[1]);
		}
		close(sv[1]);
		stock.makers[stock.n++] = (struct maker){ .pid = pid, .sock = sv[0] };
	}
}

/* The oldest maker leaves the stock: its socket (the caller's now). */
static struct maker take_first(void)
{
	struct maker m = stock.makers[0];

	memmove(stock.makers, stock.makers + 1, (stock.n - 1) * sizeof(stock.makers[0]));
	stock.n--;
	return m;
}

/* A taker's connection, kept until it closes (its process exited). */
static void hold(int conn)
{
	if (stock.nholds == STOCK_HOLDS) {
		close(stock.holds[0]);
		memmove(stock.holds, stock.holds + 1, --stock.nholds * sizeof(stock.holds[0]));
	}
	stock.holds[stock.nholds++] = conn;
}

/* One connection: a take (its connection then held), or the end (false). */
static bool answer(int conn)
{
	struct pollfd pfd = { .fd = conn, .events = POLLIN };
	struct hutch_msg_hdr hdr = { 0 };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct maker m;
	size_t nfds = 0;

	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid() ||
	    poll(&pfd, 1, STOCK_ASK_MS) <= 0 ||
	    hutch_proto_recv(conn, &hdr, NULL, 0, NULL, &nfds) < 0)
		goto done;
	if (hdr.type == HUTCH_MSG_KILL)
		return false; /* conn closes at our exit: the stopper waits for it */
	if (hdr.type != HUTCH_MSG_GO)
		goto done;
	stock.failures = 0;
	if (stock.n == 0) {
		(void)hutch_proto_send(conn, HUTCH_MSG_READY, 0, NULL, 0, NULL, 0);
		goto done;
	}
	m = take_first();
	(void)setpriority(PRIO_PROCESS, (id_t)m.pid, 0); /* on a create's path now */
	(void)hutch_proto_send(conn, HUTCH_MSG_READY, 0, NULL, 0, &m.sock, 1);
	close(m.sock);
	hold(conn);
	return true;
done:
	close(conn);
	return true;
}

/* Still our socket (the dir not removed)? */
static bool ours(void)
{
	struct stat sb;

	return fstatat(stock.dirfd, stock.sock_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	       sb.st_ino == stock.sock_ino;
}

static bool idle(double last_take)
{
	char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	size_t n = 1;

	if (stock.nholds > 0 || hutch_now_mono_sec() - last_take < STOCK_IDLE_SECONDS)
		return false;
	if (hutch_state_list(stock.runtime_dir, &ids, &n) < 0)
		return false;
	free(ids);
	return n == 0;
}

static __attribute__((noreturn)) void stock_end(void)
{
	if (ours())
		(void)unlinkat(stock.dirfd, stock.sock_name, 0);
	for (size_t i = 0; i < stock.n; i++) {
		(void)kill(stock.makers[i].pid, SIGKILL);
		close(stock.makers[i].sock);
	}
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	_exit(0);
}

static void on_child(int sig)
{
	(void)sig; /* only to end ppoll() (EINTR): the loop reaps */
}

/* A maker that ends is reaped at once: SIGCHLD is blocked but within
 * ppoll(), which it ends. A maker that ended between two wakes stayed a
 * zombie until the next, up to STOCK_TICK_MS (one killed in stock: 5.0 s,
 * its socket's EOF woke the stock before its exit was a zombie's). */
static void reap_at_once(void)
{
	struct sigaction sa = { .sa_handler = on_child, .sa_flags = SA_NOCLDSTOP };
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &stock.wait_mask);
	(void)sigaction(SIGCHLD, &sa, NULL);
}

static void serve(void)
{
	const struct timespec tick = { STOCK_TICK_MS / 1000, (STOCK_TICK_MS % 1000) * 1000000L };
	double last_take = hutch_now_mono_sec();

	reap_at_once();
	for (;;) {
		struct pollfd pfds[1 + HUTCH_DISK_STOCK + STOCK_HOLDS];
		struct pollfd *held = pfds + 1 + HUTCH_DISK_STOCK;
		int n;

		fill();
		pfds[0] = (struct pollfd){ .fd = stock.listen_fd, .events = POLLIN };
		for (size_t i = 0; i < HUTCH_DISK_STOCK; i++)
			pfds[1 + i] =
			        (struct pollfd){ .fd = i < stock.n ? stock.makers[i].sock : -1,
				                 .events = POLLIN };
		for (size_t i = 0; i < stock.nholds; i++)
			held[i] = (struct pollfd){ .fd = stock.holds[i], .events = POLLIN };
		n = ppoll(pfds, 1 + HUTCH_DISK_STOCK + stock.nholds, &tick, &stock.wait_mask);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (n < 0 && errno != EINTR)
			stock_end();
		/* A maker that speaks before it is asked failed (or died):
		 * dropped; after STOCK_FAIL_MAX in a row, none until a take. */
		for (size_t i = stock.n; i-- > 0;)
			if (pfds[1 + i].revents) {
				close(stock.makers[i].sock);
				(void)kill(stock.makers[i].pid, SIGKILL);
				memmove(stock.makers + i, stock.makers + i + 1,
				        (stock.n - i - 1) * sizeof(stock.makers[0]));
				stock.n--;
				stock.failures++;
			}
		/* A taker done (EOF: its process exited): the refill may begin. */
		for (size_t i = stock.nholds; i-- > 0;)
			if (n > 0 && held[i].revents) {
				close(stock.holds[i]);
				memmove(stock.holds + i, stock.holds + i + 1,
				        (stock.nholds - i - 1) * sizeof(stock.holds[0]));
				stock.nholds--;
			}
		if (pfds[0].revents & POLLIN) {
			int conn =
			        accept4(stock.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

			if (conn >= 0 && !answer(conn))
				stock_end();
			last_take = hutch_now_mono_sec();
		} else if (n == 0 && (!ours() || idle(last_take))) {
			stock_end();
		}
	}
}

/* The stock's process, given its lock (taken by its starter: a `hutch gc`
 * from then on waits for its socket, stock_starting()). */
static __attribute__((noreturn)) void stock_main(const char *runtime_dir, uint64_t bytes,
                                                 int lock_fd)
{
	char dir[4096];
	struct sockaddr_un sa;
	struct hutch_err err = { 0 };
	struct stat sb;
	sigset_t none;

	hutch_stdio_to_null();
	hutch_signals_default();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	(void)prctl(PR_SET_NAME, "hutch-disks");
	stock.runtime_dir = runtime_dir;
	stock.bytes = bytes;
	stock.lock_fd = lock_fd;
	snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, runtime_dir);
	snprintf(stock.sock_name, sizeof(stock.sock_name), "stock-%" PRIu64 ".sock", bytes);
	if ((stock.dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		_exit(0);
	/* The pool its disks' files go in (disk-pool.c), if it is to be and
	 * is not: a failure leaves them where they went before. */
	(void)hutch_disk_pool_start(runtime_dir, stock.dirfd, &err);
	hutch_err_clear(&err);
	if (hutch_disk_template(runtime_dir, bytes, &err) < 0)
		_exit(0);
	(void)unlinkat(stock.dirfd, stock.sock_name, 0); /* a stock that died */
	stock.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (stock.listen_fd < 0 || sock_at(stock.dirfd, stock.sock_name, &sa) < 0 ||
	    bind(stock.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(stock.listen_fd, 16) < 0 ||
	    fstatat(stock.dirfd, stock.sock_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		_exit(0);
	stock.sock_ino = sb.st_ino;
	serve();
	_exit(0);
}

/* A stock for runtime_dir and bytes, unless one runs or is starting. Its
 * lock is taken here, before the creator goes on, and handed to the
 * stock's process: a `hutch gc` after a create that started a stock (one
 * refused, say) finds it starting even while the process is not yet
 * scheduled, and waits for its socket to stop it, not to have it make its
 * disks in the dir after gc (a test's teardown found a loop device under
 * load, stops 39-40). */
static void stock_start(const char *runtime_dir, uint64_t bytes)
{
	_cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
	char dir[4096], lock[64];
	int status;
	pid_t pid;

	snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, runtime_dir);
	snprintf(lock, sizeof(lock), "stock-%" PRIu64 ".lock", bytes);
	if ((mkdir(dir, 0700) < 0 && errno != EEXIST) ||
	    (dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	fd = hutch_lock_at(dirfd, lock, LOCK_EX | LOCK_NB);
	if (fd < 0)
		return; /* its process holds it */
	/* Bare: the creator holds lxcfs's users lock (and the sandbox's) now,
	 * and releases them at a refusal; a stock not yet scheduled must not
	 * hold them on (lxcfs was left running under load, stop 32): it keeps
	 * its own lock alone. */
	pid = hutch_fork_detached_bare(fd);
	if (pid == 0)
		stock_main(runtime_dir, bytes, fd);
	if (pid > 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
}

int hutch_disk_stock_take(const char *runtime_dir, uint64_t bytes, struct hutch_disk_job *job,
                          int *ret_hold)
{
	_cleanup_close_ int dirfd = -EBADF, s = -EBADF;
	struct sockaddr_un sa;
	char dir[4096], name[64];
	int hold;

	job->pid = -1;
	job->sock = -EBADF;
	snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, runtime_dir);
	snprintf(name, sizeof(name), "stock-%" PRIu64 ".sock", bytes);
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (dirfd < 0 || sock_at(dirfd, name, &sa) < 0 ||
	    connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		const char *why;

		/* Disks asked of the stock that answered need no look at the
		 * loop driver and mke2fs; one started, these (issue 31: three
		 * syscalls off every create that finds its stock). */
		if ((dirfd < 0 || errno == ENOENT || errno == ECONNREFUSED) &&
		    hutch_disk_possible(&why))
			stock_start(runtime_dir, bytes);
		return -EAGAIN;
	}
	/* Asked, not answered: the answer is read where the disk is needed
	 * (hutch_disk_stock_answer()), not waited for here (issue 31: under
	 * load the stock waits for a CPU, 10-16 ms on the CLI's path). */
	if (hutch_proto_send(s, HUTCH_MSG_GO, 0, NULL, 0, NULL, 0) < 0)
		return -EAGAIN;
	hold = fcntl(s, F_DUPFD_CLOEXEC, 3);
	if (hold < 0)
		return -errno;
	job->pid = HUTCH_DISK_JOB_ASKED;
	job->sock = TAKE_FD(s);
	*ret_hold = hold;
	return 0;
}

int hutch_disk_stock_answer(struct hutch_disk_job *job)
{
	struct pollfd pfd = { .fd = job->sock, .events = POLLIN };
	struct hutch_msg_hdr hdr = { 0 };
	int fd = -EBADF;
	size_t nfds = 1;
	ssize_t n = -ETIMEDOUT;

	if (job->pid != HUTCH_DISK_JOB_ASKED)
		return 0;
	/* The stock answers at once (its makers are made ahead): bounded
	 * all the same, the disk then made here (the maker sent meanwhile
	 * ends with this connection's close). */
	if (poll(&pfd, 1, STOCK_ASK_MS) > 0)
		n = hutch_proto_recv(job->sock, &hdr, NULL, 0, &fd, &nfds);
	closep(&job->sock);
	job->pid = -1;
	if (n < 0 || hdr.type != HUTCH_MSG_READY || nfds != 1) {
		closep(&fd); /* -EBADF when none came */
		return -EAGAIN;
	}
	job->sock = fd;
	return 0;
}

/* Wait (bounded) while the stock of the lock lock_name is held and has
 * no socket yet: its process is starting (stock_start()). */
static void stock_wait_started(int dirfd, const char *lock_name)
{
	char sock_name[64];
	const char *dot = strrchr(lock_name, '.');
	double until = hutch_now_mono_sec() + STOCK_STOP_MS / 1000.0;
	struct stat sb;

	snprintf(sock_name, sizeof(sock_name), "%.*s.sock", (int)(dot - lock_name), lock_name);
	while (fstatat(dirfd, sock_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 &&
	       hutch_now_mono_sec() < until) {
		_cleanup_close_ int fd = hutch_lock_at(dirfd, lock_name, LOCK_EX | LOCK_NB);

		if (fd >= 0 || fd != -EWOULDBLOCK)
			return; /* none runs, or it ended */
		(void)poll(NULL, 0, 5);
	}
}

void hutch_disk_stock_stop(const char *runtime_dir)
{
	_cleanup_(closedirp) DIR *d = NULL;
	_cleanup_close_ int dirfd = -EBADF;
	char dir[4096];
	struct dirent *e;

	snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, runtime_dir);
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = opendir(dir);
	if (dirfd < 0 || !d)
		return;
	/* A stock still starting (its pool, its template) answers once its
	 * socket is there, the pool's made before it: the list read after */
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "stock-", 6) && strstr(e->d_name, ".lock"))
			stock_wait_started(dirfd, e->d_name);
	rewinddir(d);
	while ((e = readdir(d))) {
		_cleanup_close_ int s = -EBADF;
		struct pollfd pfd = { .events = POLLIN };
		struct sockaddr_un sa;

		/* stocks, and forkers not taken (disk-fork.c) */
		if ((strncmp(e->d_name, "stock-", 6) && strncmp(e->d_name, "fork-", 5) &&
		     strcmp(e->d_name, "pool.sock")) ||
		    !strstr(e->d_name, ".sock"))
			continue;
		s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (s < 0 || sock_at(dirfd, e->d_name, &sa) < 0 ||
		    connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    hutch_proto_send(s, HUTCH_MSG_KILL, 0, NULL, 0, NULL, 0) < 0)
			continue;
		/* It closes this connection when it exits, its makers reaped. */
		pfd.fd = s;
		(void)poll(&pfd, 1, STOCK_STOP_MS);
	}
}

void hutch_disk_gc(const char *runtime_dir)
{
	char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	char dir[4096];
	size_t n = 0;

	snprintf(dir, sizeof(dir), "%s/" HUTCH_DISK_DIR, runtime_dir);
	if (access(dir, F_OK) < 0 || hutch_state_list(runtime_dir, &ids, &n) < 0)
		return;
	free(ids);
	if (n > 0)
		return;
	hutch_disk_stock_stop(runtime_dir);
	(void)hutch_rm_rf_at(AT_FDCWD, dir);
}
