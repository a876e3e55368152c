/* SPDX-License-Identifier: Apache-2.0 */
/* The cgroup v1 backend (cgroup-v1.c). */
#ifndef HUTCH_CGROUP_V1_H
#define HUTCH_CGROUP_V1_H

#include "cgroup-util.h"

extern const struct cgroup_ops hutch_cgroup_v1_ops;

#endif
