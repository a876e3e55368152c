/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The table of compiled-in seccomp programs, shared by the generated file
 * (hutch-seccomp-gen writes its definition at build time) and
 * seccomp-load.c (which reads it).
 */
#ifndef HUTCH_SECCOMP_INTERNAL_H
#define HUTCH_SECCOMP_INTERNAL_H

#include <linux/filter.h>
#include <stddef.h>

struct hutch_seccomp_compiled {
	int mode; /* enum hutch_net_mode */
	const struct sock_filter *insns;
	unsigned short len;
};

extern const struct hutch_seccomp_compiled hutch_seccomp_compiled[];
extern const size_t hutch_seccomp_ncompiled;

#endif
