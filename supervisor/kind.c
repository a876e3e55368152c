/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The table of sandbox kinds (see kind.h): each row is asked in turn
 * whether a new sandbox is of its kind, the most particular first; the
 * plain sandbox (the host-derived root), whose every op is the common
 * path, is the last row and the default.
 */
#include <sched.h>
#include <stddef.h>

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
	int r = s->kind->join ? s->kind->join(s, err) : 0;

	if (r < 0)
		return r;
	s->joins = 0;
	for (size_t i = 0; s->kind->joins && i < sizeof(types) / sizeof(types[0]); i++)
		if (s->kind->joins(s, types[i]))
			s->joins |= (unsigned)types[i];
	return 0;
}

int hutch_kind_cgroup_new(struct sup *s, struct hutch_err *err)
{
	const char *path = NULL;
	const struct hutch_resources *res = NULL;

	if (s->kind->cgroup)
		s->kind->cgroup(s, &path, &res);
	return hutch_cgroup_new_for(s->id, path, res, &s->cg, err);
}
