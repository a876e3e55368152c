/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's own delegated systemd scope (cgroup-systemd.c). */
#ifndef HUTCH_CGROUP_SYSTEMD_H
#define HUTCH_CGROUP_SYSTEMD_H

#include <stddef.h>

#include "error.h"

/*
 * Wanted when hutch_cgroup_needs_scope() (cgroup.h) says so. systemd_address: systemd's private
 * socket for the caller (root: the system manager; else the user's, from
 * XDG_RUNTIME_DIR), -ENOENT without systemd. systemd_scope: move the
 * calling process into a new transient scope "hutch-<name>.scope" with
 * Delegate=yes (wait until it is there); hutch_cgroup_new() then nests in
 * it.
 */
int hutch_cgroup_systemd_address(char *ret, size_t size);
int hutch_cgroup_systemd_scope(const char *address, const char *name, struct hutch_err *err);

#endif
