/* SPDX-License-Identifier: Apache-2.0 */
/* The cgroup v2 backend (cgroup-v2.c). */
#ifndef HUTCH_CGROUP_V2_H
#define HUTCH_CGROUP_V2_H

#include "cgroup-util.h"

extern const struct cgroup_ops hutch_cgroup_v2_ops;

#endif
