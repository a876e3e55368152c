/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What init sets in its new namespaces before it builds the root: the host
 * name, the network (netpolicy's child side), the listeners it hands to the
 * supervisor, and a container's sysctls of its own network and ipc
 * namespaces (linux.sysctl: only such keys reach here, oci/spec.c refuses
 * the others), written through the /proc init still shares with the host,
 * whose net and ipc entries are those of its namespaces (the new root's
 * /proc/sys is read-only).
 */
#ifndef HUTCH_INIT_NS_H
#define HUTCH_INIT_NS_H

#include "error.h"
#include "netpolicy.h"

/* Child side, once, after GO; fails naming the step. */
/* sock: init's socket to the supervisor (the listeners go there);
 * hostname, net: NULL for a pod's joined uts or network namespace (left
 * as the pod set them); sysctls: "key=value", NULL-terminated, or NULL. */
int hutch_init_setup_ns(int sock, const char *hostname, const struct hutch_net_plan *net,
                        const char *const *sysctls, struct hutch_err *err);
/* Child side, before GO (hutch_init_params.net_early): a network
 * namespace of init's own user namespace, and its setup as
 * hutch_init_setup_ns() does it (then given net NULL). */
int hutch_init_make_net(int sock, const struct hutch_net_plan *net, struct hutch_err *err);
/* Write each "key=value" whose key starts with prefix (NULL: every one)
 * to /proc/sys/KEY of the caller's namespaces; fails naming the key. The
 * supervisor writes a CNI network namespace's net.* keys with it (pod.c). */
int hutch_init_write_sysctls(const char *const *kv, const char *prefix, struct hutch_err *err);

#endif
