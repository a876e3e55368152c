/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The warm pool, CLI side: the keeper process, claims, start, stop, list
 * and gc. See pool.h; the supervisor's side of a claim is
 * supervisor/claim.c, the key runtime/poolkey.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "fdutil.h"
#include "log.h"
#include "options.h"
#include "pool.h"
#include "poolkey.h"
#include "state.h"
#include "syscalls.h"

#define POOL_DIR        ".pool"
#define KEEPER_LOCK     "keeper.lock"
#define CHECK_EVERY_MS  10000 /* look for expired pooled sandboxes */
#define RETRY_MS        1000  /* after a failed creation */
#define REFILL_DELAY_MS 50    /* quiet time after a claim before refilling */

static int pool_dir_path(const char *rt, const char *key, char *buf, size_t size)
{
	int n = key ? snprintf(buf, size, "%s/%s/%s", rt, POOL_DIR, key)
	            : snprintf(buf, size, "%s/%s", rt, POOL_DIR);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The keeper's pid if it is alive (holds keeper.lock), else 0. */
static pid_t keeper_alive(int dfd, unsigned *ret_size)
{
	_cleanup_close_ int fd = openat(dfd, KEEPER_LOCK, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char buf[64] = { 0 };
	long pid = 0;
	unsigned size = 0;

	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK)
		return 0;
	if (pread(fd, buf, sizeof(buf) - 1, 0) > 0 && sscanf(buf, "%ld %u", &pid, &size) >= 1) {
		if (ret_size)
			*ret_size = size;
		return (pid_t)pid;
	}
	return 0;
}

/* ---- claim (CLI; one sandbox's claim: claim.c) ---- */

int hutch_pool_claim(const struct hutch_config *cfg, const char *rt, int stream_fd,
                     struct hutch_created *ret, struct hutch_err *err)
{
	char key[HUTCH_POOL_KEY_MAX], path[4200];
	_cleanup_closedir_ DIR *d = NULL;
	_cleanup_cjson_ cJSON *b = NULL;
	_cleanup_free_ char *body = NULL;
	struct dirent *de;

	if (!hutch_pool_can_serve(cfg))
		return 0;
	hutch_pool_key(cfg, key, sizeof(key));
	if (pool_dir_path(rt, key, path, sizeof(path)) < 0)
		return 0;
	d = opendir(path);
	if (!d || !keeper_alive(dirfd(d), NULL))
		return 0;
	b = hutch_options_to_json(cfg, HUTCH_OPT_SESSION);
	body = b ? cJSON_PrintUnformatted(b) : NULL;
	if (!body)
		return hutch_err_set(err, -ENOMEM, "claim request");
	while ((de = readdir(d))) {
		int r;
		if (!hutch_id_is_valid(de->d_name))
			continue;
		/* Only one unlink of the token succeeds: the sandbox is ours. */
		if (unlinkat(dirfd(d), de->d_name, 0) < 0)
			continue;
		r = hutch_pool_claim_taken(rt, de->d_name, body, stream_fd, ret, err);
		if (r > 0)
			return r;
		/* Expired or broken meanwhile: try the next, then create cold. */
		hutch_log(HUTCH_LOG_DEBUG, "pool: %s", err->msg);
		hutch_err_clear(err);
	}
	return 0;
}

/* ---- the keeper ---- */

struct keeper {
	struct hutch_config *cfg;
	const char *rt;
	char key[HUTCH_POOL_KEY_MAX];
	char dir[4200];
	int dfd, lock_fd, sigfd, ino, report_fd;
	unsigned size;
	bool foreground; /* pool start --foreground: no report_fd, this process */
};

static unsigned count_ready(struct keeper *k, bool drop_stale)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	unsigned n = 0;
	int fd = openat(k->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((de = readdir(d))) {
		struct hutch_paths p;
		if (!hutch_id_is_valid(de->d_name))
			continue;
		/* A pooled sandbox that expired (or was removed) is gone. */
		if (drop_stale &&
		    (hutch_paths_init(k->rt, de->d_name, &p) < 0 || access(p.sock, F_OK) < 0)) {
			(void)unlinkat(k->dfd, de->d_name, 0);
			continue;
		}
		n++;
	}
	return n;
}

/* Create one pooled sandbox and publish it. In a child of the keeper: a
 * supervisor forked by hutch_sandbox_create() would otherwise inherit the
 * keeper's own fds (its lock above all, which would keep the pool looking
 * alive after the keeper died). */
static int add_one(struct keeper *k, struct hutch_err *err)
{
	int pfd[2], status;
	pid_t pid;
	ssize_t n;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return hutch_err_set_errno(err, -errno, "pipe");
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return hutch_err_set_errno(err, -errno, "fork");
	}
	if (pid == 0) {
		struct hutch_created c;
		char token[4300];
		int fd, r;

		close(pfd[0]);
		close(k->lock_fd);
		close(k->sigfd);
		close(k->ino);
		close(k->dfd);
		if (k->report_fd >= 0)
			close(k->report_fd);
		r = hutch_sandbox_create(k->cfg, k->rt, &c, NULL, -1, err);
		if (r >= 0) {
			snprintf(token, sizeof(token), "%s/%s", k->dir, c.id);
			fd = open(token, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (fd < 0)
				hutch_err_set_errno(err, -errno, "publish pooled sandbox %s", c.id);
			else
				close(fd);
			/* Published (or not, and deleted): the pool has it. */
			if (fd < 0 || hutch_created_ack(&c) < 0)
				(void)unlink(token);
		}
		(void)hutch_write_all(pfd[1], err, sizeof(*err));
		_exit(0);
	}
	close(pfd[1]);
	n = hutch_read_all(pfd[0], err, sizeof(*err));
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(*err))
		return hutch_err_set(err, -EIO, "the pool's creating process died");
	err->msg[sizeof(err->msg) - 1] = '\0';
	return err->code < 0 ? err->code : 0;
}

static void delete_sandbox(const char *rt, const char *id)
{
	struct hutch_paths p;
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };

	if (hutch_paths_init(rt, id, &p) < 0)
		return;
	if (hutch_client_request(p.sock, "DELETE", "/", NULL, 0, &resp, &err) >= 0)
		hutch_http_resp_done(&resp);
}

/* Unpublish every ready sandbox (so no one claims it) and delete it. */
static void drain(const char *rt, int dfd)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (hutch_id_is_valid(de->d_name) && unlinkat(dfd, de->d_name, 0) == 0)
			delete_sandbox(rt, de->d_name);
}

/* Tell systemd (Type=notify) how the keeper is: one datagram to
 * $NOTIFY_SOCKET, a path or an abstract name ("@..."); nothing without it. */
static void sd_notify_state(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -EBADF, dirfd = -EBADF;
	size_t len = path ? strlen(path) : 0;

	if (!len || (path[0] != '/' && path[0] != '@'))
		return;
	if (path[0] == '/') { /* any length: through its directory's fd */
		if (hutch_unix_addr(path, &sa, &dirfd) < 0)
			return;
		len = strlen(sa.sun_path);
	} else if (len < sizeof(sa.sun_path)) {
		memcpy(sa.sun_path, path, len);
		sa.sun_path[0] = '\0'; /* abstract */
	} else {
		return;
	}
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		(void)sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
}

/* The first fill's outcome: to the waiting CLI, or (--foreground) on
 * stdout/stderr and to systemd. */
static void report(struct keeper *k, const struct hutch_err *err)
{
	if (!k->foreground) {
		(void)hutch_write_all(k->report_fd, err, sizeof(*err));
		return;
	}
	if (err->code < 0) {
		fprintf(stderr, "hutch: cannot start the pool: %s\n", err->msg);
		return;
	}
	printf("pool %s: %u sandboxes ready (keeper pid %d)\n", k->key, k->size, (int)getpid());
	fflush(stdout);
	sd_notify_state("READY=1");
}

/* The pool's directory goes with its keeper: drained, config and lock
 * removed, and the pools' directory if this was the last. */
static void leave_pool_dir(struct keeper *k)
{
	char parent[4200];

	drain(k->rt, k->dfd);
	(void)unlinkat(k->dfd, "config", 0);
	(void)unlinkat(k->dfd, KEEPER_LOCK, 0);
	(void)rmdir(k->dir);
	if (pool_dir_path(k->rt, NULL, parent, sizeof(parent)) == 0)
		(void)rmdir(parent); /* the last pool */
}

static __attribute__((noreturn)) void keeper_main(struct keeper *k, int report_fd)
{
	struct hutch_err err = { 0 };
	sigset_t mask;
	int ino, sigfd, timeout;
	bool reported = false;

	k->report_fd = report_fd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	k->sigfd = sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	k->ino = ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (sigfd < 0 || ino < 0) {
		hutch_err_set_errno(&err, -errno, "pool keeper: signalfd/inotify");
		report(k, &err);
		_exit(HUTCH_EXIT_FAILURE);
	}
	if (inotify_add_watch(ino, k->dir, IN_DELETE | IN_MOVED_FROM) < 0) {
		hutch_err_set_errno(&err, -errno, "pool keeper: watch '%s'", k->dir);
		report(k, &err);
		_exit(HUTCH_EXIT_FAILURE);
	}
	for (;;) {
		struct pollfd pfd[2] = { { .fd = sigfd, .events = POLLIN },
			                 { .fd = ino, .events = POLLIN } };
		unsigned have = count_ready(k, true);

		timeout = CHECK_EVERY_MS;
		while (have < k->size) {
			hutch_err_clear(&err);
			if (add_one(k, &err) < 0) {
				hutch_log(HUTCH_LOG_WARN, "pool %s: %s", k->key, err.msg);
				if (!reported) {
					/* the start failed: no dead pool left to
					 * list until a gc */
					leave_pool_dir(k);
					report(k, &err);
					_exit(HUTCH_EXIT_FAILURE);
				}
				timeout = RETRY_MS;
				break;
			}
			have++;
		}
		if (!reported) {
			hutch_err_clear(&err);
			report(k, &err);
			if (report_fd >= 0)
				close(report_fd);
			k->report_fd = -1;
			reported = true;
		}
		if (poll(pfd, 2, timeout) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			break;
		if (pfd[1].revents) {
			char buf[4096];
			struct pollfd q = { .fd = ino, .events = POLLIN };
			/* Claims come in bursts (a test suite's setup): let the
			 * burst pass before competing with it for the CPU. */
			do
				while (read(ino, buf, sizeof(buf)) > 0)
					;
			while (poll(&q, 1, REFILL_DELAY_MS) > 0);
		}
	}
	leave_pool_dir(k);
	close(k->lock_fd);
	if (k->foreground)
		sd_notify_state("STOPPING=1");
	_exit(0);
}

/* "config" in the pool's directory, for ls: NAME=VALUE per value of the
 * options in the key. */
struct config_line {
	FILE *f;
	const char *name;
};

static void write_config_line(void *ud, const char *value)
{
	const struct config_line *l = ud;

	fprintf(l->f, "%s=%s\n", l->name, value);
}

static void write_config(int dfd, const struct hutch_config *cfg)
{
	_cleanup_fclose_ FILE *f = NULL;
	const struct hutch_option *opts;
	int fd = openat(dfd, "config", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t n;

	if (fd < 0)
		return;
	f = fdopen(fd, "we");
	if (!f) {
		close(fd);
		return;
	}
	opts = hutch_options(&n);
	for (size_t i = 0; i < n; i++) {
		struct config_line l = { f, opts[i].name };
		if ((opts[i].flags & HUTCH_OPT_POOL_KEY) && !(opts[i].flags & HUTCH_OPT_HIDDEN))
			hutch_option_text(&opts[i], cfg, write_config_line, &l);
	}
}

/* Create and lock the pool's directory (k->dir, k->dfd) and write its
 * config; *ret_lock: keeper.lock, held. */
static int open_pool_dir(struct keeper *k, const struct hutch_config *cfg, int *ret_lock,
                         struct hutch_err *err)
{
	_cleanup_close_ int lock_fd = -EBADF;
	int r;

	hutch_pool_key(cfg, k->key, sizeof(k->key));
	r = pool_dir_path(k->rt, k->key, k->dir, sizeof(k->dir));
	if (r >= 0)
		r = hutch_mkdir_p_at(AT_FDCWD, k->dir, 0700);
	if (r < 0)
		return hutch_err_set_errno(err, r, "create '%s'", k->dir);
	k->dfd = open(k->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (k->dfd < 0)
		return hutch_err_set_errno(err, -errno, "open '%s'", k->dir);
	lock_fd = openat(k->dfd, KEEPER_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock_fd < 0)
		return hutch_err_set_errno(err, -errno, "open '%s/%s'", k->dir, KEEPER_LOCK);
	if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
		unsigned running = 0;
		pid_t other = keeper_alive(k->dfd, &running);
		/* The caller's to fix (stop it first): usage, 64, as
		 * test_pool and the man page have it. */
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EEXIST,
		                           "a pool for this configuration runs already (keeper "
		                           "pid %d, size %u): 'hutch pool stop' it first",
		                           (int)other, running);
	}
	write_config(k->dfd, cfg);
	*ret_lock = TAKE_FD(lock_fd);
	return 0;
}

/* Fork the detached keeper; returns once it filled the pool (0) or
 * failed (err as it reported). --foreground: be the keeper (never
 * returns). */
static int spawn_keeper(struct keeper *k, int lock_fd, struct hutch_err *err)
{
	int pipefd[2], status;
	char line[96];
	pid_t pid;
	ssize_t n;

	if (k->foreground) {
		snprintf(line, sizeof(line), "%d %u\n", (int)getpid(), k->size);
		(void)!pwrite(lock_fd, line, strlen(line), 0);
		k->lock_fd = lock_fd;
		keeper_main(k, -1);
	}
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return hutch_err_set_errno(err, -errno, "pipe");
	pid = hutch_fork_detached();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return hutch_err_set_errno(err, pid, "fork");
	}
	if (pid == 0) {
		close(pipefd[0]);
		snprintf(line, sizeof(line), "%d %u\n", (int)getpid(), k->size);
		(void)!pwrite(lock_fd, line, strlen(line), 0);
		hutch_stdio_to_null();
		snprintf(line, sizeof(line), "hutch-pool %s", k->key);
		hutch_proctitle_set(line);
		k->lock_fd = lock_fd;
		keeper_main(k, pipefd[1]);
	}
	close(pipefd[1]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	n = hutch_read_all(pipefd[0], err, sizeof(*err));
	close(pipefd[0]);
	if (n != (ssize_t)sizeof(*err))
		return hutch_err_set(err, -EIO, "the pool keeper died while filling the pool");
	err->msg[sizeof(err->msg) - 1] = '\0';
	return err->code < 0 ? err->code : 0;
}

int hutch_pool_start(struct hutch_config *cfg, unsigned size, const char *rt, bool foreground,
                     pid_t *ret_pid, struct hutch_err *err)
{
	static struct keeper k;
	_cleanup_close_ int lock_fd = -EBADF;
	int r;

	if (!hutch_pool_can_serve(cfg))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "a pool cannot hold sandboxes with a setup script, an on_create hook (they "
		        "run at each creation), published ports (-p: bind them after the claim "
		        "with POST /bind_port), header bindings (their secrets and CA are made "
		        "for one sandbox) or volumes (-v: mounted as a sandbox is made); drop "
		        "those options");
	memset(&k, 0, sizeof(k));
	k.cfg = cfg;
	k.rt = rt;
	k.size = size;
	k.foreground = foreground;
	k.dfd = -EBADF;
	r = open_pool_dir(&k, cfg, &lock_fd, err);
	if (r < 0) {
		if (k.dfd >= 0)
			close(k.dfd);
		return r;
	}
	/* Pooled sandboxes: no per-session options yet; they live for
	 * HUTCH_POOL_SANDBOX_TTL unless claimed. */
	snprintf(cfg->pool_key, sizeof(cfg->pool_key), "%s", k.key);
	cfg->ttl_seconds = HUTCH_POOL_SANDBOX_TTL;
	cfg->idle_timeout_seconds = 0;
	r = spawn_keeper(&k, lock_fd, err);
	if (r == 0 && ret_pid)
		*ret_pid = keeper_alive(k.dfd, NULL);
	close(k.dfd);
	return r;
}

cJSON *hutch_pool_describe(const struct hutch_config *cfg, const char *rt)
{
	char key[HUTCH_POOL_KEY_MAX], dir[4200], path[4300];
	struct hutch_paths p;
	_cleanup_cjson_ cJSON *o = cJSON_CreateObject();
	size_t at = strlen(rt) + 1; /* where the id starts in a sandbox's paths */

	hutch_pool_key(cfg, key, sizeof(key));
	if (!o || pool_dir_path(rt, key, dir, sizeof(dir)) < 0 ||
	    hutch_paths_init(rt, "000000000000", &p) < 0)
		return NULL;
	cJSON_AddStringToObject(o, "key", key);
	cJSON_AddStringToObject(o, "pool_dir", dir);
	snprintf(path, sizeof(path), "%s/%s", dir, KEEPER_LOCK);
	cJSON_AddStringToObject(o, "keeper_lock", path);
	/* A ready sandbox's socket, its id as {id}. */
	snprintf(path, sizeof(path), "%.*s{id}%s", (int)at, p.sock, p.sock + at + HUTCH_ID_LEN);
	cJSON_AddStringToObject(o, "socket", path);
	cJSON_AddBoolToObject(o, "servable", hutch_pool_can_serve(cfg));
	cJSON_AddItemToObject(o, "claim", hutch_options_to_json(cfg, HUTCH_OPT_SESSION));
	return TAKE_PTR(o);
}

/* Call fn for each pool directory. */
static int for_each_pool(const char *rt,
                         int (*fn)(const char *rt, const char *key, int dfd, void *ud), void *ud)
{
	char path[4200];
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int total = 0;

	if (pool_dir_path(rt, NULL, path, sizeof(path)) < 0 || !(d = opendir(path)))
		return 0;
	while ((de = readdir(d))) {
		int dfd, r;
		if (de->d_name[0] == '.')
			continue;
		dfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (dfd < 0)
			continue;
		r = fn(rt, de->d_name, dfd, ud);
		close(dfd);
		if (r > 0)
			total += r;
	}
	return total;
}

static int stop_one(const char *rt, const char *key, int dfd, void *ud)
{
	const char *want = ud;
	pid_t pid;

	(void)rt;
	if (want && strcmp(want, key) != 0)
		return 0;
	pid = keeper_alive(dfd, NULL);
	if (pid <= 0)
		return 0;
	/* A pidfd: no signal to a recycled pid, and a wait for the exit of a
	 * process that is not our child. The keeper drains its sandboxes
	 * first, so when it is gone, they are. */
	{
		_cleanup_close_ int pidfd = (int)sys_pidfd_open(pid, 0);
		struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
		if (pidfd < 0 || keeper_alive(dfd, NULL) != pid ||
		    sys_pidfd_send_signal(pidfd, SIGTERM, NULL, 0) < 0)
			return 0;
		(void)poll(&pfd, 1, 60000);
	}
	return 1;
}

int hutch_pool_stop(const char *rt, const char *key, struct hutch_err *err)
{
	(void)err;
	return for_each_pool(rt, stop_one, (void *)key);
}

static int list_one(const char *rt, const char *key, int dfd, void *ud)
{
	cJSON *arr = ud, *o = cJSON_CreateObject();
	unsigned size = 0, ready = 0;
	pid_t pid = keeper_alive(dfd, &size);
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char cfg[1024] = "";

	(void)rt;
	if (fd >= 0 && (d = fdopendir(fd)))
		while ((de = readdir(d)))
			ready += hutch_id_is_valid(de->d_name);
	else if (fd >= 0)
		close(fd);
	fd = openat(dfd, "config", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, cfg, sizeof(cfg) - 1);
		cfg[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	if (!o)
		return 0;
	cJSON_AddStringToObject(o, "key", key);
	cJSON_AddNumberToObject(o, "size", size);
	cJSON_AddNumberToObject(o, "ready", ready);
	cJSON_AddNumberToObject(o, "keeper_pid", pid);
	cJSON_AddBoolToObject(o, "alive", pid > 0);
	cJSON_AddStringToObject(o, "config", cfg);
	cJSON_AddItemToArray(arr, o);
	return 1;
}

cJSON *hutch_pool_list(const char *rt)
{
	cJSON *arr = cJSON_CreateArray();

	if (arr)
		(void)for_each_pool(rt, list_one, arr);
	return arr;
}

static int gc_one(const char *rt, const char *key, int dfd, void *ud)
{
	char path[4200];

	(void)ud;
	if (keeper_alive(dfd, NULL) > 0)
		return 0;
	/* The keeper died (kill -9, reboot of the runtime dir is impossible):
	 * nobody refills or drains this pool. */
	drain(rt, dfd);
	(void)unlinkat(dfd, "config", 0);
	(void)unlinkat(dfd, KEEPER_LOCK, 0);
	if (pool_dir_path(rt, key, path, sizeof(path)) == 0)
		(void)rmdir(path);
	return 1;
}

int hutch_pool_gc(const char *rt, struct hutch_err *err)
{
	(void)err;
	return for_each_pool(rt, gc_one, NULL);
}
