/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch-seccomp-gen OUTPUT.c: a build-time tool. Compiles the seccomp rules
 * of seccomp.c with libseccomp for every network mode and writes the BPF
 * programs as a C file that is compiled into hutch (seccomp-internal.h).
 * The modes are the values netpolicy names (hutch_net_mode_name() other
 * than "unknown"), from 0 up: a new mode needs no change here, and each one
 * must compile.
 *
 * The programs are what libseccomp produced on the build machine for its
 * architecture: a cross build must run this tool under
 * CMAKE_CROSSCOMPILING_EMULATOR (CMake does so for custom commands).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <seccomp.h>

#include "error.h"
#include "netpolicy.h"
#include "seccomp-filter.h"

#define MAX_MODES 64

static int write_program(FILE *f, int mode, const struct sock_fprog *p)
{
	fprintf(f, "static const struct sock_filter prog_%d[%u] = {\n", mode, p->len);
	for (unsigned i = 0; i < p->len; i++) {
		const struct sock_filter *k = &p->filter[i];

		fprintf(f, "\t{ 0x%04x, %u, %u, 0x%08x },\n", k->code, k->jt, k->jf, k->k);
	}
	return fprintf(f, "};\n\n") < 0 ? -EIO : 0;
}

static int generate(FILE *f)
{
	const struct scmp_version *v = seccomp_version();
	unsigned short lens[MAX_MODES];
	int n = 0;

	fprintf(f,
	        "/* Generated at build time by hutch-seccomp-gen (runtime/seccomp-gen.c)\n"
	        " * from the rules in runtime/seccomp.c with libseccomp %u.%u.%u: do not\n"
	        " * edit. */\n#include \"seccomp-internal.h\"\n\n",
	        v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0);
	for (; n < MAX_MODES; n++) {
		const char *name = hutch_net_mode_name((enum hutch_net_mode)n);
		struct hutch_err err = { 0 };
		struct sock_fprog p = { 0 };
		int r;

		if (strcmp(name, "unknown") == 0)
			break; /* past the last mode */
		r = hutch_seccomp_compile((enum hutch_net_mode)n, &p, &err);
		if (r < 0) {
			fprintf(stderr, "hutch-seccomp-gen: network mode %s: %s\n", name, err.msg);
			return r;
		}
		lens[n] = p.len;
		fprintf(f, "/* network mode %s */\n", name);
		r = write_program(f, n, &p);
		hutch_seccomp_prog_done(&p);
		if (r < 0)
			return r;
	}
	fprintf(f, "const struct hutch_seccomp_compiled hutch_seccomp_compiled[] = {\n");
	for (int i = 0; i < n; i++)
		fprintf(f, "\t{ %d, prog_%d, %u },\n", i, i, lens[i]);
	fprintf(f, "};\n\nconst size_t hutch_seccomp_ncompiled = %d;\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	char tmp[4096];
	FILE *f;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: hutch-seccomp-gen OUTPUT.c\n");
		return 2;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
	f = fopen(tmp, "we");
	if (!f) {
		fprintf(stderr, "hutch-seccomp-gen: open '%s': %s\n", tmp, strerror(errno));
		return 1;
	}
	r = generate(f);
	if (fclose(f) != 0 && r >= 0)
		r = -errno;
	if (r >= 0 && rename(tmp, argv[1]) < 0)
		r = -errno;
	if (r < 0) {
		fprintf(stderr, "hutch-seccomp-gen: writing '%s': %s\n", argv[1], strerror(-r));
		(void)unlink(tmp);
		return 1;
	}
	return 0;
}
