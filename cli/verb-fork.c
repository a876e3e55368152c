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
 * The N creates run at once, each in a *creator* (fork-creators.c). By
 * disk (not the host root's, which may be copied), the creates start as
 * POST /fork is sent, before their disks exist: this process names the
 * disks ("names"), each fork's supervisor takes its own once its name
 * appears (after init's clone; runtime/disk.h hutch_disk_fork_await()),
 * so the creates run while the source is frozen and cloned; the first
 * fork's create is this process's own, made while POST /fork's answer is
 * awaited (fork_disks_first()).
 *
 * --full: fork-full.c (hutch_cli_fork_full()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "config.h"
#include "disk.h"
#include "fork-creators.h"
#include "sandbox.h"
#include "stream.h"
#include "util.h"
#include "verb-opts.h"
#include "verbs.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h): of
 * verb-opts.h's, PROGRESS_OPT's and NO_LIMITS_OPT's only. */
#define HELP_TEXTS(X)                                                                    \
	X(count, "how many forks (1 to 100, default 1)")                                 \
	X(json, "print {source, snapshot, method, made_ahead, frozen_ms, forks: [ids]} " \
	        "(--full: {source, method, dump_ms, restore_ms, bytes, forks})")         \
	X(full, "processes and memory too: one CRIU dump of the source (it runs on), N " \
	        "restores (a plain source of network none; docs/snapshots.md)")          \
	VERB_HELP_progress(X) VERB_HELP_no_limits(X)
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt fork_opts[] = {
	{ .name = "count",
	  .short_name = 'n',
	  .kind = HUTCH_CLI_U64,
	  A(size),
	  .metavar = "N",
	  /* E2B's fork(count <= 100) */
	  .range = HUTCH_CLI_RANGE_FORKS,
	  HELP(count) },
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(json) },
	{ .name = "full", .kind = HUTCH_CLI_FLAG, A(all), HELP(full) },
	PROGRESS_OPT,
	NO_LIMITS_OPT,
	{ .name = "" },
};

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

	if ((r = hutch_fork_source_config(p, &j)))
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

/* POST /fork's request sent (fork_disks()); *ret_fd its connection, or
 * an exit code. */
static int fork_disks_send(const struct hutch_paths *p, const struct hutch_config *cfg, size_t n,
                           bool copy, const struct hutch_fork_creator *cr, int *ret_fd)
{
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
	if ((r = hutch_client_request_begin(p->sock, "POST", "/fork", body, strlen(body), ret_fd,
	                                    &err)) < 0)
		return hutch_cli_lost(p->sock, r, err.msg);
	return 0;
}

/* Its answer, read from fd (fork_disks()). */
static int fork_disks_answer(const struct hutch_paths *p, size_t n, bool copy, bool named, int fd,
                             cJSON **ret, bool *fallback)
{
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };
	int r;

	if ((r = hutch_client_request_end(fd, p->sock, &resp, &err)) < 0)
		return hutch_cli_lost(p->sock, r, err.msg);
	if ((resp.status == 501 && !copy) || (resp.status == 400 && named)) {
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

/* POST /fork: 0 with the answer ({disks, image, method, frozen_ms}), or an
 * exit code. copy false: only where the source's disk can be cloned; where
 * it cannot (501), *fallback is set (the snapshot route, faster than
 * copying the files into a new disk: docs/snapshots.md). cr: the names
 * sent; a 400 then leaves *ret NULL (ask again without them). */
static int fork_disks(const struct hutch_paths *p, const struct hutch_config *cfg, size_t n,
                      bool copy, const struct hutch_fork_creator *cr, cJSON **ret, bool *fallback)
{
	int fd = -EBADF, r = fork_disks_send(p, cfg, n, copy, cr, &fd);

	return r ? r : fork_disks_answer(p, n, copy, cr != NULL, fd, ret, fallback);
}

/* The first fork's create, here, on its disk (named, there), while the
 * creators cr[0..n) run: their sockets are ours, not its supervisor's. */
static int create_first(struct hutch_cli_args *a, const char *disk,
                        const struct hutch_fork_creator *cr, size_t n, struct hutch_created *c0)
{
	_cleanup_free_ int *socks = calloc(n ? n : 1, sizeof(*socks));
	int r;

	for (size_t i = 0; socks && i < n; i++)
		socks[i] = cr[i].sock;
	hutch_sandbox_not_inherited(socks, n);
	snprintf(a->cfg->disk_from, sizeof(a->cfg->disk_from), "%s", disk);
	r = hutch_cli_create_sandbox(a->cfg, a->progress, c0);
	a->cfg->disk_from[0] = '\0';
	hutch_sandbox_not_inherited(NULL, 0);
	return r;
}

/*
 * The early route's POST /fork (fork_disks(), the names ours), the forks'
 * creates started as soon as it is sent, before their disks exist: each
 * supervisor takes its disk itself once it is made (setup's disk step,
 * after init's clone), watching this connection (readable once answered:
 * an answer without the names ends the wait) and its creator's end. The
 * creators cr[1..n) start now; the first fork's create is this process's
 * own, made meanwhile (no creator for it: a process start and the relay
 * of its result leave the fork's path; the creator started 10-67 ms after
 * its fork at load 8-14). *first: its exit code (0: c0 made), -1: not
 * tried.
 */
static int fork_disks_first(struct hutch_cli_args *a, const struct hutch_paths *p,
                            struct hutch_fork_creator *cr, size_t n, bool copy,
                            struct hutch_created *c0, int *first, cJSON **ret, bool *fallback)
{
	int fd = -EBADF, r = fork_disks_send(p, a->cfg, n, copy, cr, &fd);

	*first = -1;
	if (r)
		return r;
	a->cfg->disk_from_fd = fd; /* the creators' too */
	if ((r = hutch_fork_creators_start(a, cr + 1, n - 1, -EBADF))) {
		close(fd);
		return r;
	}
	*first = create_first(a, cr[0].disk, cr + 1, n - 1, c0);
	a->cfg->disk_from_fd = -EBADF;
	return fork_disks_answer(p, n, copy, true, fd, ret, fallback);
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

/* snap: the snapshot's answer (the snapshot route) or POST /fork's. */
static void print_forks(const struct hutch_cli_args *a, const char *src, const cJSON *snap,
                        const struct hutch_created *c, size_t n)
{
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(snap, "name"));
	const cJSON *frozen = cJSON_GetObjectItemCaseSensitive(snap, "frozen_ms");
	const cJSON *ahead = cJSON_GetObjectItemCaseSensitive(snap, "made_ahead");
	const char *method = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(snap, "method"));

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
		hutch_fork_print_ids(o, c, n);
		return;
	}
	hutch_fork_print_ids(NULL, c, n);
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

/* The disks' names, ours (POST /fork's "names"): the source's id and 64
 * random bits, never one in use. */
static int name_disks(const char *src, struct hutch_fork_creator *cr, size_t n)
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
static int make_forks(struct hutch_cli_args *a, struct hutch_fork_creator *cr, size_t n,
                      const cJSON *snap, bool by_disk, bool early, int first,
                      struct hutch_created *c, size_t *failed)
{
	const cJSON *disks = cJSON_GetObjectItemCaseSensitive(snap, "disks");
	int r;

	if (early) { /* the first made here (first), the others by creators */
		r = hutch_fork_creators_collect(cr + 1, n - 1, c + 1, failed);
		*failed += r ? 1 : 0;
		if (first && !r)
			for (size_t i = 1; i < n; i++)
				hutch_created_drop(&c[i]);
		if (first || r)
			hutch_created_drop(&c[0]);
		if (first)
			*failed = 0;
		return first ? first : r;
	}

	for (size_t i = 0; !early && by_disk && i < n; i++)
		snprintf(cr[i].disk, sizeof(cr[i].disk), "%s",
		         cJSON_GetStringValue(cJSON_GetArrayItem(disks, (int)i)));
	if (!early && (r = hutch_fork_creators_start(a, cr, n, -EBADF))) {
		hutch_fork_creators_give_up(cr, n);
		*failed = 0;
		return r;
	}
	return hutch_fork_creators_collect(cr, n, c, failed);
}

static int cmd_fork(struct hutch_cli_args *a)
{
	_cleanup_cjson_ cJSON *snap = NULL;
	_cleanup_free_ struct hutch_created *c = NULL;
	_cleanup_free_ struct hutch_fork_creator *cr = NULL;
	struct hutch_paths p;
	size_t failed = 0, n = (size_t)a->size;
	bool by_disk = false, host = false, fallback = false, early;
	char image[sizeof(a->cfg->image)];
	int r, first = -1;

	if ((r = check_args(a)))
		return r;
	if (!(c = calloc(n, sizeof(*c))) || !(cr = calloc(n, sizeof(*cr))))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	for (size_t i = 0; i < n; i++)
		cr[i].sock = -EBADF;
	if (a->all)
		return hutch_cli_fork_full(a, cr, c, n);
	if ((r = hutch_cli_open_live(a->pos[0], &p)) ||
	    (r = use_source_store(&p, &by_disk, &host, image, sizeof(image))))
		return r;
	by_disk = by_disk && geteuid() == 0 && !strcmp(a->cfg->workspace, "disk");
	/* A clone (not the host root's disk, which may be copied: its
	 * creates would wait through the copy) lets the creates start now:
	 * the first here, while POST /fork is answered (cr[0] no creator). */
	early = by_disk && !host;
	if (early && ((r = hutch_fork_root(a, image, true)) || (r = name_disks(p.id, cr, n))))
		return r;
	if (early)
		r = fork_disks_first(a, &p, cr, n, host, &c[0], &first, &snap, &fallback);
	else if (by_disk)
		r = fork_disks(&p, a->cfg, n, host, NULL, &snap, &fallback);
	if (r || (early && !snap && first == 0)) {
		if (early)
			hutch_fork_creators_give_up(cr, n);
		if (first == 0)
			hutch_created_drop(&c[0]);
		if (r)
			return r;
		first = -1;
	}
	if (early && !snap) { /* not cloned (the snapshot route), or no names */
		hutch_fork_creators_give_up(cr, n);
		memset(cr, 0, n * sizeof(*cr));
		for (size_t i = 0; i < n; i++)
			cr[i].sock = -EBADF;
		early = false;
		if (!fallback && (r = fork_disks(&p, a->cfg, n, host, NULL, &snap, &fallback)))
			return r;
	}
	by_disk = by_disk && !fallback;
	if ((!by_disk && (r = take_snapshot(&p, &snap))) ||
	    (!early && (r = hutch_fork_root(a,
	                                    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	                                            snap, by_disk ? "image" : "name")),
	                                    by_disk)))) {
		if (early)
			hutch_fork_creators_give_up(cr, n);
		if (by_disk && snap)
			drop_disks(snap, 0);
		return r;
	}
	if ((r = make_forks(a, cr, n, snap, by_disk, early, first, c, &failed))) {
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
	return hutch_fork_hand_over(a, p.id, snap, c, n, print_forks);
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
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.sandbox_opts = true,
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_fork,
};
