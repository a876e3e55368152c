/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Change lists, init's side (changes.h). Why this way (measured, see
 * docs/architecture.md): a scan of a 10,000-file workspace costs tens of
 * milliseconds, fanotify nothing measurable; but fanotify alone cannot
 * say whether a name existed before (a rename over a file gives only
 * MOVED_TO), nor what a deleted tree held, so init keeps the trees' index
 * and fanotify only says where to look. Events carry the directory's file
 * handle and the name (FAN_REPORT_DFID_NAME) and, for directories created,
 * moved or deleted, the directory's own handle (FAN_REPORT_TARGET_FID), so
 * init follows the directory tree by handle without ever opening one
 * (open_by_handle_at stays off the seccomp list). The writer's pid is not
 * usable: the kernel reports 0 to a listener without CAP_SYS_ADMIN in the
 * initial user namespace; commands are told apart by time instead (every
 * difference found while several commands run goes to each of them, with
 * HUTCH_CHANGES_SHARED).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>
#include <linux/openat2.h>

#include "changes-format.h"
#include "changes-internal.h"
#include "changes.h"
#include "cleanup.h"
#include "fdutil.h"
#include "syscalls.h"
#include "util.h"

#ifndef FAN_EVENT_INFO_TYPE_DFID_NAME
#define FAN_EVENT_INFO_TYPE_FID       1
#define FAN_EVENT_INFO_TYPE_DFID_NAME 2
#endif

#define PEND_FLUSH    4096 /* touched names kept before they are compared */
#define READ_EVERY_MS 20   /* hutch_changes_poll_fd() */
#define EVENTS        HUTCH_CHANGES_FAN_EVENTS

static const char *const area_paths[NAREAS] = { "/workspace", "/home/appuser", "/tmp" };

/* The area and directory of an event's directory handle: -1 (*shared
 * false) when its file system is none of ours. The sandbox's disk holds
 * the three areas and an image's writable layer (runtime/disk.h): a
 * directory of it found in no area is outside them (*shared true). */
static int32_t dir_of(const struct hutch_changes *c, const fsid_t *fsid,
                      const struct file_handle *dh, int *area, bool *shared)
{
	size_t on = 0;

	*shared = false;
	for (size_t i = 0; i < c->nareas; i++) {
		int32_t dir;

		if (memcmp(&c->areas[i].fsid, fsid, sizeof(*fsid)))
			continue;
		on++;
		dir = hutch_changes_dir_find(c, (int)i, dh->handle_type, dh->f_handle,
		                             dh->handle_bytes);
		if (dir >= 0) {
			*area = (int)i;
			return dir;
		}
	}
	*area = on ? 0 : -1;
	*shared = on > 1 || (on == 1 && c->disk);
	return -1;
}

static void pend(struct hutch_changes *c, int32_t dir, const char *name, bool written)
{
	char *copy = name ? strdup(name) : NULL;

	if ((name && !copy) ||
	    !hutch_changes_grow((void **)&c->pend, &c->apend, c->npend, sizeof(*c->pend))) {
		free(copy);
		return;
	}
	c->pend[c->npend++] = (struct dirty){ .dir = dir, .name = copy, .written = written };
}

static void set_lost(struct hutch_changes *c)
{
	c->lost = true;
	for (size_t i = 0; i < c->nruns; i++)
		c->runs[i].flags |= HUTCH_CHANGES_INCOMPLETE;
}

/* A directory created, moved or deleted: its handle (FAN_REPORT_TARGET_FID)
 * follows it in the table. */
static void follow_dir(struct hutch_changes *c, int area, uint64_t mask, int32_t parent,
                       const char *name, const struct file_handle *fh)
{
	int32_t t =
	        hutch_changes_dir_find(c, area, fh->handle_type, fh->f_handle, fh->handle_bytes);
	char *copy;

	if (mask & (FAN_CREATE | FAN_MOVED_TO)) {
		if (t < 0) {
			if (hutch_changes_dir_add(c, area, parent, name, fh->handle_type,
			                          fh->f_handle, fh->handle_bytes) < 0)
				set_lost(c);
		} else if ((copy = strdup(name))) {
			free(c->dirs[t].name);
			c->dirs[t].name = copy;
			c->dirs[t].parent = parent;
			c->dirs[t].dead = false;
		}
	}
	if ((mask & FAN_DELETE) && t >= 0)
		c->dirs[t].dead = true;
}

static void one_event(struct hutch_changes *c, const struct fanotify_event_metadata *m)
{
	const struct fanotify_event_info_fid *dfid = NULL, *fid = NULL;
	const char *p = (const char *)m + m->metadata_len, *end = (const char *)m + m->event_len;
	const struct file_handle *dh;
	const char *name;
	bool shared;
	int area;
	int32_t dir;

	if (m->mask & FAN_Q_OVERFLOW) {
		set_lost(c);
		return;
	}
	while (end - p >= (ptrdiff_t)sizeof(struct fanotify_event_info_header)) {
		const struct fanotify_event_info_header *h = (const void *)p;
		if (h->len < sizeof(*h) || h->len > end - p)
			break;
		if (h->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME)
			dfid = (const void *)p;
		else if (h->info_type == FAN_EVENT_INFO_TYPE_FID)
			fid = (const void *)p;
		p += h->len;
	}
	if (!dfid)
		return; /* DELETE_SELF and the like: the parent's event says it */
	dh = (const struct file_handle *)dfid->handle;
	name = (const char *)dh->f_handle + dh->handle_bytes;
	if ((dir = dir_of(c, (const fsid_t *)&dfid->fsid, dh, &area, &shared)) < 0) {
		if (area >= 0 && !shared)
			set_lost(c); /* a directory never seen: the table is wrong */
		return;
	}
	if (strcmp(name, ".") == 0) {
		pend(c, dir, NULL, false);
		return;
	}
	if ((m->mask & FAN_ONDIR) && fid)
		follow_dir(c, area, m->mask, dir, name, (const struct file_handle *)fid->handle);
	pend(c, dir, name, m->mask & FAN_MODIFY);
}

void hutch_changes_read(struct hutch_changes *c)
{
	static char buf[64 * 1024] __attribute__((aligned(8)));
	ssize_t n;

	if (c)
		c->rest_until = hutch_now_mono_ms() + READ_EVERY_MS;
	while (c && !c->lost && (n = read(c->fd, buf, sizeof(buf))) > 0) {
		const struct fanotify_event_metadata *m = (const void *)buf;
		size_t left = (size_t)n;

		for (; FAN_EVENT_OK(m, left) && !c->lost; m = FAN_EVENT_NEXT(m, left))
			one_event(c, m);
		if (c->npend >= PEND_FLUSH)
			hutch_changes_flush(c);
	}
}

/* A directory entry that is a directory (d_type; a file system that
 * gives none: stat'ed). */
static bool is_dir_entry(int dfd, const struct dirent *de)
{
	struct stat st;

	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_DIR;
	return fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* dfd's next entry but . and .. (*sub: path/name, fitting), or NULL. */
static struct dirent *next_entry(DIR *d, const char *path, char *sub, size_t cap)
{
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    (size_t)snprintf(sub, cap, "%s/%s", path, de->d_name) < cap)
			return de;
	return NULL;
}

static DIR *open_dir(int dfd)
{
	return hutch_changes_fdopendir(openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

/* Before seccomp: the directories of one area, each indexed with its
 * handle (name_to_handle_at is denied after seccomp). Every other entry
 * is indexed by index_files(), after READY. Returns how many entries
 * dfd has (those next_entry() gives: index_files() sees the same), -1 if
 * it could not be read. */
static int scan_first(struct hutch_changes *c, int area, int dfd, int32_t dir, const char *path)
{
	_cleanup_closedir_ DIR *d = open_dir(dfd);
	char sub[PATH_MAX];
	struct dirent *de;
	struct stat st;
	int n = 0;

	if (!d)
		return -1;
	while ((de = next_entry(d, path, sub, sizeof(sub)))) {
		struct {
			struct file_handle fh;
			unsigned char b[HANDLE_MAX];
		} h = { .fh.handle_bytes = HANDLE_MAX };
		_cleanup_close_ int sfd = -EBADF;
		int mnt, i;

		n++;
		if (!is_dir_entry(dirfd(d), de) ||
		    (sfd = openat(dirfd(d), de->d_name,
		                  O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
		    fstat(sfd, &st) < 0)
			continue;
		(void)hutch_changes_idx_put(c, sub, &st);
		if (name_to_handle_at(sfd, "", &h.fh, &mnt, AT_EMPTY_PATH) < 0 ||
		    (i = hutch_changes_dir_add(c, area, dir, de->d_name, h.fh.handle_type,
		                               h.fh.f_handle, h.fh.handle_bytes)) < 0)
			continue;
		(void)scan_first(c, area, sfd, i, sub);
	}
	return n;
}

/* After READY, before the first request: every entry but the
 * directories (scan_first()'s) indexed, the same tree walked again. */
static void index_files(struct hutch_changes *c, int dfd, const char *path)
{
	_cleanup_closedir_ DIR *d = open_dir(dfd);
	char sub[PATH_MAX];
	struct dirent *de;
	struct stat st;

	while ((de = next_entry(d, path, sub, sizeof(sub)))) {
		_cleanup_close_ int sfd = -EBADF;

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!S_ISDIR(st.st_mode))
			(void)hutch_changes_idx_put(c, sub, &st);
		else if ((sfd = openat(dirfd(d), de->d_name,
		                       O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
			index_files(c, sfd, sub);
	}
}

void hutch_changes_index(struct hutch_changes *c)
{
	for (size_t i = 0; c && c->unindexed && i < c->nareas; i++)
		if (!c->areas[i].empty) /* nothing written there since: nothing runs yet */
			index_files(c, c->areas[i].fd, c->areas[i].prefix);
	if (c)
		c->unindexed = false;
}

static bool add_area(struct hutch_changes *c, const char *prefix, const fsid_t *root_fsid)
{
	struct area *a = &c->areas[c->nareas];
	struct {
		struct file_handle fh;
		unsigned char b[HANDLE_MAX];
	} h = { .fh.handle_bytes = HANDLE_MAX };
	struct statfs sf;
	struct stat st;
	int mnt, i;

	a->prefix = prefix;
	a->fd = open(prefix, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Only a tmpfs of its own or the sandbox's disk (a snapshot's spawn
	 * has them in its layers). */
	if (a->fd < 0 || fstatfs(a->fd, &sf) < 0 ||
	    (sf.f_type != TMPFS_MAGIC && sf.f_type != EXT4_SUPER_MAGIC) ||
	    memcmp(&sf.f_fsid, root_fsid, sizeof(sf.f_fsid)) == 0 || fstat(a->fd, &st) < 0 ||
	    name_to_handle_at(a->fd, "", &h.fh, &mnt, AT_EMPTY_PATH) < 0 ||
	    (sf.f_type == EXT4_SUPER_MAGIC) != c->disk ||
	    (!c->disk &&
	     fanotify_mark(c->fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, EVENTS, a->fd, ".") < 0))
		goto no;
	a->fsid = sf.f_fsid;
	i = hutch_changes_dir_add(c, (int)c->nareas, -1, NULL, h.fh.handle_type, h.fh.f_handle,
	                          h.fh.handle_bytes);
	if (i < 0 || !hutch_changes_idx_put(c, prefix, &st))
		goto no;
	a->empty = scan_first(c, (int)c->nareas, a->fd, i, prefix) == 0;
	c->nareas++;
	c->unindexed = true;
	return true;
no:
	if (a->fd >= 0)
		close(a->fd);
	return false;
}

int hutch_changes_own_group(const struct hutch_changes *c)
{
	return c && !c->disk ? c->fd : -1;
}

struct hutch_changes *hutch_changes_new(int disk_group)
{
	struct hutch_changes *c = calloc(1, sizeof(*c));
	struct statfs root;

	if (!c) {
		if (disk_group >= 0)
			close(disk_group);
		return NULL;
	}
	c->free_dir = -1;
	memset(c->buckets, 0xff, sizeof(c->buckets));
	c->disk = disk_group >= 0;
	c->fd = c->disk ? disk_group : fanotify_init(HUTCH_CHANGES_FAN_INIT, O_RDONLY | O_CLOEXEC);
	if (c->fd < 0 || statfs("/", &root) < 0) {
		if (c->fd >= 0)
			close(c->fd);
		free(c);
		return NULL;
	}
	for (int i = 0; i < NAREAS; i++)
		(void)add_area(c, area_paths[i], &root.f_fsid);
	if (c->nareas == 0) {
		close(c->fd);
		free(c);
		return NULL;
	}
	return c;
}

int hutch_changes_poll_fd(struct hutch_changes *c, int *timeout)
{
	int64_t now = hutch_now_mono_ms();

	if (!c || c->lost)
		return -1;
	if (now >= c->rest_until)
		return c->fd;
	if (*timeout < 0 || *timeout > c->rest_until - now)
		*timeout = (int)(c->rest_until - now);
	return -1;
}

void hutch_changes_start(struct hutch_changes *c, uint64_t id)
{
	if (!c)
		return;
	hutch_changes_read(c);
	hutch_changes_flush(c);
	hutch_changes_gen_at_least(c, 2 * id);
	if (hutch_changes_grow((void **)&c->runs, &c->aruns, c->nruns, sizeof(*c->runs)))
		c->runs[c->nruns++] =
		        (struct run){ .id = id, .flags = c->lost ? HUTCH_CHANGES_INCOMPLETE : 0 };
}

struct out {
	char *buf;
	size_t head, len; /* the caller's bytes first; len includes them */
	struct hutch_changes_hdr *h;
};

static void walk_out(const void *node, VISIT which, void *ud)
{
	const struct change *ch = *(const struct change *const *)node;
	struct out *o = ud;
	struct hutch_change_rec r = {
		.kind = ch->kind, .what = ch->what, .mode = ch->mode, .size = ch->size
	};
	size_t n = strlen(ch->path);

	if (which != postorder && which != leaf)
		return;
	if (n > UINT16_MAX || o->len - o->head + sizeof(r) + n > HUTCH_CHANGES_MAX_BYTES) {
		o->h->omitted++;
		return;
	}
	r.path_len = (uint16_t)n;
	memcpy(o->buf + o->len, &r, sizeof(r));
	memcpy(o->buf + o->len + sizeof(r), ch->path, n);
	o->len += sizeof(r) + n;
	o->h->n++;
}

size_t hutch_changes_end(struct hutch_changes *c, uint64_t id, size_t head, char **ret_buf)
{
	struct hutch_changes_hdr h;
	struct out o = { .h = &h, .head = head, .len = head + sizeof(h) };
	size_t i;

	if (ret_buf)
		*ret_buf = NULL;
	if (!c)
		return 0;
	hutch_changes_read(c);
	hutch_changes_flush(c);
	hutch_changes_gen_at_least(c, 2 * id + 1);
	for (i = 0; i < c->nruns && c->runs[i].id != id; i++)
		;
	if (i == c->nruns)
		return 0;
	h = (struct hutch_changes_hdr){ .flags = c->runs[i].flags,
		                        .omitted = c->runs[i].omitted + c->runs[i].nover };
	/* Nothing changed (most commands): no 128 KiB buffer mapped and
	 * unmapped for it (an mmap, a munmap and its faults per command). */
	if (ret_buf && (c->runs[i].tree || h.omitted || (h.flags & HUTCH_CHANGES_INCOMPLETE)) &&
	    (o.buf = malloc(head + HUTCH_CHANGES_MAX_BYTES)))
		twalk_r(c->runs[i].tree, walk_out, &o);
	tdestroy(c->runs[i].tree, hutch_changes_free_change);
	tdestroy(c->runs[i].over, hutch_changes_free_change);
	c->runs[i] = c->runs[--c->nruns];
	/* Nothing changed: no list (the result has no "changes"). */
	if (!o.buf || (h.n == 0 && h.omitted == 0 && !(h.flags & HUTCH_CHANGES_INCOMPLETE))) {
		free(o.buf);
		return 0;
	}
	memcpy(o.buf + head, &h, sizeof(h));
	*ret_buf = o.buf;
	return o.len;
}
