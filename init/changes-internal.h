/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What init/changes.c (the fanotify group, the lists' start and end) and
 * init/changes-tree.c (the directory table, the index, the comparison and
 * the merge into each command's list) share.
 */
#ifndef HUTCH_INIT_CHANGES_INTERNAL_H
#define HUTCH_INIT_CHANGES_INTERNAL_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#define NAREAS     3
#define HANDLE_MAX 32   /* tmpfs's handles are 12 bytes */
#define NBUCKETS   1024 /* directory handles' hash */

struct area {
	const char *prefix;
	int fd; /* O_PATH of its root */
	fsid_t fsid;
	/* Its root read and found empty before READY (a fresh tmpfs or
	 * disk): hutch_changes_index() has nothing to walk there (issue 31) */
	bool empty;
};

/* A directory of an area, known by its handle. */
struct dir {
	int32_t parent; /* -1: the area's root */
	int32_t next;   /* hash chain, or the free list */
	uint8_t area, hlen;
	bool dead, used;
	int htype;
	unsigned char h[HANDLE_MAX];
	char *name;
};

/* The index: what each path was at the last comparison. */
struct ientry {
	char *path; /* the key */
	uint64_t ino, size;
	int64_t mtime;
	uint32_t mode, uid, gid;
};

struct dirty {
	int32_t dir;
	char *name; /* NULL: the directory itself */
	bool written;
};

struct change {
	char *path; /* the key */
	uint8_t kind, what;
	uint32_t mode;
	uint64_t size;
};

/* A command running, and what it has been given so far. */
struct run {
	uint64_t id;
	void *tree; /* struct change by path, at most HUTCH_CHANGES_MAX_ENTRIES */
	size_t n;
	void *over; /* the paths past the cap, only counted */
	size_t nover;
	uint64_t omitted; /* changes lost to a lack of memory */
	uint32_t flags;
};

struct hutch_changes {
	int fd;
	bool lost;          /* the queue overflowed: lists stop */
	bool in_links;      /* comparing a changed file's other names */
	int64_t rest_until; /* monotonic ms: the fd is not polled before */
	struct area areas[NAREAS];
	size_t nareas;
	bool disk;      /* the areas are on the sandbox's disk (ext4), not tmpfs */
	bool unindexed; /* only the directories indexed: hutch_changes_index() */
	struct dir *dirs;
	size_t ndirs, adirs;
	int32_t free_dir;
	int32_t buckets[NBUCKETS];
	void *index;
	struct dirty *pend;
	size_t npend, apend;
	struct change *delta;
	size_t ndelta, adelta;
	struct run *runs;
	size_t nruns, aruns;
	/* The history of hutch diff (changes-hist.c): struct hpath by path,
	 * the versions kept, full (stopped at its bound), the generation now. */
	void *hist;
	size_t nhist;
	bool hist_full;
	uint64_t gen;
};

int hutch_changes_cmp_path(const void *a, const void *b);
/* Room for one more of size bytes in *v (n used of *alloc). */
bool hutch_changes_grow(void **v, size_t *alloc, size_t n, size_t size);
/* The directory with that handle in area, or -1. */
int32_t hutch_changes_dir_find(const struct hutch_changes *c, int area, int htype,
                               const unsigned char *h, size_t n);
/* A directory named name in parent (-1: the area's root); its index or -1. */
int32_t hutch_changes_dir_add(struct hutch_changes *c, int area, int32_t parent, const char *name,
                              int htype, const unsigned char *h, size_t n);
/* path as st into the index (a copy); NULL if it is there already or no memory. */
struct ientry *hutch_changes_idx_put(struct hutch_changes *c, const char *path,
                                     const struct stat *st);
/* Compare every name touched since the last time; the differences go to
 * the commands running now. */
void hutch_changes_flush(struct hutch_changes *c);
/* fdopendir(fd), closing fd if it fails (fd < 0: NULL). */
DIR *hutch_changes_fdopendir(int fd);
/* d's next entry but . and ..: its name, path/name into sub, its lstat;
 * false at the end. */
bool hutch_changes_next(DIR *d, const char *path, char *sub, size_t cap, struct stat *st,
                        const char **name);
/* changes-hist.c: path changed from old (NULL: it was not there) to now
 * (NULL: it is gone), found in the generation c->gen. */
void hutch_changes_hist_note(struct hutch_changes *c, const char *path, const struct ientry *old,
                             const struct stat *now);
/* tdestroy()'s free of a command's list. */
void hutch_changes_free_change(void *p);

#endif
