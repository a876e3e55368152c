/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Change lists' bookkeeping (changes-internal.h): the table of the areas'
 * directories by file handle, the index of what every path was at the
 * last comparison, the comparison of the names fanotify said were touched
 * with it (a new directory is walked, a deleted one takes what the index
 * held below it), and the merge of the differences into each running
 * command's list, bounded by HUTCH_CHANGES_MAX_ENTRIES.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "changes-format.h"
#include "changes-internal.h"
#include "cleanup.h"
#include "fdutil.h"
#include "syscalls.h"

int hutch_changes_cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

bool hutch_changes_grow(void **v, size_t *alloc, size_t n, size_t size)
{
	void *p;
	size_t na;

	if (n < *alloc)
		return true;
	na = *alloc ? *alloc * 2 : 64;
	if (!(p = realloc(*v, na * size)))
		return false;
	*v = p;
	*alloc = na;
	return true;
}

static uint32_t hash_handle(int area, int htype, const unsigned char *h, size_t n)
{
	uint32_t x = 2166136261u ^ (uint32_t)area ^ ((uint32_t)htype << 8);

	for (size_t i = 0; i < n; i++)
		x = (x ^ h[i]) * 16777619u;
	return x % NBUCKETS;
}

int32_t hutch_changes_dir_find(const struct hutch_changes *c, int area, int htype,
                               const unsigned char *h, size_t n)
{
	for (int32_t i = c->buckets[hash_handle(area, htype, h, n)]; i >= 0; i = c->dirs[i].next)
		if (c->dirs[i].area == area && c->dirs[i].htype == htype && c->dirs[i].hlen == n &&
		    memcmp(c->dirs[i].h, h, n) == 0)
			return i;
	return -1;
}

int32_t hutch_changes_dir_add(struct hutch_changes *c, int area, int32_t parent, const char *name,
                              int htype, const unsigned char *h, size_t n)
{
	uint32_t b = hash_handle(area, htype, h, n);
	char *copy = name ? strdup(name) : NULL;
	int32_t i;

	if (n > HANDLE_MAX || (name && !copy))
		return free(copy), -1;
	if (c->free_dir >= 0) {
		i = c->free_dir;
		c->free_dir = c->dirs[i].next;
	} else {
		if (!hutch_changes_grow((void **)&c->dirs, &c->adirs, c->ndirs, sizeof(*c->dirs)))
			return free(copy), -1;
		i = (int32_t)c->ndirs++;
	}
	c->dirs[i] = (struct dir){ .parent = parent,
		                   .next = c->buckets[b],
		                   .area = (uint8_t)area,
		                   .hlen = (uint8_t)n,
		                   .used = true,
		                   .htype = htype,
		                   .name = copy };
	memcpy(c->dirs[i].h, h, n);
	c->buckets[b] = i;
	return i;
}

/* Directories deleted since the last comparison go: nothing refers to
 * them any more (a directory is deleted empty). */
static void dirs_reclaim(struct hutch_changes *c)
{
	for (size_t i = 0; i < c->ndirs; i++) {
		struct dir *d = &c->dirs[i];
		int32_t *p;

		if (!d->used || !d->dead)
			continue;
		p = &c->buckets[hash_handle(d->area, d->htype, d->h, d->hlen)];
		while (*p != (int32_t)i)
			p = &c->dirs[*p].next;
		*p = d->next;
		free(d->name);
		*d = (struct dir){ .next = c->free_dir };
		c->free_dir = (int32_t)i;
	}
}

/* The path below its area of directory i, into buf ("" for the root). */
static bool dir_rel(const struct hutch_changes *c, int32_t i, char *buf, size_t cap)
{
	size_t len = 0;
	int depth = 0;

	buf[0] = '\0';
	for (; i >= 0 && c->dirs[i].parent >= 0; i = c->dirs[i].parent) {
		size_t n = strlen(c->dirs[i].name);
		if (len + n + 2 > cap || ++depth > 2048)
			return false;
		memmove(buf + n + 1, buf, len + 1);
		buf[0] = '/';
		memcpy(buf + 1, c->dirs[i].name, n);
		len += n + 1;
	}
	return true;
}

static struct ientry *idx_find(struct hutch_changes *c, const char *path)
{
	void *r = tfind(&path, &c->index, hutch_changes_cmp_path);

	return r ? *(struct ientry **)r : NULL;
}

static void idx_set(struct ientry *e, const struct stat *st)
{
	e->ino = st->st_ino;
	e->size = (uint64_t)st->st_size;
	e->mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	e->mode = st->st_mode;
	e->uid = st->st_uid;
	e->gid = st->st_gid;
}

struct ientry *hutch_changes_idx_put(struct hutch_changes *c, const char *path,
                                     const struct stat *st)
{
	struct ientry *e = calloc(1, sizeof(*e));
	void *r;

	if (!e || !(e->path = strdup(path)))
		return free(e), NULL;
	idx_set(e, st);
	if (!(r = tsearch(e, &c->index, hutch_changes_cmp_path)) || *(struct ientry **)r != e) {
		free(e->path);
		free(e);
		return NULL;
	}
	return e;
}

static void idx_del(struct hutch_changes *c, struct ientry *e)
{
	(void)tdelete(e, &c->index, hutch_changes_cmp_path);
	free(e->path);
	free(e);
}

static void emit(struct hutch_changes *c, const char *path, int kind, unsigned what, uint32_t mode,
                 uint64_t size)
{
	char *copy = strdup(path);

	if (!copy ||
	    !hutch_changes_grow((void **)&c->delta, &c->adelta, c->ndelta, sizeof(*c->delta))) {
		free(copy);
		for (size_t i = 0; i < c->nruns; i++)
			c->runs[i].omitted++;
		return;
	}
	c->delta[c->ndelta++] = (struct change){ .path = copy,
		                                 .kind = (uint8_t)kind,
		                                 .what = (uint8_t)what,
		                                 .mode = mode,
		                                 .size = size };
}

/* The index's entries below prefix/ (deleted with their directory). */
struct below {
	const char *prefix;
	size_t len;
	struct ientry **v;
	size_t n, alloc;
};

static void walk_below(const void *node, VISIT which, void *ud)
{
	struct below *b = ud;
	struct ientry *e = *(struct ientry *const *)node;

	if ((which == postorder || which == leaf) && strncmp(e->path, b->prefix, b->len) == 0 &&
	    e->path[b->len] == '/' &&
	    hutch_changes_grow((void **)&b->v, &b->alloc, b->n, sizeof(*b->v)))
		b->v[b->n++] = e;
}

static void delete_below(struct hutch_changes *c, const char *path)
{
	struct below b = { .prefix = path, .len = strlen(path) };

	twalk_r(c->index, walk_below, &b);
	for (size_t i = 0; i < b.n; i++) {
		emit(c, b.v[i]->path, HUTCH_CHANGE_DELETED, 0, b.v[i]->mode, b.v[i]->size);
		hutch_changes_hist_note(c, b.v[i]->path, b.v[i], NULL);
		idx_del(c, b.v[i]);
	}
	free(b.v);
}

static void compare(struct hutch_changes *c, int area, const char *path, bool written,
                    const struct stat *now);

DIR *hutch_changes_fdopendir(int fd)
{
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d && fd >= 0)
		close(fd);
	return d;
}

bool hutch_changes_next(DIR *d, const char *path, char *sub, size_t cap, struct stat *st,
                        const char **name)
{
	struct dirent *de;

	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    fstatat(dirfd(d), de->d_name, st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (size_t)snprintf(sub, cap, "%s/%s", path, de->d_name) < cap) {
			*name = de->d_name;
			return true;
		}
	return false;
}

/* A directory that is new at path: every entry below it is compared too. */
static void scan_new(struct hutch_changes *c, int area, const char *path)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST | RESOLVE_NO_XDEV };
	const char *rel = path + strlen(c->areas[area].prefix), *name;
	_cleanup_closedir_ DIR *d = hutch_changes_fdopendir(
	        sys_openat2(c->areas[area].fd, *rel ? rel + 1 : ".", &how, sizeof(how)));
	char sub[PATH_MAX];
	struct stat st;

	while (d && hutch_changes_next(d, path, sub, sizeof(sub), &st, &name))
		compare(c, area, sub, false, &st);
}

static unsigned differs(const struct ientry *e, const struct stat *st, bool written)
{
	unsigned what = 0;

	if ((e->mode & S_IFMT) != (st->st_mode & S_IFMT))
		return HUTCH_CHANGED_TYPE | HUTCH_CHANGED_CONTENT;
	if ((e->mode & 07777) != (st->st_mode & 07777))
		what |= HUTCH_CHANGED_MODE;
	if (e->uid != st->st_uid || e->gid != st->st_gid)
		what |= HUTCH_CHANGED_OWNER;
	/* A directory's content is its entries, listed on their own. */
	if (!S_ISDIR(st->st_mode) &&
	    (written || e->ino != st->st_ino || e->size != (uint64_t)st->st_size ||
	     e->mtime != (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec))
		what |= HUTCH_CHANGED_CONTENT;
	return what;
}

/* Stat area's rel ("" its root) without following a symlink on the way. */
static bool stat_rel(const struct hutch_changes *c, int area, const char *rel, struct stat *st)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST | RESOLVE_NO_XDEV };
	_cleanup_close_ int pfd = -EBADF;
	char parent[PATH_MAX];
	const char *slash = strrchr(rel, '/');

	if (!slash)
		return fstat(c->areas[area].fd, st) == 0;
	if ((size_t)(slash - rel) >= sizeof(parent))
		return false;
	memcpy(parent, rel, (size_t)(slash - rel));
	parent[slash - rel] = '\0';
	pfd = sys_openat2(c->areas[area].fd, *parent ? parent + 1 : ".", &how, sizeof(how));
	return pfd >= 0 && fstatat(pfd, slash + 1, st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The index's other names of an inode (hard links) in one area. */
struct links {
	const char *prefix, *path;
	size_t len;
	uint64_t ino;
	char **v;
	size_t n, alloc;
};

static void walk_links(const void *node, VISIT which, void *ud)
{
	const struct ientry *e = *(struct ientry *const *)node;
	struct links *l = ud;
	char *copy;

	if ((which == postorder || which == leaf) && e->ino == l->ino && !S_ISDIR(e->mode) &&
	    strcmp(e->path, l->path) != 0 && strncmp(e->path, l->prefix, l->len) == 0 &&
	    (e->path[l->len] == '/' || !e->path[l->len]) &&
	    hutch_changes_grow((void **)&l->v, &l->alloc, l->n, sizeof(*l->v)) &&
	    (copy = strdup(e->path)))
		l->v[l->n++] = copy;
}

/* A file with more names changed: so did its other names. */
static void other_links(struct hutch_changes *c, int area, const char *path, uint64_t ino)
{
	struct links l = { .prefix = c->areas[area].prefix, .path = path, .ino = ino };
	struct stat st;

	l.len = strlen(l.prefix);
	twalk_r(c->index, walk_links, &l);
	c->in_links = true;
	for (size_t i = 0; i < l.n; i++) {
		compare(c, area, l.v[i], false,
		        stat_rel(c, area, l.v[i] + l.len, &st) ? &st : NULL);
		free(l.v[i]);
	}
	c->in_links = false;
	free(l.v);
}

/* path now (now NULL: it is not there) against the index. */
static void compare(struct hutch_changes *c, int area, const char *path, bool written,
                    const struct stat *now)
{
	struct ientry *e = idx_find(c, path);
	bool was_dir = e && S_ISDIR(e->mode), replaced;
	unsigned what;

	if (!e && !now)
		return;
	if (!now) {
		emit(c, path, HUTCH_CHANGE_DELETED, 0, e->mode, e->size);
		hutch_changes_hist_note(c, path, e, NULL);
		if (was_dir)
			delete_below(c, path);
		idx_del(c, e);
		return;
	}
	if (!e) {
		emit(c, path, HUTCH_CHANGE_CREATED, 0, now->st_mode, (uint64_t)now->st_size);
		hutch_changes_hist_note(c, path, NULL, now);
		(void)hutch_changes_idx_put(c, path, now);
		if (S_ISDIR(now->st_mode))
			scan_new(c, area, path);
		return;
	}
	replaced = was_dir && (!S_ISDIR(now->st_mode) || e->ino != now->st_ino);
	if ((what = differs(e, now, written))) {
		emit(c, path, HUTCH_CHANGE_MODIFIED, what, now->st_mode, (uint64_t)now->st_size);
		hutch_changes_hist_note(c, path, e, now);
	}
	idx_set(e, now);
	if (what && !S_ISDIR(now->st_mode) && now->st_nlink > 1 && !c->in_links)
		other_links(c, area, path, (uint64_t)now->st_ino);
	if (replaced)
		delete_below(c, path);
	if (S_ISDIR(now->st_mode) && replaced)
		scan_new(c, area, path);
}

/* A touched name, once per comparison: key path, area and written. */
struct touched {
	char *path;
	int area;
	bool written;
};

static void free_touched(void *p)
{
	struct touched *t = p;

	free(t->path);
	free(t);
}

static void touch(struct hutch_changes *c, void **set, const struct dirty *d)
{
	char rel[PATH_MAX], path[PATH_MAX];
	int area = c->dirs[d->dir].area;
	struct touched *t;
	void *r;

	if (!dir_rel(c, d->dir, rel, sizeof(rel)) ||
	    (size_t)snprintf(path, sizeof(path), "%s%s%s%s", c->areas[area].prefix, rel,
	                     d->name ? "/" : "", d->name ? d->name : "") >= sizeof(path))
		return;
	if (!(t = calloc(1, sizeof(*t))) || !(t->path = strdup(path))) {
		free(t);
		return;
	}
	t->area = area;
	t->written = d->written;
	if ((r = tsearch(t, set, hutch_changes_cmp_path)) && *(struct touched **)r != t) {
		(*(struct touched **)r)->written |= d->written;
		free_touched(t);
	} else if (!r) {
		free_touched(t);
	}
}

static void visit_touched(const void *node, VISIT which, void *ud)
{
	struct hutch_changes *c = ud;
	const struct touched *t = *(struct touched *const *)node;
	struct stat st;

	if (which != postorder && which != leaf)
		return;
	compare(c, t->area, t->path, t->written,
	        stat_rel(c, t->area, t->path + strlen(c->areas[t->area].prefix), &st) ? &st : NULL);
}

/* Two changes of one path in a row as one: created then deleted is
 * nothing (false: drop it), deleted then created a modification, ... */
static bool merge(struct change *old, const struct change *ch)
{
	if (old->kind == HUTCH_CHANGE_CREATED && ch->kind == HUTCH_CHANGE_DELETED)
		return false;
	if (old->kind == HUTCH_CHANGE_DELETED && ch->kind == HUTCH_CHANGE_CREATED) {
		old->kind = HUTCH_CHANGE_MODIFIED;
		old->what = HUTCH_CHANGED_CONTENT;
		if ((old->mode ^ ch->mode) & S_IFMT)
			old->what |= HUTCH_CHANGED_TYPE;
		if ((old->mode ^ ch->mode) & 07777)
			old->what |= HUTCH_CHANGED_MODE;
	} else if (old->kind == HUTCH_CHANGE_MODIFIED && ch->kind == HUTCH_CHANGE_MODIFIED) {
		old->what |= ch->what;
	} else if (old->kind != HUTCH_CHANGE_CREATED) {
		old->kind = ch->kind; /* modified then deleted */
		old->what = ch->what;
	}
	old->mode = ch->mode;
	old->size = ch->size;
	return true;
}

/* ch into tree (n entries): merged with its path's entry, else added when
 * there are fewer than cap. false: full (or out of memory). */
static bool give_to(void **tree, size_t *n, size_t cap, const struct change *ch)
{
	struct change key = { .path = ch->path }, *old, *e;
	void *p = tfind(&key, tree, hutch_changes_cmp_path);

	if (p) {
		old = *(struct change **)p;
		if (!merge(old, ch)) {
			(void)tdelete(old, tree, hutch_changes_cmp_path);
			hutch_changes_free_change(old);
			(*n)--;
		}
		return true;
	}
	if (*n >= cap || !(e = malloc(sizeof(*e))))
		return false;
	*e = *ch;
	if (!(e->path = strdup(ch->path)) || !tsearch(e, tree, hutch_changes_cmp_path)) {
		free(e->path);
		free(e);
		return false;
	}
	(*n)++;
	return true;
}

/* One change into a command's list; past the cap into the paths it only
 * counts, merged the same way, so that "omitted" counts paths. */
static void give(struct run *r, const struct change *ch)
{
	struct change key = { .path = ch->path };

	if (tfind(&key, &r->over, hutch_changes_cmp_path) ||
	    !give_to(&r->tree, &r->n, HUTCH_CHANGES_MAX_ENTRIES, ch))
		if (!give_to(&r->over, &r->nover, SIZE_MAX, ch))
			r->omitted++;
}

/* Compare every name touched since the last time; the differences go to
 * the commands running now. */
void hutch_changes_flush(struct hutch_changes *c)
{
	void *set = NULL;

	for (size_t i = 0; i < c->npend; i++) {
		touch(c, &set, &c->pend[i]);
		free(c->pend[i].name);
	}
	c->npend = 0;
	twalk_r(set, visit_touched, c);
	tdestroy(set, free_touched);
	dirs_reclaim(c);
	for (size_t i = 0; i < c->nruns; i++) {
		if (c->nruns > 1 && c->ndelta)
			c->runs[i].flags |= HUTCH_CHANGES_SHARED;
		for (size_t j = 0; j < c->ndelta; j++)
			give(&c->runs[i], &c->delta[j]);
	}
	for (size_t j = 0; j < c->ndelta; j++)
		free(c->delta[j].path);
	c->ndelta = 0;
}

void hutch_changes_free_change(void *p)
{
	struct change *ch = p;

	free(ch->path);
	free(ch);
}
