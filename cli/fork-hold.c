/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A create held for a source's next fork: see fork-hold.h. On disk, in
 * $RT/.forkhold/: "<source>-<key>.lock" (flock'ed by the holder for its
 * life, holding its pid, as a warm pool's keeper.lock), "<source>-<key>.disk"
 * (the token: the held create's disk's name; claimed by its rename, as a
 * pool's sandbox by its token's unlink) and "<source>-<key>.sock"
 * (listening: the claimer's connection gets the fds).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "fdutil.h"
#include "fork-creators.h"
#include "fork-hold.h"
#include "options.h"
#include "poolkey.h"
#include "proto.h"
#include "state.h"
#include "syscalls.h"
#include "util.h"

#define HOLD_DIR      ".forkhold"
#define CLAIM_WAIT_MS 5000  /* the holder's answer to a claim (a CPU, at load 14) */
#define END_WAIT_MS   30000 /* a held create's end, its holder's */

bool hutch_fork_held(const cJSON *state)
{
	return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(state, "held_for"));
}

bool hutch_fork_hold_can(const struct hutch_config *cfg)
{
	return hutch_pool_can_serve(cfg) && !cfg->secrets;
}

/* $RT/.forkhold/<src>-<key>.<ext> (src NULL: the directory). */
static int hold_path(const char *rt, const char *src, const char *key, const char *ext, char *buf,
                     size_t size)
{
	int n = src ? snprintf(buf, size, "%s/" HOLD_DIR "/%s-%s.%s", rt, src, key, ext)
	            : snprintf(buf, size, "%s/" HOLD_DIR, rt);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* ---- the claim (hutch fork) ---- */

int hutch_fork_hold_claim(const char *rt, const char *src, const char *key,
                          struct hutch_fork_creator *cr, int *ret_conn)
{
	char tok[PATH_MAX], mine[PATH_MAX + 16], path[PATH_MAX];
	char disk[HUTCH_DISK_FORK_NAME_MAX] = "";
	struct sockaddr_un sa;
	_cleanup_close_ int s = -EBADF, dirfd = -EBADF, fd = -EBADF;
	ssize_t n;

	if (hold_path(rt, src, key, "disk", tok, sizeof(tok)) < 0 ||
	    hold_path(rt, src, key, "sock", path, sizeof(path)) < 0)
		return 0;
	/* only one rename of the token succeeds: the held create is ours */
	snprintf(mine, sizeof(mine), "%s.%d", tok, (int)getpid());
	if (rename(tok, mine) < 0)
		return 0;
	fd = open(mine, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	n = fd < 0 ? -1 : read(fd, disk, sizeof(disk) - 1);
	(void)unlink(mine);
	if (n <= 0 || !hutch_disk_fork_name_is_valid(disk) ||
	    hutch_unix_addr(path, &sa, &dirfd) < 0)
		return 0;
	/* queued (the holder answers once it runs: hutch_fork_hold_take()) */
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return 0; /* the holder ended: its create ends with it */
	snprintf(cr->disk, sizeof(cr->disk), "%s", disk);
	cr->pid = 0; /* the holder's child, awaited by it */
	cr->sock = -EBADF;
	*ret_conn = TAKE_FD(s);
	return 1;
}

int hutch_fork_hold_take(int conn, struct hutch_fork_creator *cr, int *ret_pipe)
{
	struct pollfd pfd = { .fd = conn, .events = POLLIN };
	struct hutch_msg_hdr hdr = { 0 };
	char disk[HUTCH_DISK_FORK_NAME_MAX] = "";
	int fds[2] = { -EBADF, -EBADF };
	size_t nfds = 2;
	ssize_t k;

	if (poll(&pfd, 1, CLAIM_WAIT_MS) != 1)
		return -ETIMEDOUT;
	k = hutch_proto_recv(conn, &hdr, disk, sizeof(disk) - 1, fds, &nfds);
	if (k <= 0 || hdr.type != HUTCH_MSG_READY || nfds != 2 || strcmp(disk, cr->disk)) {
		for (size_t i = 0; k > 0 && i < nfds; i++)
			close(fds[i]);
		return -EPROTO;
	}
	cr->sock = fds[0];
	*ret_pipe = fds[1];
	return 0;
}

/* ---- the holder ---- */

struct holder {
	char sock[PATH_MAX], lock[PATH_MAX], token[PATH_MAX];
	int lock_fd, listen_fd, sig_fd, src_fd, pipe_w;
	struct hutch_fork_creator cr;
};

/* The lock (one holder per source and key) taken by hutch fork, ours
 * from the fork on: our pid in it; the source's supervisor's pidfd. 0,
 * or -errno: not ours to hold (the source ended). */
static int holder_lock(struct holder *h, const char *rt, const char *src)
{
	_cleanup_cjson_ cJSON *j = NULL;
	struct hutch_paths p;
	char line[32];
	double pid;

	snprintf(line, sizeof(line), "%d\n", (int)getpid());
	if (ftruncate(h->lock_fd, 0) < 0 || pwrite(h->lock_fd, line, strlen(line), 0) < 0)
		return -errno;
	if (hutch_paths_init(rt, src, &p) < 0 || hutch_state_read(&p, &j) < 0)
		return -ENOENT;
	pid = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "supervisor_pid"));
	if (!(pid > 0) || (h->src_fd = sys_pidfd_open((pid_t)pid, 0)) < 0)
		return -ESRCH;
	return hutch_state_is_live(&p) == 1 ? 0 : -ESRCH; /* that pid its supervisor */
}

/* The lock taken for a new holder (one per source and key): its fd, or
 * -errno (-EEXIST: a holder holds it). */
static int lock_take(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	struct stat a, b;

	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
		return -EEXIST;
	/* a holder that ended unlinked it between our open and flock */
	if (fstat(fd, &a) < 0 || stat(path, &b) < 0 || a.st_ino != b.st_ino)
		return -ESTALE;
	return TAKE_FD(fd);
}

/* The token ("<source>-<key>.disk", the disk's name in it): claimed by
 * the fork that renames it, which then sends that name in POST /fork at
 * once, our answer (the fds) read after. */
static int hold_token(struct holder *h)
{
	char tmp[PATH_MAX + 8];
	_cleanup_close_ int fd = -EBADF;

	snprintf(tmp, sizeof(tmp), "%s.new", h->token);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, h->cr.disk, strlen(h->cr.disk)) < 0 || rename(tmp, h->token) < 0) {
		(void)unlink(tmp);
		return -errno;
	}
	return 0;
}

/* Listening under its name, SIGTERM and SIGINT as a signalfd. */
static int holder_listen(struct holder *h)
{
	struct sockaddr_un sa;
	_cleanup_close_ int dirfd = -EBADF;
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	h->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (h->sig_fd < 0 || hutch_unix_addr(h->sock, &sa, &dirfd) < 0)
		return -EINVAL;
	(void)unlink(h->sock); /* a dead holder's: the lock is ours */
	h->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (h->listen_fd < 0 || bind(h->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(h->listen_fd, 4) < 0)
		return -errno;
	return hold_token(h);
}

/* Claimed by the connection c: the disk's name, the creator's socket and
 * the pipe sent. 0, or -errno (the holder goes on). */
static int holder_give(struct holder *h, int c)
{
	int fds[2] = { h->cr.sock, h->pipe_w };

	return hutch_proto_send(c, HUTCH_MSG_READY, 0, h->cr.disk, strlen(h->cr.disk), fds, 2);
}

/* The end: no more claims; given (the claimer has the create) or not
 * (the held create ends as its pipe closes, awaited so that a `hutch rm`
 * that waits for us finds it gone); the creator reaped, our files gone. */
_Noreturn static void holder_end(struct holder *h, bool given)
{
	struct pollfd pfd = { .fd = h->cr.sock, .events = POLLIN };

	(void)unlink(h->token);
	(void)unlink(h->sock);
	closep(&h->listen_fd);
	closep(&h->pipe_w);
	if (given) { /* the next fork's holder may start at once */
		(void)unlink(h->lock);
		closep(&h->lock_fd);
	}
	if (!given && h->cr.sock >= 0 && poll(&pfd, 1, END_WAIT_MS) <= 0 && h->cr.pid > 0)
		(void)kill(h->cr.pid, SIGKILL);
	closep(&h->cr.sock);
	while (h->cr.pid > 0 && waitpid(h->cr.pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (h->lock_fd >= 0)
		(void)unlink(h->lock); /* still ours: a new holder makes a new one */
	_exit(0);
}

/* Until a claim, the create's end (it failed, or waited its time), the
 * source's end or SIGTERM. */
_Noreturn static void holder_wait(struct holder *h)
{
	for (;;) {
		struct pollfd pfd[4] = {
			{ .fd = h->listen_fd, .events = POLLIN },
			{ .fd = h->cr.sock, .events = POLLIN },
			{ .fd = h->src_fd, .events = POLLIN },
			{ .fd = h->sig_fd, .events = POLLIN },
		};
		int c;

		if (poll(pfd, 4, HUTCH_DISK_FORK_HOLD_MS + END_WAIT_MS) < 0 && errno == EINTR)
			continue;
		if (!pfd[0].revents || pfd[1].revents || pfd[2].revents || pfd[3].revents)
			holder_end(h, false);
		c = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		/* the claimer's (it took the token); gone already: no other
		 * will come, the held create ends */
		if (holder_give(h, c) < 0) {
			close(c);
			holder_end(h, false);
		}
		closep(&h->cr.sock);
		close(c);
		holder_end(h, true);
	}
}

_Noreturn static void holder_main(struct hutch_cli_args *a, const char *rt, const char *src,
                                  const char *key, int lock_fd)
{
	struct holder h = { .lock_fd = lock_fd,
		            .listen_fd = -EBADF,
		            .sig_fd = -EBADF,
		            .src_fd = -EBADF,
		            .pipe_w = -EBADF,
		            .cr = { .sock = -EBADF } };
	char title[64];
	sigset_t mask;
	int pfd[2];

	/* SIGTERM (the source's rm) from now on awaited by the signalfd */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	hutch_stdio_to_null();
	snprintf(title, sizeof(title), "hutch-fork-hold %s", src);
	hutch_proctitle_set(title);
	if (hold_path(rt, src, key, "sock", h.sock, sizeof(h.sock)) < 0 ||
	    hold_path(rt, src, key, "lock", h.lock, sizeof(h.lock)) < 0 ||
	    hold_path(rt, src, key, "disk", h.token, sizeof(h.token)) < 0 ||
	    holder_lock(&h, rt, src) < 0 ||
	    hutch_fork_name_disk(src, h.cr.disk, sizeof(h.cr.disk)) < 0 ||
	    pipe2(pfd, O_CLOEXEC) < 0) {
		(void)unlink(h.lock); /* the source ended: nothing made */
		_exit(0);
	}
	a->cfg->disk_from_fd = pfd[0];
	snprintf(a->cfg->fork_held, sizeof(a->cfg->fork_held), "%s", src);
	a->progress = "never";
	{
		const int theirs_not[] = { pfd[1], h.lock_fd, h.src_fd };

		if (hutch_fork_creators_start(a, &h.cr, 1, theirs_not, ELEMENTSOF(theirs_not)))
			_exit(0);
	}
	close(pfd[0]);
	h.pipe_w = pfd[1];
	if (holder_listen(&h) < 0)
		holder_end(&h, false);
	holder_wait(&h);
}

/* The lock is taken here, before the holder runs, and held on by it (its
 * open file): a `hutch rm` of the source right after this fork finds the
 * holder (its pid written once it runs). */
void hutch_fork_hold_start(struct hutch_cli_args *a, const char *src, const char *key)
{
	const char *rt = hutch_runtime_dir();
	char dir[PATH_MAX], lock[PATH_MAX];
	int fd;
	pid_t pid;

	if (hold_path(rt, NULL, NULL, NULL, dir, sizeof(dir)) < 0 ||
	    hold_path(rt, src, key, "lock", lock, sizeof(lock)) < 0 ||
	    (mkdir(dir, 0700) < 0 && errno != EEXIST) || (fd = lock_take(lock)) < 0)
		return;
	(void)fflush(stdout);
	(void)fflush(stderr);
	/* one fork, in a session of its own, not waited for (we exit now:
	 * it is reparented), holding none of our fds but the lock */
	pid = hutch_fork_session();
	if (pid == 0) {
		if (fd > 3)
			(void)sys_close_range(3, (unsigned)fd - 1, 0);
		(void)sys_close_range((unsigned)fd + 1, ~0U, 0);
		holder_main(a, rt, src, key, fd);
	}
	close(fd);
}

/* ---- the end: rm, gc ---- */

/* The holder of lock (dfd's name) if it is alive (holds the lock): its
 * pid (0: not written yet, it is starting), else -1. */
static pid_t holder_alive(int dfd, const char *lock)
{
	_cleanup_close_ int fd = openat(dfd, lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char buf[32] = "";
	long pid = 0;

	if (fd < 0 || flock(fd, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK)
		return -1;
	if (pread(fd, buf, sizeof(buf) - 1, 0) <= 0 || sscanf(buf, "%ld", &pid) != 1)
		return 0;
	return (pid_t)pid;
}

/* Each lock of src's (NULL: every one) given to fn; how many it counted. */
static int for_each_lock(const char *rt, const char *src,
                         int (*fn)(int dfd, const char *lock, const char *stem))
{
	char dir[PATH_MAX], stem[NAME_MAX + 1];
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int total = 0;

	if (hold_path(rt, NULL, NULL, NULL, dir, sizeof(dir)) < 0 || !(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len < 6 || strcmp(de->d_name + len - 5, ".lock") ||
		    (src &&
		     (strncmp(de->d_name, src, strlen(src)) || de->d_name[strlen(src)] != '-')))
			continue;
		snprintf(stem, sizeof(stem), "%.*s", (int)(len - 5), de->d_name);
		total += fn(dirfd(d), de->d_name, stem);
	}
	return total;
}

static int end_one(int dfd, const char *lock, const char *stem)
{
	pid_t pid;
	_cleanup_close_ int pidfd = -EBADF;
	struct pollfd pfd;

	(void)stem;
	/* a holder just started by a fork writes its pid first thing */
	for (int i = 0; (pid = holder_alive(dfd, lock)) == 0 && i < 200; i++)
		(void)poll(NULL, 0, 10);
	pidfd = pid > 0 ? sys_pidfd_open(pid, 0) : -EBADF;
	pfd = (struct pollfd){ .fd = pidfd, .events = POLLIN };
	/* a pidfd: no signal to a recycled pid, and a wait for a process
	 * that is not our child; it ends its held create first */
	if (pidfd < 0 || holder_alive(dfd, lock) != pid ||
	    sys_pidfd_send_signal(pidfd, SIGTERM, NULL, 0) < 0)
		return 0;
	(void)poll(&pfd, 1, END_WAIT_MS + 5000);
	return 1;
}

void hutch_fork_hold_end(const char *rt, const char *src)
{
	(void)for_each_lock(rt, src, end_one);
}

static int gc_one(int dfd, const char *lock, const char *stem)
{
	char sock[NAME_MAX + 8];

	if (holder_alive(dfd, lock) >= 0)
		return 0;
	snprintf(sock, sizeof(sock), "%s.sock", stem);
	(void)unlinkat(dfd, sock, 0);
	snprintf(sock, sizeof(sock), "%s.disk", stem);
	(void)unlinkat(dfd, sock, 0);
	(void)unlinkat(dfd, lock, 0);
	return 1;
}

int hutch_fork_hold_gc(const char *rt)
{
	char dir[PATH_MAX];
	int n = for_each_lock(rt, NULL, gc_one);

	if (hold_path(rt, NULL, NULL, NULL, dir, sizeof(dir)) == 0)
		(void)rmdir(dir); /* none left */
	return n;
}
