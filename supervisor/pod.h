/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pods: a container that joins the network, ipc and uts namespaces of
 * another hutch container (the pod's infra or pause container), the way
 * podman and the CRI ask for it (linux.namespaces[].path naming
 * /proc/PID/ns/...). Every namespace joined must belong to the user
 * namespace of a live hutch sandbox (the pod's), never the host's, and
 * the container joins that user namespace too: setns() into a network
 * namespace needs CAP_SYS_ADMIN in the user namespace that owns it, and
 * the pod's processes are then one id range (as a Kubernetes pod with its
 * own user namespace). Its own mount, pid and cgroup namespaces stay its
 * own. docs/history.md ("Pods") says why this is not weaker.
 */
#ifndef HUTCH_POD_H
#define HUTCH_POD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

struct sup;
struct hutch_kind_slot;

/* The pod member's row of the kinds table (kind.h) is pod.c's. Before
 * the uid slot (the join op of a container's row too): check the cgroup
 * namespace's path; open and check the namespaces the container asks
 * to join, find the live sandbox whose user namespace owns them, pin its
 * uid slot (s->slot, s->slot_fd, s->uid_base become the pod's) and, when
 * the network namespace is joined, take the pod's network option (a
 * different run.hutch.network is refused). Errors name the field. The
 * clone of init then: a helper joins the namespaces (a CNI network
 * namespace, owned by the host's user namespace, first, as host root, so
 * that init has no capability over it) and clones init with CLONE_PARENT
 * (init is the supervisor's child as every init). */
int hutch_pod_join_prepare(struct sup *s, struct hutch_kind_slot *ret_slot, struct hutch_err *err);

#endif
