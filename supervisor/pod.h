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
 * own. docs/architecture.md ("Pods") says why this is not weaker.
 */
#ifndef HUTCH_POD_H
#define HUTCH_POD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

struct sup;

/* Whether s is a container that joins a pod's namespaces. */
bool hutch_pod_joins(const struct sup *s);
/* Before the uid slot: open and check the namespaces the container asks
 * to join, find the live sandbox whose user namespace owns them, pin its
 * uid slot (s->slot, s->slot_fd, s->uid_base become the pod's) and, when
 * the network namespace is joined, take the pod's network option (a
 * different run.hutch.network is refused). Errors name the field. */
int hutch_pod_join_prepare(struct sup *s, struct hutch_err *err);
/* The clone of init for a joining container: a helper joins the pod's
 * namespaces and clones init with CLONE_PARENT (init is the supervisor's
 * child as every init) and flags, less the namespaces joined. Like
 * fork(): 0 in init, its pid in the supervisor (*ret_pidfd its pidfd),
 * or -errno with err set. */
pid_t hutch_pod_clone(struct sup *s, uint64_t flags, int *ret_pidfd, struct hutch_err *err);
/* Whether init is cloned by hutch_pod_clone(): it joins a pod's
 * namespaces or a CNI network namespace (one the CRI made, owned by the
 * host's user namespace: joined as host root, before init's own user
 * namespace, so that init has no capability over it). */
bool hutch_pod_clones(const struct sup *s);
/* Whether the network (uts) namespace is the pod's, joined. */
bool hutch_pod_joins_net(const struct sup *s);
bool hutch_pod_joins_uts(const struct sup *s);
/* The supervisor's end: close what hutch_pod_join_prepare() opened. */
void hutch_pod_join_done(struct sup *s);

#endif
