/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch fork --full (docs/snapshots.md "Full fork"): POST /fork {"full":
 * true} dumps the source into a full snapshot of its store (the source
 * runs on), N creators (fork-creators.c) restore it (create --snapshot's
 * path), and it is removed before the hand-over, whatever happened.
 *
 * The dump, never left behind: so that a fork killed part way (kill -9 of
 * the CLI, or of the source's supervisor) leaves nothing once `hutch gc`
 * ran, the fork records the dump before asking for it.
 * So that a fork killed part way (kill -9 of the CLI, or of the source's
 * supervisor) leaves nothing once `hutch gc` ran, the fork records the
 * dump before asking for it: $RT/.fork-full/NAME, {source, name, store},
 * made as .NAME.tmp, locked (flock) and renamed, held locked for the
 * fork's life. gc takes every record nobody holds: the snapshot removed
 * where it is, the record with it; a record whose snapshot is not (yet)
 * there is kept while its source lives (its supervisor may still be
 * dumping: it publishes the snapshot at the end), dropped once it is gone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "config.h"
#include "criu.h"
#include "fdutil.h"
#include "fork-creators.h"
#include "image.h"
#include "sandbox.h"
#include "state.h"
#include "stream.h"
#include "util.h"
#include "verbs.h"

#define DIR_NAME ".fork-full"
#define TEXT_MAX 8192

static int open_dir(const char *rt, bool make)
{
	char path[4096];

	if ((size_t)snprintf(path, sizeof(path), "%s/" DIR_NAME, rt) >= sizeof(path))
		return -ENAMETOOLONG;
	if (make && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int hutch_cli_fork_full_mark(const char *rt, const char *source, const char *name,
                             const char *store, int *ret_fd)
{
	_cleanup_close_ int dir = open_dir(rt, true), fd = -EBADF;
	_cleanup_cjson_ cJSON *o = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;
	char tmp[HUTCH_IMAGE_NAME_MAX + 8];

	if (dir < 0)
		return dir;
	if (!o || !cJSON_AddStringToObject(o, "source", source) ||
	    !cJSON_AddStringToObject(o, "name", name) ||
	    !cJSON_AddStringToObject(o, "store", store) || !(text = cJSON_PrintUnformatted(o)))
		return -ENOMEM;
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	fd = openat(dir, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0 || hutch_write_all(fd, text, strlen(text)) < 0 ||
	    renameat(dir, tmp, dir, name) < 0) {
		int r = -errno;

		(void)unlinkat(dir, tmp, 0);
		return r;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

void hutch_cli_fork_full_unmark(const char *rt, const char *name, int *fd)
{
	_cleanup_close_ int dir = open_dir(rt, false);

	if (dir >= 0)
		(void)unlinkat(dir, name, 0);
	closep(fd);
}

int hutch_cli_fork_full_remove(const char *store, const char *name, struct hutch_err *err)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	int r;

	/* A store not there has no snapshot (opening it would make it). */
	if (access(store, F_OK) < 0 && errno == ENOENT)
		return 0;
	if ((r = hutch_image_store_open(store, &s, err)) < 0)
		return r;
	if ((r = hutch_image_full_exists(s, name)) <= 0)
		return r < 0 ? hutch_err_set_errno(err, r, "look for full snapshot '%s'", name) : 0;
	if ((r = hutch_image_store_lock(s, err)) < 0 ||
	    (r = hutch_image_full_remove(s, name, err)) < 0)
		return r;
	return 1;
}

/* One record nobody holds: 1 when it is gone (its snapshot with it). */
static int gc_one(const char *rt, int dir, const char *file)
{
	_cleanup_close_ int fd = openat(dir, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_cjson_ cJSON *o = NULL;
	char text[TEXT_MAX + 1];
	struct hutch_err err = { 0 };
	struct hutch_paths p;
	const char *src, *name, *store;
	ssize_t n;
	int r;

	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
		return 0; /* gone meanwhile, or its fork goes on */
	n = read(fd, text, TEXT_MAX);
	text[n > 0 ? n : 0] = '\0';
	o = cJSON_Parse(text);
	src = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "source"));
	name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "name"));
	store = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "store"));
	if (file[0] != '.' && src && name && store && hutch_image_name_is_valid(name)) {
		if ((r = hutch_cli_fork_full_remove(store, name, &err)) < 0) {
			fprintf(stderr, "hutch: gc: a full fork's dump '%s' in '%s': %s\n", name,
			        store, err.msg);
			return 0;
		}
		/* Not there: its source may still be dumping into it. */
		if (r == 0 && hutch_paths_init(rt, src, &p) == 0 && hutch_state_is_live(&p) > 0)
			return 0;
	}
	return unlinkat(dir, file, 0) == 0;
}

int hutch_cli_fork_full_gc(const char *rt)
{
	_cleanup_close_ int dir = open_dir(rt, false);
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *e;
	int removed = 0, fd;

	if (dir < 0 || (fd = fcntl(dir, F_DUPFD_CLOEXEC, 3)) < 0)
		return 0;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return 0;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			removed += gc_one(rt, dir, e->d_name);
	return removed;
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
	hutch_fork_print_ids(o, c, n);
	if (a->json)
		return;
	fprintf(stderr,
	        "hutch: %zu fork%s of %s with its processes and memory (dump %.0f ms, %.0f "
	        "bytes; restore%s %.0f ms)\n",
	        n, n == 1 ? "" : "s", src, ms, bytes, n == 1 ? "" : "s", rms);
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

	if ((r = hutch_fork_source_config(p, &j)))
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
int hutch_cli_fork_full(struct hutch_cli_args *a, struct hutch_fork_creator *cr,
                        struct hutch_created *c, size_t n)
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
	    (r = hutch_fork_root(a, name, false))) {
		full_cleanup(store, name, &mark);
		return hutch_cli_fail(r, "cannot fork sandbox %s: nothing was made", p.id);
	}
	t0 = hutch_now_mono_sec();
	if (!(r = hutch_fork_creators_start(a, cr, n, mark)))
		r = hutch_fork_creators_collect(cr, n, c, &failed);
	else
		hutch_fork_creators_give_up(cr, n);
	cJSON_AddNumberToObject(dump, "restore_ms", (hutch_now_mono_sec() - t0) * 1e3);
	full_cleanup(store, name, &mark);
	if (r) {
		fprintf(stderr, "hutch: fork %zu of %zu failed; %s deleted\n", failed + 1, n,
		        n > 1 ? "the forks made were" : "nothing made to be");
		return r;
	}
	return hutch_fork_hand_over(a, p.id, dump, c, n, print_full);
}
