/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp allow-list for commands in a sandbox. The rules (seccomp.c) are
 * compiled with libseccomp to one classic BPF program per network mode at
 * build time (hutch-seccomp-gen, seccomp-gen.c), and the programs are part
 * of the hutch binary (seccomp-load.c): a sandbox looks its program up
 * instead of running libseccomp (about 3 ms of every create), and hutch does
 * not link libseccomp at all. Each command's child loads the program with
 * one syscall before execve().
 */
#ifndef HUTCH_SECCOMP_H
#define HUTCH_SECCOMP_H

#include <linux/filter.h>

#include "error.h"
#include "netpolicy.h"

/* The compiled-in program for a network mode. ret->filter points to
 * read-only static data (the kernel only reads it): never free it. -EINVAL
 * for a mode with no program. */
int hutch_seccomp_program(enum hutch_net_mode mode, struct sock_fprog *ret, struct hutch_err *err);
/* PR_SET_NO_NEW_PRIVS then install prog in the calling process
 * (async-signal-safe). init calls it once; its children inherit both. */
int hutch_seccomp_load(const struct sock_fprog *prog);
/* Child side: 0 if a seccomp filter and no_new_privs are in place,
 * -ENOTRECOVERABLE otherwise (async-signal-safe, two syscalls). */
int hutch_seccomp_check_inherited(void);

/* Build time and tests only (library hutch_seccomp_rules, links
 * libseccomp): compile the rules for a network mode; ret->filter is
 * malloc'ed, release it with hutch_seccomp_prog_done(). */
int hutch_seccomp_compile(enum hutch_net_mode mode, struct sock_fprog *ret, struct hutch_err *err);
void hutch_seccomp_prog_done(struct sock_fprog *prog);

#endif
