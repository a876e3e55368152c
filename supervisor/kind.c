/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The table of sandbox kinds (see kind.h): each row is asked in turn
 * whether a new sandbox is of its kind, the most particular first; the
 * plain sandbox (the host-derived root), whose every op is the common
 * path, is the last row and the default.
 */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>

#include "cgroup.h"
#include "cleanup.h"
#include "kind.h"
#include "supervisor.h"

static bool is_plain(const struct hutch_config *cfg, const struct hutch_container *ct)
{
	(void)cfg;
	(void)ct;
	return true;
}

const struct hutch_kind hutch_kind_plain = {
	.name = "plain",
	.is = is_plain,
	.sizes_inside = true,
};

static const struct hutch_kind *const kinds[] = {
	&hutch_kind_pod,
	&hutch_kind_container,
	&hutch_kind_image,
	&hutch_kind_plain,
};

const struct hutch_kind *hutch_kind_choose(const struct hutch_config *cfg,
                                           const struct hutch_container *ct)
{
	for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
		if (kinds[i]->is(cfg, ct))
			return kinds[i];
	return &hutch_kind_plain;
}

int hutch_kind_join(struct sup *s, struct hutch_err *err)
{
	static const int types[] = { CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWUTS, CLONE_NEWPID,
		                     CLONE_NEWIPC };
	struct hutch_kind_slot slot = { .fd = -EBADF };
	int r = s->kind->join ? s->kind->join(s, &slot, err) : 0;

	if (r < 0 && slot.fd >= 0)
		s->slot_fd = slot.fd; /* pinned before the join failed: closed at the end */
	if (r < 0)
		return r;
	s->joins = 0;
	for (size_t i = 0; s->kind->joins && i < sizeof(types) / sizeof(types[0]); i++)
		if (s->kind->joins(s, types[i]))
			s->joins |= (unsigned)types[i];
	if (slot.fd < 0 && !(s->joins & CLONE_NEWUSER)) {
		r = hutch_slot_acquire(s->idmap.slots_dir, s->idmap.slots, &slot.slot, err);
		if (r < 0)
			return r;
		slot.fd = r;
		slot.uid_base = s->idmap.rootless ? hutch_idmap_app_uid(&s->idmap, slot.slot)
		                                  : HUTCH_UID_BASE + slot.slot * HUTCH_UID_RANGE;
	}
	if (slot.fd >= 0) {
		s->slot = slot.slot;
		s->slot_fd = slot.fd;
		s->uid_base = slot.uid_base;
	}
	return 0;
}

/* Under systemd without delegation: a delegated scope of the supervisor's
 * own (cgroup.h), for the cgroup to go in. */
static int scope_new(struct sup *s, struct hutch_err *err)
{
	int r = hutch_cgroup_systemd_scope(s->scope_bus, s->id, err);

	if (r < 0 && s->idmap.rootless) {
		char why[sizeof(err->msg)];

		memcpy(why, err->msg, sizeof(why));
		return hutch_err_set(err, -EOPNOTSUPP,
		                     "%.150s; or pass --no-limits (no CPU, memory, pids limits)",
		                     why);
	}
	return r;
}

int hutch_kind_cgroup_new(struct sup *s, struct hutch_cgroup **ret_cg, struct hutch_err *err)
{
	const char *path = NULL;
	const struct hutch_resources *res = NULL;
	int r;

	if (s->scope_bus[0] && (r = scope_new(s, err)) < 0)
		return r;
	if (s->kind->cgroup)
		s->kind->cgroup(s, &path, &res);
	return hutch_cgroup_new_for(s->id, path, res, ret_cg, err);
}
