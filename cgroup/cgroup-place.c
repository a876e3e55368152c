/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup v2: where a sandbox's cgroup nests (hutch_cgroup_v2_pick_parent());
 * at the end, the parents of a container's cgroupsPath (v1 and v2).
 *
 * A cgroup's children get controllers only through its
 * cgroup.subtree_control, and a non-root cgroup that holds processes
 * cannot enable any there (the "no internal processes" rule: EBUSY). So:
 *
 * 1. own already delegates the controllers: nest there.
 * 2. own is the real root (no cgroup.freeze there): enable and nest there.
 * 3. own is ours to manage: a unit with Delegate=yes (systemd marks its
 *    cgroup with the trusted.delegate or user.delegate attribute), or the
 *    root of our cgroup namespace (a container's cgroup, which is what a
 *    privileged docker container or a CI job gets). Move every process of
 *    own into its leaf child "leaf" (hutch's own processes and whatever
 *    else runs in the unit: they keep the unit's limits), enable the
 *    controllers in own, nest there. Nothing above own is written: a
 *    controller own does not have is an error naming it and the fix.
 *    A process already in such a leaf (a later hutch, started by one of
 *    the moved processes) nests in the leaf's parent.
 * 4. Otherwise (a login session scope, a plain service or scope, none of
 *    them delegated): the nearest ancestor that can have them (the old
 *    behaviour, which writes into ancestors systemd owns; a systemd
 *    re-realization can take a controller away later, which create
 *    detects, cgroup-v2.c). The fix is a delegated unit, which the errors
 *    name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "util.h"

#include "cgroup-place.h"
#include "cgroup-util.h"
#include "cgroup-v2.h"

#define LEAF "leaf"

static int copy_path(const char *s, char *ret, size_t size)
{
	size_t len = strlen(s);

	if (len >= size)
		return -ENAMETOOLONG;
	memcpy(ret, s, len + 1);
	return 0;
}

static bool v2_delegates(const char *dir, const char *want)
{
	_cleanup_close_ int fd = -EBADF;
	char buf[512];

	fd = hutch_cgroup_open_dir(dir);
	if (fd < 0 || hutch_read_file_at(fd, "cgroup.subtree_control", buf, sizeof(buf)) < 0)
		return false;
	return hutch_cgroup_list_has(buf, want);
}

/*
 * Where to nest on v2. Children of `own` get the controllers only if own's
 * cgroup.subtree_control lists them. Enabling them there fails with EBUSY
 * when own holds processes (the "no internal processes" rule) — always the
 * case for a non-root cgroup we live in — so then take the nearest non-root
 * ancestor that already delegates them. The root is exempt from the rule.
 */
/* Make dir delegate the controllers to its children (enable them in its
 * cgroup.subtree_control), first enabling them in its ancestors when they
 * are not available to it. -EBUSY: dir has processes of its own (the "no
 * internal processes" rule), so its children cannot get controllers. */
static int v2_enable(const char *dir, const char *want, const char *enable, int depth)
{
	_cleanup_close_ int fd = -EBADF;
	char parent[4096];
	char *slash;
	int r;

	if (v2_delegates(dir, want))
		return 0;
	fd = hutch_cgroup_open_dir(dir);
	if (fd < 0)
		return fd;
	r = hutch_write_knob_at(fd, "cgroup.subtree_control", enable);
	if (r == 0 || r == -EBUSY || depth > 64)
		return r;
	/* A controller missing from dir's cgroup.controllers: the parent must
	 * pass it down first. */
	if (copy_path(dir, parent, sizeof(parent)) < 0)
		return -ENAMETOOLONG;
	slash = strrchr(parent, '/');
	if (!slash || slash < parent + strlen(CG_ROOT))
		return r;
	*slash = '\0';
	if (v2_enable(parent, want, enable, depth + 1) < 0)
		return r;
	return hutch_write_knob_at(fd, "cgroup.subtree_control", enable);
}

/* "cpu memory pids" -> "+cpu +memory +pids" */
static void enable_list(const char *want, char *enable, size_t size)
{
	enable[0] = '\0';
	for (const char *w = want; *w;) {
		size_t n = strcspn(w, " ");
		size_t len = strlen(enable);

		if (n > 0)
			snprintf(enable + len, size - len, "%s+%.*s", len ? " " : "", (int)n, w);
		w += n;
		w += strspn(w, " ");
	}
}

static int climb(const char *own, const char *want, const char *enable, char *ret, size_t size,
                 struct hutch_err *err)
{
	char cur[4096];
	int r, first = 0;

	if (copy_path(own, cur, sizeof(cur)) < 0)
		return hutch_err_set(err, -ENAMETOOLONG, "cgroup v2: path too long");
	/* Nest under our own cgroup if it can delegate; else (it holds
	 * processes, e.g. a login session scope) under the nearest ancestor
	 * that can, which is usually the enclosing slice. The root itself is
	 * used only when it is our own cgroup. */
	for (;;) {
		char *slash;

		r = v2_enable(cur, want, enable, 0);
		if (first == 0)
			first = r;
		if (r == 0)
			return copy_path(cur, ret, size);
		slash = strrchr(cur, '/');
		if (!slash || slash <= cur + strlen(CG_ROOT))
			break;
		*slash = '\0';
	}
	return hutch_err_set_errno(err, first,
	                           "cgroup v2: cannot get the %s controllers delegated below '%s' "
	                           "or any of its parents; run hutch from a delegated cgroup "
	                           "(systemd-run --scope -p Delegate=yes hutch ...)",
	                           want, own);
}

/* Delegated to us: systemd's mark on a unit with Delegate=yes, or the
 * root of our cgroup namespace below the real root. */
static bool is_ours(int fd, const char *own, bool ns_root)
{
	static const char *const marks[] = { "trusted.delegate", "user.delegate" };
	char v[8];

	for (size_t i = 0; i < ELEMENTSOF(marks); i++) {
		ssize_t n = fgetxattr(fd, marks[i], v, sizeof(v) - 1);

		if (n > 0 && v[0] == '1')
			return true;
	}
	(void)own;
	return ns_root;
}

/* Move every process of own (fd) into own/LEAF; new ones may appear while
 * we move (a fork), so go round until it is empty, boundedly. */
static int move_to_leaf(int fd, const char *own, struct hutch_err *err)
{
	_cleanup_close_ int leaf = -EBADF;
	pid_t pids[1024];
	char buf[32];

	if (mkdirat(fd, LEAF, 0755) < 0 && errno != EEXIST)
		return hutch_err_set_errno(err, -errno, "cgroup v2: create '%s/" LEAF "'", own);
	leaf = openat(fd, LEAF, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (leaf < 0)
		return hutch_err_set_errno(err, -errno, "cgroup v2: open '%s/" LEAF "'", own);
	for (int round = 0; round < 64; round++) {
		char text[16384];
		ssize_t n = hutch_read_file_at(fd, "cgroup.procs", text, sizeof(text));
		size_t np;

		if (n < 0)
			return hutch_err_set_errno(err, (int)n, "cgroup v2: read '%s/cgroup.procs'",
			                           own);
		np = hutch_cgroup_parse_pids(text, pids, ELEMENTSOF(pids));
		if (np == 0)
			return 0;
		for (size_t i = 0; i < np; i++) {
			int r;

			snprintf(buf, sizeof(buf), "%d", (int)pids[i]);
			r = hutch_write_knob_at(leaf, "cgroup.procs", buf);
			if (r < 0 && r != -ESRCH)
				return hutch_err_set_errno(
				        err, r, "cgroup v2: move pid %d into '%s/" LEAF "'",
				        (int)pids[i], own);
		}
	}
	return hutch_err_set(err, -EBUSY, "cgroup v2: '%s' keeps getting new processes", own);
}

/* Name the first controller of want that dir's cgroup.controllers lacks. */
static void missing_controller(int fd, const char *want, char *ret, size_t size)
{
	char buf[512] = "";

	(void)hutch_read_file_at(fd, "cgroup.controllers", buf, sizeof(buf));
	snprintf(ret, size, "%s", want);
	for (const char *w = want; *w;) {
		size_t n = strcspn(w, " ");
		char one[32];

		snprintf(one, sizeof(one), "%.*s", (int)n, w);
		if (n > 0 && !hutch_cgroup_list_has(buf, one)) {
			snprintf(ret, size, "%s", one);
			return;
		}
		w += n;
		w += strspn(w, " ");
	}
}

/* A process in D/leaf, where D already delegates: an earlier hutch made
 * the leaf (a shell of a container or a delegated unit that ran hutch
 * before is in it now): nest in D. Returns 0 and D in ret, or -ENOENT. */
static int leaf_parent(const char *own, const char *want, char *ret, size_t size)
{
	const char *slash = strrchr(own, '/');

	if (!slash || strcmp(slash + 1, LEAF) != 0 || (size_t)(slash - own) >= size)
		return -ENOENT;
	memcpy(ret, own, (size_t)(slash - own));
	ret[slash - own] = '\0';
	return v2_delegates(ret, want) ? 0 : -ENOENT;
}

bool hutch_cgroup_v2_is_placeable(const char *own, const char *want)
{
	_cleanup_close_ int fd = -EBADF;
	bool ns_root = strcmp(own, CG_ROOT) == 0;
	char parent[4096];

	if (v2_delegates(own, want) || leaf_parent(own, want, parent, sizeof(parent)) == 0)
		return true;
	fd = hutch_cgroup_open_dir(own);
	if (fd < 0)
		return false;
	if (ns_root && faccessat(fd, "cgroup.freeze", F_OK, 0) < 0)
		return true; /* the real root */
	return is_ours(fd, own, ns_root);
}

int hutch_cgroup_v2_pick_parent(const char *own, const char *want, char *ret, size_t size,
                                struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	char enable[128], what[32];
	bool ns_root, real_root;
	int r;

	enable_list(want, enable, sizeof(enable));
	if (v2_delegates(own, want))
		return copy_path(own, ret, size);
	if (leaf_parent(own, want, ret, size) == 0)
		return 0;
	fd = hutch_cgroup_open_dir(own);
	if (fd < 0)
		return hutch_err_set_errno(err, fd, "cgroup v2: open '%s'", own);
	/* Only the real root lacks cgroup.freeze; a cgroup namespace's root
	 * (a container's) is an ordinary cgroup with processes. */
	ns_root = strcmp(own, CG_ROOT) == 0;
	real_root = ns_root && faccessat(fd, "cgroup.freeze", F_OK, 0) < 0;
	if (real_root) {
		r = hutch_write_knob_at(fd, "cgroup.subtree_control", enable);
		if (r < 0)
			return hutch_err_set_errno(err, r, "cgroup v2: enable %s in '%s'", want,
			                           own);
		return copy_path(own, ret, size);
	}
	if (!is_ours(fd, own, ns_root))
		return climb(own, want, enable, ret, size, err);
	r = move_to_leaf(fd, own, err);
	if (r < 0)
		return r;
	r = hutch_write_knob_at(fd, "cgroup.subtree_control", enable);
	if (r < 0) {
		missing_controller(fd, want, what, sizeof(what));
		return hutch_err_set_errno(err, r,
		                           "cgroup v2: cannot enable the %s controller in the "
		                           "delegated '%s': give its unit Delegate=yes (or "
		                           "Delegate=cpu memory pids)",
		                           what, own);
	}
	return copy_path(own, ret, size);
}

/* ---- a container's cgroupsPath (hutch_cgroup_new_at): its parents ---- */

/* rmdir the parents create made, deepest first (still holding others:
 * left, as runc leaves them). */
void hutch_cgroup_remove_made(struct hutch_cgroup *cg)
{
	for (size_t i = 0; i < cg->n_dirs; i++) {
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s", cg->dirs[i]);
		for (; cg->made[i] > 0; cg->made[i]--) {
			*strrchr(dir, '/') = '\0';
			if (rmdir(dir) < 0)
				break;
		}
	}
}

static int enable_v2(const char *dir)
{
	_cleanup_close_ int fd = hutch_cgroup_open_dir(dir);
	int r;

	if (fd < 0)
		return fd;
	r = hutch_write_knob_at(fd, "cgroup.subtree_control", "+cpu +memory +pids");
	errno = -r;
	return r;
}

/* mkdir the missing parents of each directory (a cgroupsPath's), top
 * down; on v2 each new one delegates the controllers to its child. */
int hutch_cgroup_make_parents(struct hutch_cgroup *cg, struct hutch_err *err)
{
	for (size_t i = 0; i < cg->n_dirs; i++) {
		char dir[4096];
		size_t cut[HUTCH_CGROUP_PATH_DEPTH];

		snprintf(dir, sizeof(dir), "%s", cg->dirs[i]);
		for (unsigned int d = 0; d < cg->depth; d++) {
			cut[d] = (size_t)(strrchr(dir, '/') - dir);
			dir[cut[d]] = '\0';
		}
		for (unsigned int d = cg->depth; d-- > 0;) {
			if (mkdir(dir, 0755) == 0)
				cg->made[i]++;
			else if (errno != EEXIST || cg->made[i])
				return hutch_err_set_errno(err, -errno, "create cgroup '%s'", dir);
			if (cg->made[i] && cg->ops == &hutch_cgroup_v2_ops && enable_v2(dir) < 0)
				return hutch_err_set_errno(err, -errno,
				                           "delegate cpu memory pids in '%s'", dir);
			dir[cut[d]] = '/';
		}
	}
	return 0;
}
