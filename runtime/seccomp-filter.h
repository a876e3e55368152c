/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp allow-list for commands in a sandbox, built once per sandbox with
 * libseccomp and exported to a classic BPF program that each command's child
 * loads with one syscall before execve().
 */
#ifndef HUTCH_SECCOMP_H
#define HUTCH_SECCOMP_H

#include <linux/filter.h>

#include "error.h"
#include "netpolicy.h"

/* Build the filter for a network mode; ret->filter is malloc'ed. */
int hutch_seccomp_build(enum hutch_net_mode mode, struct sock_fprog *ret, struct hutch_err *err);
/* Child side: PR_SET_NO_NEW_PRIVS then install prog (async-signal-safe). */
int hutch_seccomp_load(const struct sock_fprog *prog);
void hutch_seccomp_prog_done(struct sock_fprog *prog);

#endif
