/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch fork ID [-n N]: N new sandboxes from a live one's filesystem
 * (docs/snapshots.md "Fork"). A source whose writable places are a disk
 * that can be cloned (and forks that want one; the host-derived root's
 * disk is copied if not): POST /fork on the source makes N disks, clones
 * of its own taken while it is frozen, then N creations from the source's
 * image, each taking its disk by name (runtime/disk.h "Forks").
 * Else (no clone, tmpfs, an ordinary user) the route of Python's session.fork():
 * POST /snapshot on the source, then N creations from that snapshot, which
 * stays in the store (named on stderr). Each fork has the sandbox options
 * given here (its own id, limits, network, TTL). All or none: the forks
 * are handed over (supervisor/sandbox.h) only once every one is ready, so
 * a failure, Ctrl-C or kill of this process part-way deletes those made.
 *
 * The N creates run at once, each in a *creator*, a child of ours that
 * sends back what its create gave (the hand-over socket with it). By disk
 * (not the host root's, which may be copied), the creators start before
 * POST /fork: this process names the disks ("names"), each creator waits
 * for its disk's name to appear (the forker's socket, listening) and its
 * create runs while the source is frozen and cloned; its supervisor asks
 * the forker for the disk, which answers once the disk is filled.
 *
 * --full (fork_full()): POST /fork {"full": true} dumps the source into a
 * full snapshot of its store (recorded first by fork-full.c, so that gc
 * removes it after a kill), N creators restore it (create --snapshot's
 * path), and it is removed before the hand-over, whatever happened.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "config.h"
#include "criu.h"
#include "disk.h"
#include "image.h"
#include "options.h"
#include "proto.h"
#include "sandbox.h"
#include "state.h"
#include "stream.h"
#include "util.h"
#include "verb-opts.h"
#include "verbs.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

static const struct hutch_cli_opt fork_opts[] = {
	{ .name = "count",
	  .short_name = 'n',
	  .kind = HUTCH_CLI_U64,
	  A(size),
	  .metavar = "N",
	  /* E2B's fork(count <= 100) */
	  .range = &(const struct hutch_cli_range){ .umin = 1,
	                                            .umax = 100,
	                                            .udef = 1,
	                                            .invalid = "invalid -n '%s': give a number of "
	                                                       "forks from 1 to 100",
	                                            .missing = "-n needs a number of forks" },
	  .help = "how many forks (1 to 100, default 1)" },
	{ .name = "json",
	  .kind = HUTCH_CLI_FLAG,
	  A(json),
	  .help = "print {source, snapshot, method, made_ahead, frozen_ms, forks: [ids]} "
	          "(--full: {source, method, dump_ms, restore_ms, bytes, forks})" },
	{ .name = "full",
	  .kind = HUTCH_CLI_FLAG,
	  A(all),
	  .help = "processes and memory too: one CRIU dump of the source (it runs on), N "
	          "restores (a plain source of network none; docs/snapshots.md)" },
	PROGRESS_OPT,
	NO_LIMITS_OPT,
	{ 0 },
};

/* A fork's creator (the file's head says what it does): its pid, our end
 * of its socket (closed: it gives up, if it still waits for its disk),
 * the disk's name ("": none, the snapshot route). */
struct creator {
	pid_t pid;
	int sock;
	char disk[HUTCH_DISK_FORK_NAME_MAX];
};

/* What a creator sends back: its create's exit code (0: made) and what
 * the create gave, the hand-over socket as an fd with it. */
struct creator_msg {
	int r;
	struct hutch_created c;
};

/* A disk named by POST /fork's answer appears at once; one we named,
 * once the source's supervisor listens on it (its request made). */
#define DISK_APPEAR_MS 30000

/* Until the disk's socket is in $RT/.disk (the supervisor renames it
 * there once it listens: hutch_disk_fork_listen()): 0, or -ECANCELED when
 * our parent gave up (ctl closed), -ETIMEDOUT, -errno. */
static int wait_for_disk(const char *name, int ctl)
{
	_cleanup_close_ int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK), dir = -EBADF;
	double end = hutch_now_mono_sec() + DISK_APPEAR_MS / 1e3;
	char path[4096];

	snprintf(path, sizeof(path), "%s/" HUTCH_DISK_DIR, hutch_runtime_dir());
	dir = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0 || dir < 0 || inotify_add_watch(in, path, IN_MOVED_TO | IN_ONLYDIR) < 0)
		return -errno;
	for (;;) {
		struct pollfd p[2] = { { .fd = in, .events = POLLIN },
			               { .fd = ctl, .events = POLLIN } };
		char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
		double left = end - hutch_now_mono_sec();

		if (faccessat(dir, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			return 0;
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(p, 2, (int)(left * 1e3) + 1) < 0 && errno != EINTR)
			return -errno;
		if (p[1].revents)
			return -ECANCELED;
		while (read(in, buf, sizeof(buf)) > 0)
			;
	}
}

/* The creator's life: its disk awaited, the create (as hutch create's,
 * its output on our stderr), its result sent. It dies with us
 * (PDEATHSIG): a create then ends with its creator gone, and the
 * supervisor deletes the sandbox (supervisor/sandbox.h). */
_Noreturn static void creator_main(struct hutch_cli_args *a, const char *disk, int sock,
                                   pid_t parent)
{
	struct creator_msg m = { .r = HUTCH_EXIT_FAILURE };
	int r;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);
	if (disk[0] && (r = wait_for_disk(disk, sock)) < 0) {
		if (r != -ECANCELED)
			fprintf(stderr, "hutch: fork: its disk '%s' did not come: %s\n", disk,
			        strerror(-r));
		(void)hutch_proto_send(sock, HUTCH_MSG_FAILED, 0, &m, sizeof(m), NULL, 0);
		_exit(0);
	}
	if (disk[0])
		snprintf(a->cfg->disk_from, sizeof(a->cfg->disk_from), "%s", disk);
	m.r = hutch_cli_create_sandbox(a->cfg, a->progress, &m.c);
	(void)hutch_proto_send(sock, HUTCH_MSG_READY, 0, &m, sizeof(m), &m.c.handover_fd,
	                       m.r == 0 && m.c.handover_fd >= 0 ? 1 : 0);
	_exit(0);
}

/* The n creators started, each on its disk (cr[i].disk, set) or none;
 * not_theirs: an fd of ours they close (a full fork's record, whose lock
 * must end with us, not with a supervisor a creator leaves behind). */
static int start_creators(struct hutch_cli_args *a, struct creator *cr, size_t n, int not_theirs)
{
	pid_t parent = getpid();

	for (size_t i = 0; i < n; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: socketpair: %s",
			                      strerror(errno));
		(void)fflush(stdout);
		(void)fflush(stderr);
		cr[i].pid = fork();
		if (cr[i].pid == 0) {
			close(sv[0]);
			for (size_t j = 0; j < i; j++) /* its siblings' are not its own */
				close(cr[j].sock);
			if (not_theirs >= 0)
				close(not_theirs);
			creator_main(a, cr[i].disk, sv[1], parent);
		}
		close(sv[1]);
		if (cr[i].pid < 0) {
			close(sv[0]);
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: fork: %s",
			                      strerror(errno));
		}
		cr[i].sock = sv[0];
	}
	return 0;
}

/* Every creator's answer, in order, and every creator reaped: 0 with the
 * n forks in c[], or the first failure's exit code (*failed: its index)
 * with every fork made dropped (its supervisor deletes it). */
static int collect(struct creator *cr, size_t n, struct hutch_created *c, size_t *failed)
{
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		struct hutch_msg_hdr hdr = { 0 };
		struct creator_msg m = { 0 };
		int fd = -EBADF;
		size_t nfds = 1;
		ssize_t k = cr[i].sock < 0
		                    ? -EBADF
		                    : hutch_proto_recv(cr[i].sock, &hdr, &m, sizeof(m), &fd, &nfds);

		closep(&cr[i].sock);
		if (k == (ssize_t)sizeof(m) && hdr.type == HUTCH_MSG_READY && m.r == 0 &&
		    nfds == 1) {
			c[i] = m.c;
			c[i].handover_fd = fd;
			continue;
		}
		if (nfds == 1)
			closep(&fd);
		c[i].handover_fd = -EBADF;
		if (!r) {
			r = k == (ssize_t)sizeof(m) && m.r ? m.r : HUTCH_EXIT_FAILURE;
			*failed = i;
		}
	}
	for (size_t i = 0; i < n; i++)
		while (cr[i].pid > 0 && waitpid(cr[i].pid, NULL, 0) < 0 && errno == EINTR)
			;
	for (size_t i = 0; r && i < n; i++)
		hutch_created_drop(&c[i]);
	return r;
}

/* The creators given up (each waiting for a disk that will not come
 * ends; a create on one ends with its forker), and reaped. */
static void give_up(struct creator *cr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		closep(&cr[i].sock);
	for (size_t i = 0; i < n; i++)
		while (cr[i].pid > 0 && waitpid(cr[i].pid, NULL, 0) < 0 && errno == EINTR)
			;
}

/* The source's config: its state.json's, which its supervisor wrote once
 * it was running (the same as GET /status's: a round trip and the
 * supervisor's wake-up fewer on the fork's path, 3-20 ms at load 9-12),
 * else (not readable, not running yet) GET /status's. */
static int source_config(const struct hutch_paths *p, cJSON **ret)
{
	const char *st;

	if (hutch_state_read(p, ret) == 0) {
		st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(*ret, "status"));
		if (st && !strcmp(st, "running") &&
		    cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(*ret, "config")))
			return 0;
		cJSON_Delete(*ret);
		*ret = NULL;
	}
	return hutch_cli_call(p->sock, "GET", "/status", NULL, 200, ret);
}

/* The source's store (its config's): its image and snapshots are
 * there, so the forks' HUTCH_IMAGE_STORE must be it whatever this shell's
 * says. *by_disk: its writable places are a disk (POST /fork); *host: the
 * host-derived root, which has no snapshots (its disk copied, if need be). */
static int use_source_store(const struct hutch_paths *p, bool *by_disk, bool *host, char *image_out,
                            size_t image_len)
{
	_cleanup_cjson_ cJSON *j = NULL;
	const cJSON *cfg;
	const char *store, *ws, *image;
	int r;

	if ((r = source_config(p, &j)))
		return r;
	cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
	store = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "image_store"));
	ws = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "workspace"));
	image = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "image"));
	*by_disk = ws && !strcmp(ws, "disk");
	*host = !image || !*image || !strcmp(image, "host");
	snprintf(image_out, image_len, "%s", *host ? "host" : image);
	if (store && *store && setenv("HUTCH_IMAGE_STORE", store, 1) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	return 0;
}

/* The snapshot route taken where a clone was expected (a 501 to POST
 * /fork), said with the source's reason: it is slower (a disk made
 * before its runtime dir's pool: ~700 ms instead of ~300 at load 10). */
static void say_not_cloned(const char *id, const char *body)
{
	_cleanup_cjson_ cJSON *j = cJSON_Parse(body);
	const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(j, "error"), "message"));

	fprintf(stderr, "hutch: fork: sandbox %s: %s; forking by a snapshot instead (slower)\n", id,
	        m ? m : "its disk cannot be cloned");
}

/* POST /fork: 0 with the answer ({disks, image, method, frozen_ms}), or an
 * exit code. copy false: only where the source's disk can be cloned; where
 * it cannot (501), *fallback is set (the snapshot route, faster than
 * copying the files into a new disk: docs/snapshots.md). cr: the names
 * sent; a 400 then leaves *ret NULL (ask again without them). */
static int fork_disks(const struct hutch_paths *p, const struct hutch_config *cfg, size_t n,
                      bool copy, const struct creator *cr, cJSON **ret, bool *fallback)
{
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };
	_cleanup_cjson_ cJSON *b = cJSON_CreateObject();
	_cleanup_free_ char *body = NULL;
	cJSON *names = NULL;
	int r;

	if (b) {
		cJSON_AddNumberToObject(b, "count", (double)n);
		cJSON_AddNumberToObject(b, "disk_bytes", (double)cfg->type->disk_bytes);
		cJSON_AddBoolToObject(b, "copy", copy);
		names = cr ? cJSON_AddArrayToObject(b, "names") : NULL;
		for (size_t i = 0; names && i < n; i++)
			cJSON_AddItemToArray(names, cJSON_CreateString(cr[i].disk));
	}
	if (!b || (cr && !names) || !(body = cJSON_PrintUnformatted(b)))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if ((r = hutch_client_request(p->sock, "POST", "/fork", body, strlen(body), &resp, &err)) <
	    0)
		return hutch_cli_lost(p->sock, r, err.msg);
	if ((resp.status == 501 && !copy) || (resp.status == 400 && cr)) {
		/* 400 with our names (always valid): a supervisor older than
		 * them, whose sandbox lived through an upgrade (*ret NULL: ask
		 * again without them) */
		*fallback = resp.status == 501;
		if (*fallback)
			say_not_cloned(p->id, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return 0;
	}
	if (resp.status != 201) {
		r = hutch_cli_api_error(resp.status, resp.body.data ? resp.body.data : "");
		hutch_http_resp_done(&resp);
		return hutch_cli_fail(r, "cannot fork sandbox %s: nothing was made", p->id);
	}
	*ret = cJSON_ParseWithLength(resp.body.data, resp.body.len);
	hutch_http_resp_done(&resp);
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(*ret, "disks")) != (int)n ||
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(*ret, "image")))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: the source's answer has no disks");
	return 0;
}

/* The disks no fork took (a failure part-way) ended now, not after their
 * forkers' wait: a connection closed unasked ends a forker. */
static void drop_disks(const cJSON *ans, size_t from)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(ans, "disks");

	for (int i = (int)from; i < cJSON_GetArraySize(d); i++) {
		struct hutch_disk_job job;

		if (hutch_disk_fork_take(hutch_runtime_dir(),
		                         cJSON_GetStringValue(cJSON_GetArrayItem(d, i)), &job) >= 0)
			closep(&job.sock);
	}
}

/* POST /snapshot: the answer ({name, frozen_ms, ...}) or an exit code. */
static int take_snapshot(const struct hutch_paths *p, cJSON **ret)
{
	int r = hutch_cli_call(p->sock, "POST", "/snapshot", "{}", 201, ret);

	if (r)
		return hutch_cli_fail(r, "cannot fork sandbox %s: nothing was made", p->id);
	if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(*ret, "name")))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE,
		                      "fork: the snapshot's answer has no name");
	return 0;
}

/* --json's object o (its other fields set) given "forks": the ids, and
 * printed; o NULL: the ids, one a line. */
static void print_ids(cJSON *o, const struct hutch_created *c, size_t n)
{
	cJSON *ids = o ? cJSON_AddArrayToObject(o, "forks") : NULL;
	_cleanup_free_ char *t = NULL;

	for (size_t i = 0; i < n; i++)
		if (!o)
			printf("%s\n", c[i].id);
		else if (ids)
			cJSON_AddItemToArray(ids, cJSON_CreateString(c[i].id));
	if (o) {
		t = cJSON_PrintUnformatted(o);
		printf("%s\n", t ? t : "{}");
	}
}

/* --full's: {source, method, dump_ms, restore_ms, bytes, forks}, or the
 * ids and the times on stderr. */
static void print_full(const struct hutch_cli_args *a, const char *src, const cJSON *dump,
                       const struct hutch_created *c, size_t n)
{
	double ms = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(dump, "duration_ms")),
	       rms = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(dump, "restore_ms")),
	       bytes = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(dump, "bytes"));
	_cleanup_cjson_ cJSON *o = a->json ? cJSON_CreateObject() : NULL;

	if (a->json) {
		cJSON_AddStringToObject(o, "source", src);
		cJSON_AddNullToObject(o, "snapshot");
		cJSON_AddStringToObject(o, "method", "full");
		cJSON_AddNumberToObject(o, "dump_ms", ms);
		cJSON_AddNumberToObject(o, "restore_ms", rms);
		cJSON_AddNumberToObject(o, "bytes", bytes);
	}
	print_ids(o, c, n);
	if (a->json)
		return;
	fprintf(stderr,
	        "hutch: %zu fork%s of %s with its processes and memory (dump %.0f ms, %.0f "
	        "bytes; restore%s %.0f ms)\n",
	        n, n == 1 ? "" : "s", src, ms, bytes, n == 1 ? "" : "s", rms);
}

/* snap: the snapshot's answer (the snapshot route) or POST /fork's. */
static void print_forks(const struct hutch_cli_args *a, const char *src, const cJSON *snap,
                        const struct hutch_created *c, size_t n)
{
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(snap, "name"));
	const cJSON *frozen = cJSON_GetObjectItemCaseSensitive(snap, "frozen_ms");
	const cJSON *ahead = cJSON_GetObjectItemCaseSensitive(snap, "made_ahead");
	const char *method = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(snap, "method"));

	if (a->all) {
		print_full(a, src, snap, c, n);
		return;
	}
	if (a->json) {
		_cleanup_cjson_ cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "source", src);
		if (name)
			cJSON_AddStringToObject(o, "snapshot", name);
		else
			cJSON_AddNullToObject(o, "snapshot");
		/* POST /fork's "method" and "made_ahead" (the snapshot route:
		 * "snapshot", no forker) */
		cJSON_AddStringToObject(o, "method", name ? "snapshot" : method);
		cJSON_AddNumberToObject(o, "made_ahead", name ? 0 : cJSON_GetNumberValue(ahead));
		cJSON_AddNumberToObject(o, "frozen_ms", cJSON_GetNumberValue(frozen));
		print_ids(o, c, n);
		return;
	}
	print_ids(NULL, c, n);
	if (name)
		fprintf(stderr, "hutch: %zu fork%s of %s from snapshot %s (frozen %.1f ms)\n", n,
		        n == 1 ? "" : "s", src, name, cJSON_GetNumberValue(frozen));
	else
		fprintf(stderr, "hutch: %zu fork%s of %s, its disk %s (frozen %.1f ms)\n", n,
		        n == 1 ? "" : "s", src, strcmp(method ?: "", "clone") ? "copied" : "cloned",
		        cJSON_GetNumberValue(frozen));
}

static int check_args(struct hutch_cli_args *a)
{
	struct hutch_err err = { 0 };
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch fork ID [-n N]");
	if (a->cfg->image[0])
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "fork starts from the source's filesystem: --image and "
		                      "--snapshot do not apply (create --snapshot NAME does that)");
	/* The forks' options checked before anything is made (create
	 * checks them again, with the environment's, for each). */
	if ((r = hutch_cli_config_from_env(a->cfg)))
		return r;
	if (hutch_config_validate(a->cfg, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
	if (a->progress && strcmp(a->progress, "auto") && strcmp(a->progress, "always") &&
	    strcmp(a->progress, "never"))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "invalid --progress '%s': give auto, always or never",
		                      a->progress);
	return 0;
}

/* The forks' root: the snapshot's (its name) or the source's image with
 * a disk each. */
static int root_of_forks(struct hutch_cli_args *a, const char *v, bool by_disk)
{
	const char *opt = by_disk ? "image" : "snapshot";
	struct hutch_err err = { 0 };

	a->cfg->no_limits = a->no_limits;
	if (hutch_option_parse(hutch_option_find(opt), a->cfg, v, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: %s", err.msg);
	return 0;
}

/* The disks' names, ours (POST /fork's "names"): the source's id and 64
 * random bits, never one in use. */
static int name_disks(const char *src, struct creator *cr, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned long long v;

		if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: getrandom: %s",
			                      strerror(errno));
		snprintf(cr[i].disk, sizeof(cr[i].disk), "fork-%.12s-%016llx.sock", src, v);
	}
	return 0;
}

/* The forks made from here on: by disk with the creators started first
 * (early, their disks named by us), else the creators started now, on
 * the answer's disks or the snapshot. */
static int make_forks(struct hutch_cli_args *a, struct creator *cr, size_t n, const cJSON *snap,
                      bool by_disk, bool early, struct hutch_created *c, size_t *failed)
{
	const cJSON *disks = cJSON_GetObjectItemCaseSensitive(snap, "disks");
	int r;

	for (size_t i = 0; !early && by_disk && i < n; i++)
		snprintf(cr[i].disk, sizeof(cr[i].disk), "%s",
		         cJSON_GetStringValue(cJSON_GetArrayItem(disks, (int)i)));
	if (!early && (r = start_creators(a, cr, n, -EBADF))) {
		give_up(cr, n);
		*failed = 0;
		return r;
	}
	return collect(cr, n, c, failed);
}

/* Ids printed, then the hand-overs, with SIGINT and SIGTERM held meanwhile
 * (an id is given out whole or its sandbox deleted: sandbox.h). */
static int hand_over(struct hutch_cli_args *a, const char *src, const cJSON *snap,
                     struct hutch_created *c, size_t n)
{
	sigset_t set, old;
	int r = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	(void)sigprocmask(SIG_BLOCK, &set, &old);
	print_forks(a, src, snap, c, n);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		r = hutch_cli_fail(HUTCH_EXIT_FAILURE, "write the forks' ids: %s; deleting them",
		                   strerror(errno));
		for (size_t i = 0; i < n; i++)
			hutch_created_drop(&c[i]);
	}
	for (size_t i = 0; !r && i < n; i++)
		if (hutch_created_ack(&c[i]) < 0)
			r = hutch_cli_fail(HUTCH_EXIT_FAILURE,
			                   "fork %s: its supervisor went away before the hand-over",
			                   c[i].id);
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}

/* --full: what the restores cannot make refused before anything is made,
 * as create --snapshot of a full snapshot refuses it; then the CRIU. */
static int full_checks(const struct hutch_cli_args *a)
{
	const char *drop = a->no_limits ? "--no-limits (a restore needs cgroups of its own)"
	                                : hutch_cli_full_restore_drop(a->cfg);
	struct hutch_criu c;
	char why[1024];

	if (geteuid() != 0)
		return hutch_cli_fail(
		        HUTCH_EXIT_NOT_CAPABLE,
		        "fork --full needs root: CRIU dumps and restores the process "
		        "tree as the host's root (fork without --full forks the files)");
	if (drop)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "fork --full: its forks are plain sandboxes of network none, "
		                      "as their source: drop %s",
		                      drop);
	hutch_criu_probe(hutch_runtime_dir(), &c);
	if (!c.works) {
		hutch_criu_refusal(&c, why, sizeof(why));
		return hutch_cli_fail(HUTCH_EXIT_NOT_CAPABLE, "%s", why);
	}
	return 0;
}

/* The store the source's supervisor dumps into (its config's, else the
 * default its wiped environment gives: root's), made the forks' too. */
static int full_store(const struct hutch_paths *p, struct hutch_cli_args *a, char *store,
                      size_t size)
{
	_cleanup_cjson_ cJSON *j = NULL;
	char buf[HUTCH_IMAGE_STORE_MAX + 1];
	const char *path;
	int r;

	if ((r = source_config(p, &j)))
		return r;
	path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(j, "config"), "image_store"));
	if (!path || !*path) {
		(void)unsetenv("HUTCH_IMAGE_STORE");
		path = hutch_image_store_path(buf, sizeof(buf));
	}
	if (!path || (size_t)snprintf(store, size, "%s", path) >= size ||
	    (size_t)snprintf(a->cfg->image_store, sizeof(a->cfg->image_store), "%s", path) >=
	            sizeof(a->cfg->image_store) ||
	    setenv("HUTCH_IMAGE_STORE", store, 1) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork --full: no image store for %s",
		                      p->id);
	return 0;
}

/* The dump's snapshot removed (else left to gc, its record kept), then
 * the record. */
static void full_cleanup(const char *store, const char *name, int *mark)
{
	struct hutch_err err = { 0 };

	if (hutch_cli_fork_full_remove(store, name, &err) < 0) {
		fprintf(stderr,
		        "hutch: fork --full: its dump %s stays in %s (%s): 'hutch gc' "
		        "removes it\n",
		        name, store, err.msg);
		closep(mark);
		return;
	}
	hutch_cli_fork_full_unmark(hutch_runtime_dir(), name, mark);
}

/* hutch fork --full (docs/snapshots.md "Full fork"): one dump of the live
 * source (POST /fork {"full": true}: a full snapshot of its store, the
 * source running on), then n restores at once (create --snapshot's, by
 * the creators), then the dump removed, whatever happened: recorded in
 * the runtime dir first (fork-full.c) so that gc removes it after a kill. */
static int fork_full(struct hutch_cli_args *a, struct creator *cr, struct hutch_created *c,
                     size_t n)
{
	_cleanup_cjson_ cJSON *dump = NULL;
	char store[HUTCH_IMAGE_STORE_MAX + 1], name[HUTCH_DISK_FORK_NAME_MAX], body[192];
	unsigned long long v;
	struct hutch_paths p;
	size_t failed = 0;
	int mark = -EBADF, r;
	double t0;

	if ((r = full_checks(a)) || (r = hutch_cli_open_live(a->pos[0], &p)) ||
	    (r = full_store(&p, a, store, sizeof(store))))
		return r;
	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: getrandom: %s", strerror(errno));
	snprintf(name, sizeof(name), "fork-%.12s-%016llx", p.id, v);
	if ((r = hutch_cli_fork_full_mark(hutch_runtime_dir(), p.id, name, store, &mark)) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork --full: record its dump in %s: %s",
		                      hutch_runtime_dir(), strerror(-r));
	snprintf(body, sizeof(body), "{\"count\": %zu, \"full\": true, \"name\": \"%s\"}", n, name);
	if ((r = hutch_cli_call(p.sock, "POST", "/fork", body, 201, &dump)) ||
	    (r = root_of_forks(a, name, false))) {
		full_cleanup(store, name, &mark);
		return hutch_cli_fail(r, "cannot fork sandbox %s: nothing was made", p.id);
	}
	t0 = hutch_now_mono_sec();
	if (!(r = start_creators(a, cr, n, mark)))
		r = collect(cr, n, c, &failed);
	else
		give_up(cr, n);
	cJSON_AddNumberToObject(dump, "restore_ms", (hutch_now_mono_sec() - t0) * 1e3);
	full_cleanup(store, name, &mark);
	if (r) {
		fprintf(stderr, "hutch: fork %zu of %zu failed; %s deleted\n", failed + 1, n,
		        n > 1 ? "the forks made were" : "nothing made to be");
		return r;
	}
	return hand_over(a, p.id, dump, c, n);
}

static int cmd_fork(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *snap = NULL;
	_cleanup_free_ struct hutch_created *c = NULL;
	_cleanup_free_ struct creator *cr = NULL;
	struct hutch_paths p;
	size_t failed = 0, n = (size_t)a->size;
	bool by_disk = false, host = false, fallback = false, early;
	char image[sizeof(a->cfg->image)];
	int r;

	if ((r = check_args(a)))
		return r;
	if (!(c = calloc(n, sizeof(*c))) || !(cr = calloc(n, sizeof(*cr))))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	for (size_t i = 0; i < n; i++)
		cr[i].sock = -EBADF;
	if (a->all)
		return fork_full(a, cr, c, n);
	if ((r = hutch_cli_open_live(a->pos[0], &p)) ||
	    (r = use_source_store(&p, &by_disk, &host, image, sizeof(image))))
		return r;
	by_disk = by_disk && geteuid() == 0 && !strcmp(a->cfg->workspace, "disk");
	/* A clone (not the host root's disk, which may be copied: its
	 * creates would wait through the copy) lets the creates start now. */
	early = by_disk && !host;
	if (early && ((r = root_of_forks(a, image, true)) || (r = name_disks(p.id, cr, n)) ||
	              (r = start_creators(a, cr, n, -EBADF)))) {
		give_up(cr, n);
		return r;
	}
	if (by_disk && (r = fork_disks(&p, a->cfg, n, host, early ? cr : NULL, &snap, &fallback))) {
		if (early)
			give_up(cr, n);
		return r;
	}
	if (early && !snap) { /* not cloned (the snapshot route), or no names */
		give_up(cr, n);
		memset(cr, 0, n * sizeof(*cr));
		for (size_t i = 0; i < n; i++)
			cr[i].sock = -EBADF;
		early = false;
		if (!fallback && (r = fork_disks(&p, a->cfg, n, host, NULL, &snap, &fallback)))
			return r;
	}
	by_disk = by_disk && !fallback;
	if ((!by_disk && (r = take_snapshot(&p, &snap))) ||
	    (!early && (r = root_of_forks(a,
	                                  cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	                                          snap, by_disk ? "image" : "name")),
	                                  by_disk)))) {
		if (early)
			give_up(cr, n);
		if (by_disk && snap)
			drop_disks(snap, 0);
		return r;
	}
	if ((r = make_forks(a, cr, n, snap, by_disk, early, c, &failed))) {
		/* the creators reaped: every disk not taken is dropped now */
		if (by_disk) {
			drop_disks(snap, 0);
			fprintf(stderr, "hutch: fork %zu of %zu failed; %s deleted\n", failed + 1,
			        n, n > 1 ? "the forks made were" : "nothing made to be");
		} else
			fprintf(stderr,
			        "hutch: fork %zu of %zu failed; %s deleted; snapshot %s kept\n",
			        failed + 1, n, n > 1 ? "the forks made were" : "nothing made to be",
			        cJSON_GetStringValue(
			                cJSON_GetObjectItemCaseSensitive(snap, "name")));
		return r;
	}
	return hand_over(a, p.id, snap, c, n);
}

const struct hutch_cli_verb hutch_verb_fork = {
	.name = "fork",
	.synopsis = "ID [-n N] [--json] [OPTIONS]",
	.about =
	        "N new sandboxes (default 1, at most 100) from a live sandbox's filesystem: a\n"
	        "clone of its disk where the runtime dir's file system can (XFS, btrfs), else a\n"
	        "snapshot (it stays in the store, named on stderr: 'hutch snapshot rm' it once\n"
	        "the forks are gone); the sandbox frozen meanwhile, then running on. N\n"
	        "sandboxes made from it at once, each with its own id and the options given here\n"
	        "(limits, network, TTL...; create's defaults otherwise). Prints their ids, one a\n"
	        "line; all or none are made. --full: processes and memory too (a plain sandbox of\n"
	        "network none, as root, with a CRIU that passes 'criu check'): one CRIU dump of\n"
	        "the source, which runs on, restored into each fork, then removed.\n",
	.opts = fork_opts,
	.sandbox_opts = true,
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_fork,
};
