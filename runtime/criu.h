/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRIU for full snapshots (processes and memory; docs/snapshots.md): which
 * binary, its version, and whether 'criu check' passes on this kernel.
 * The binary is HUTCH_CRIU (an absolute path), else the first criu in
 * PATH (the standard directories where PATH is unset: the supervisor
 * wipes its environment). The verdict is cached in the runtime dir, keyed
 * by the binary (device, inode, size, mtime) and the kernel release, so
 * 'criu check' (0.4 s here) runs once per binary and kernel.
 */
#ifndef HUTCH_CRIU_H
#define HUTCH_CRIU_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The CRIU release measured to pass 'criu check' on this project's hosts
 * (Linux 6.18), and the first that knows the [vvar_vclock] mapping. */
#define HUTCH_CRIU_MEASURED "4.2"
#define HUTCH_CRIU_MIN      "4.1"

struct hutch_criu {
	char path[PATH_MAX]; /* "" when none was found */
	char version[32];    /* "4.2"; "" when criu --version said nothing we read */
	char kernel[65];     /* uname's release the verdict is for */
	bool works;          /* 'criu check' exited 0, and the dump takes hutch's options */
	bool old;            /* 'criu check' passed; the dump refused an option (3.17.1) */
	bool cached;         /* the verdict came from the runtime dir's cache */
	char detail[512];    /* why not: criu's own error lines, or how it was looked for */
};

/*
 * Find CRIU and run (or read the cached verdict of) 'criu check'. Never
 * fails: what went wrong is in ret->detail. runtime_dir may be NULL (no
 * cache); the cache is written only where that directory exists.
 */
void hutch_criu_probe(const char *runtime_dir, struct hutch_criu *ret);

/*
 * What full snapshots can do with this CRIU: why 'hutch snapshot --full'
 * and POST /snapshot {"type": "full"} are refused (no CRIU, or one that
 * fails 'criu check') and what would fix it; with one that passes, that
 * the dump and the restore work (hutch doctor).
 */
void hutch_criu_refusal(const struct hutch_criu *c, char *buf, size_t size);

/*
 * CRIU's /run for one dump or restore: a detached tmpfs (its mount fd, or
 * -errno: CRIU then detects the kernel's features itself) holding CRIU's
 * kernel features cache (criu.kdat) from the runtime dir's copy for this
 * binary, kernel and boot (*ret_kdat: its inode, 0 when there was none),
 * which CRIU keeps only on a tmpfs /run. _attach(): in the child, in a
 * mount namespace of its own, before CRIU's exec (0 or -errno). _keep():
 * after CRIU, its criu.kdat copied into the runtime dir unless it is the
 * one given (quietly not, on a failure).
 */
int hutch_criu_run_dir(const char *runtime_dir, const struct hutch_criu *c, ino_t *ret_kdat);
int hutch_criu_run_dir_attach(int mnt);
void hutch_criu_run_dir_keep(const char *runtime_dir, const struct hutch_criu *c, int mnt,
                             ino_t kdat);

/*
 * A CRIU run's cgroup (criu.c): every process of the run, CRIU and all it
 * forks, ends with it. hutch_criu_cg_new() makes it beside the sandbox's
 * cgroups cg (hutch_cgroup_run_new()) and forks its watcher; the child
 * that execs CRIU calls hutch_criu_cg_join() first (0 or -errno: then it
 * must not exec); hutch_criu_cg_end() (idempotent), after CRIU ended,
 * lets the watcher kill what is left and remove the cgroup, and reaps it.
 * A caller that dies does the same by its death.
 */
struct hutch_cgroup;
struct hutch_err;
struct hutch_criu_cg {
	char dir[PATH_MAX]; /* its path */
	int join;           /* its join file (close-on-exec) */
	int let_go;         /* the watcher's pipe: closed, it kills */
	pid_t watch;        /* the watcher */
};
#define HUTCH_CRIU_CG_INIT                                    \
	{                                                     \
		.join = -EBADF, .let_go = -EBADF, .watch = -1 \
	}
/* The exit status of a child whose hutch_criu_cg_join() failed. */
#define HUTCH_CRIU_CG_EXIT 124
int hutch_criu_cg_new(const struct hutch_cgroup *cg, struct hutch_criu_cg *ret,
                      struct hutch_err *err);
int hutch_criu_cg_join(const struct hutch_criu_cg *c);
void hutch_criu_cg_end(struct hutch_criu_cg *c);
/* The error of a child that exited HUTCH_CRIU_CG_EXIT ("criu dump"'s,
 * what): filled into err, returned. */
int hutch_criu_cg_refused(const struct hutch_criu_cg *c, const char *what, struct hutch_err *err);
/* The restore's setup-namespaces action (dirfd/name, 0700): lo brought up
 * in the empty network namespace CRIU made (--empty-ns net) for a dump of
 * network none, before any socket is restored. 0 or -errno. */
int hutch_criu_write_lo_up(int dirfd, const char *name);

/* ---- pure helpers (tests/unit/test_runtime.c) ---- */

/* "Version: 4.2\nGitID: v4.2" -> "4.2"; "" when there is no Version line. */
void hutch_criu_parse_version(const char *out, char *buf, size_t size);
/* 'criu check' output -> its Error lines without their "Error (file:line): "
 * prefix, joined by "; " (else its last non-empty line), on one line. */
void hutch_criu_summarize_check(const char *out, char *buf, size_t size);

/*
 * CRIU's images a restore rewrites (criu-img.c): in, len one image file's
 * bytes; *ret (malloc'ed, the caller frees) the new file. The user
 * namespace's maps moved from [old_base, old_base + count) onto new_base
 * (-ERANGE: an extent outside it); the uts namespace's host name set.
 * -EBADMSG: not such an image (truncated, no map), -ENOMEM.
 */
int hutch_criu_img_remap_userns(const uint8_t *in, size_t len, uint32_t old_base, uint32_t new_base,
                                uint32_t count, uint8_t **ret, size_t *ret_len);
int hutch_criu_img_set_nodename(const uint8_t *in, size_t len, const char *nodename, uint8_t **ret,
                                size_t *ret_len);

#endif
