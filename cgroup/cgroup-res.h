/* SPDX-License-Identifier: Apache-2.0 */
/* The resources writer (cgroup-res.c): a container's linux.resources
 * beyond hutch's three limits, for the backends. */
#ifndef HUTCH_CGROUP_RES_H
#define HUTCH_CGROUP_RES_H

#include "cgroup-limits.h"
#include "cgroup-util.h"
#include "error.h"

/* The rest of a container's linux.resources, written into
 * the directory fd of dir holding ctrls (v1: CG_CTRL_*), or the unified
 * directory (v2). lim: the limits as lowered (reservations and unified
 * values are lowered to them). Errors name the linux.resources field. */
int hutch_cgroup_res_write_v1(int fd, const char *dir, unsigned int ctrls,
                              const struct hutch_limits *lim, struct hutch_err *err);
int hutch_cgroup_res_write_v2(int fd, const char *dir, const struct hutch_limits *lim,
                              struct hutch_err *err);
/* v1 cpuset: a new directory's cpuset.cpus and cpuset.mems are empty (no
 * task may join) unless copied from its parent: fill dir (open as fd) and
 * each of its parents up to the first one that has them, top down, with
 * that one's. pfd: dir's parent, open, or -1 (opened here). */
int hutch_cgroup_cpuset_inherit(int fd, int pfd, const char *dir, struct hutch_err *err);
/* v1: what res asks that cg cannot hold (unified keys; a controller whose
 * directory cg lacks, as an oci update may ask) is an error naming it. */
int hutch_cgroup_res_check_v1(const struct hutch_cgroup *cg, const struct hutch_resources *res,
                              struct hutch_err *err);

#endif
