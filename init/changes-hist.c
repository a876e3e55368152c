/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The change history behind hutch diff (changes.h, docs/api.md
 * "`hutch diff` (`POST /diff`)"): for every path the comparison found changed since init
 * started, what it was first (its base) and what it became at each
 * generation it changed in. A generation is 2 * id at the start of
 * command id and 2 * id + 1 after its end (ids grow), so "the state at
 * command id's start" is the last version of a generation below 2 * id.
 * A diff since generation g compares each path's state then with its
 * state now: the same created/modified/deleted as a command's list, in
 * the same wire form (changes-format.h). Bounded: past HIST_MAX versions
 * the history stops growing and every diff says incomplete.
 *
 * The diff itself runs in a builtin command, a fork() of init: its copy
 * of this history is the one at its start, and init never walks it.
 */
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "changes-format.h"
#include "changes-internal.h"
#include "changes.h"
#include "fdutil.h"

#define HIST_MAX 200000 /* versions kept, all paths together (~40 bytes each) */

struct hstate {
	uint64_t ino, size;
	int64_t mtime;
	uint32_t mode, uid, gid;
	bool exists;
};

struct hver {
	uint64_t gen;
	struct hstate st;
};

struct hpath {
	char *path; /* the key */
	struct hstate base;
	struct hver *v;
	size_t n, cap;
};

static int cmp_hpath(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static struct hstate of_entry(const struct ientry *e)
{
	if (!e)
		return (struct hstate){ 0 };
	return (struct hstate){ .ino = e->ino,
		                .size = e->size,
		                .mtime = e->mtime,
		                .mode = e->mode,
		                .uid = e->uid,
		                .gid = e->gid,
		                .exists = true };
}

static struct hstate of_stat(const struct stat *st)
{
	if (!st)
		return (struct hstate){ 0 };
	return (struct hstate){ .ino = st->st_ino,
		                .size = (uint64_t)st->st_size,
		                .mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 +
		                         st->st_mtim.tv_nsec,
		                .mode = st->st_mode,
		                .uid = st->st_uid,
		                .gid = st->st_gid,
		                .exists = true };
}

static struct hpath *hpath_get(struct hutch_changes *c, const char *path, const struct ientry *old)
{
	struct hpath key = { .path = (char *)path }, *h;
	void *r = tfind(&key, &c->hist, cmp_hpath);

	if (r)
		return *(struct hpath **)r;
	if (!(h = calloc(1, sizeof(*h))) || !(h->path = strdup(path)))
		return free(h), NULL;
	h->base = of_entry(old);
	if (!(r = tsearch(h, &c->hist, cmp_hpath))) {
		free(h->path);
		free(h);
		return NULL;
	}
	return h;
}

void hutch_changes_hist_note(struct hutch_changes *c, const char *path, const struct ientry *old,
                             const struct stat *now)
{
	struct hpath *h;

	if (c->hist_full)
		return;
	if (c->nhist >= HIST_MAX || !(h = hpath_get(c, path, old))) {
		c->hist_full = true;
		return;
	}
	if (h->n && h->v[h->n - 1].gen == c->gen) { /* again in one generation */
		h->v[h->n - 1].st = of_stat(now);
		return;
	}
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 4;
		struct hver *v = realloc(h->v, cap * sizeof(*v));

		if (!v) {
			c->hist_full = true;
			return;
		}
		h->v = v;
		h->cap = cap;
	}
	h->v[h->n++] = (struct hver){ .gen = c->gen, .st = of_stat(now) };
	c->nhist++;
}

void hutch_changes_gen_at_least(struct hutch_changes *c, uint64_t gen)
{
	if (c && c->gen < gen)
		c->gen = gen;
}

/* The state at generation since (before any version of it or later). */
static const struct hstate *state_then(const struct hpath *h, uint64_t since)
{
	const struct hstate *st = &h->base;

	for (size_t i = 0; i < h->n && h->v[i].gen < since; i++)
		st = &h->v[i].st;
	return st;
}

static unsigned what_changed(const struct hstate *a, const struct hstate *b)
{
	unsigned what = 0;

	if ((a->mode & S_IFMT) != (b->mode & S_IFMT))
		return HUTCH_CHANGED_TYPE | HUTCH_CHANGED_CONTENT;
	if ((a->mode & 07777) != (b->mode & 07777))
		what |= HUTCH_CHANGED_MODE;
	if (a->uid != b->uid || a->gid != b->gid)
		what |= HUTCH_CHANGED_OWNER;
	if (!S_ISDIR(b->mode) && (a->ino != b->ino || a->size != b->size || a->mtime != b->mtime))
		what |= HUTCH_CHANGED_CONTENT;
	return what;
}

struct diff_out {
	uint64_t since;
	char *buf;
	size_t len;
	struct hutch_changes_hdr h;
};

static void add_rec(struct diff_out *o, const char *path, int kind, unsigned what,
                    const struct hstate *st)
{
	struct hutch_change_rec r = {
		.kind = (uint8_t)kind, .what = (uint8_t)what, .mode = st->mode, .size = st->size
	};
	size_t n = strlen(path);

	if (n > UINT16_MAX || o->h.n >= HUTCH_CHANGES_MAX_ENTRIES ||
	    o->len - sizeof(o->h) + sizeof(r) + n > HUTCH_CHANGES_MAX_BYTES) {
		o->h.omitted++;
		return;
	}
	r.path_len = (uint16_t)n;
	memcpy(o->buf + o->len, &r, sizeof(r));
	memcpy(o->buf + o->len + sizeof(r), path, n);
	o->len += sizeof(r) + n;
	o->h.n++;
}

static void walk_diff(const void *node, VISIT which, void *ud)
{
	const struct hpath *h = *(const struct hpath *const *)node;
	struct diff_out *o = ud;
	const struct hstate *then = state_then(h, o->since);
	const struct hstate *now = h->n ? &h->v[h->n - 1].st : &h->base;
	unsigned what;

	if (which != postorder && which != leaf)
		return;
	if (!then->exists && now->exists)
		add_rec(o, h->path, HUTCH_CHANGE_CREATED, 0, now);
	else if (then->exists && !now->exists)
		add_rec(o, h->path, HUTCH_CHANGE_DELETED, 0, then);
	else if (then->exists && (what = what_changed(then, now)))
		add_rec(o, h->path, HUTCH_CHANGE_MODIFIED, what, now);
}

int hutch_changes_diff_main(const struct hutch_changes *c, int argc, const char *const *argv)
{
	struct diff_out o = { .len = sizeof(struct hutch_changes_hdr) };
	char *end = NULL;

	if (argc != 2 || !*argv[1])
		return 2;
	o.since = strtoull(argv[1], &end, 10);
	if (*end)
		return 2;
	if (!c)
		return 3; /* no change lists in this sandbox */
	if (!(o.buf = malloc(o.len + HUTCH_CHANGES_MAX_BYTES)))
		return 1;
	if (c->lost || c->hist_full)
		o.h.flags |= HUTCH_CHANGES_INCOMPLETE;
	twalk_r(c->hist, walk_diff, &o);
	memcpy(o.buf, &o.h, sizeof(o.h));
	return hutch_write_all(STDOUT_FILENO, o.buf, o.len) < 0 ? 1 : 0;
}
