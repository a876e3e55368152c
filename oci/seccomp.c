/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bundle's linux.seccomp compiled to a classic BPF program, to be
 * stacked on hutch's own filter in the container's process (init loads it
 * in the process's child before execve: HUTCH_SPAWN_EXTRA_FILTER). The
 * kernel runs every filter of a task and takes the strictest answer, so a
 * syscall passes only if both hutch's allow-list and the bundle's profile
 * allow it: their intersection, never weaker than either.
 *
 * libseccomp is loaded at run time (as libnftables and libmicrohttpd are)
 * and only by `oci create` of a bundle that has a profile: hutch does not
 * link it, and a sandbox never runs it. Syscall names this libseccomp does
 * not know are skipped, as runc and crun do; only this machine's native
 * architecture is compiled (a process of another one is killed by the
 * filter, libseccomp's default for a foreign architecture).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <seccomp.h>

#include "cleanup.h"
#include "oci-internal.h"

#ifndef HUTCH_SECCOMP_SONAME
#error "HUTCH_SECCOMP_SONAME must name libseccomp's SONAME (set by CMakeLists.txt)"
#endif

struct sc_lib {
	void *handle;
	scmp_filter_ctx (*init)(uint32_t);
	void (*release)(scmp_filter_ctx);
	int (*resolve)(const char *);
	int (*rule_add_array)(scmp_filter_ctx, uint32_t, int, unsigned int,
	                      const struct scmp_arg_cmp *);
	int (*export_bpf)(const scmp_filter_ctx, int);
};

static int load(struct sc_lib *l, struct hutch_err *err)
{
	const struct {
		const char *name;
		void **slot;
	} syms[] = {
		{ "seccomp_init", (void **)&l->init },
		{ "seccomp_release", (void **)&l->release },
		{ "seccomp_syscall_resolve_name", (void **)&l->resolve },
		{ "seccomp_rule_add_array", (void **)&l->rule_add_array },
		{ "seccomp_export_bpf", (void **)&l->export_bpf },
	};

	l->handle = dlopen(HUTCH_SECCOMP_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!l->handle)
		return hutch_err_set(err, -ELIBACC,
		                     "linux.seccomp: a profile needs %s (install libseccomp2)",
		                     HUTCH_SECCOMP_SONAME);
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(l->handle, syms[i].name);
		if (!*syms[i].slot)
			return hutch_err_set(err, -ELIBBAD, "%s has no '%s'", HUTCH_SECCOMP_SONAME,
			                     syms[i].name);
	}
	return 0;
}

static uint32_t action(enum hutch_oci_sc_action a, uint32_t eno)
{
	switch (a) {
	case HUTCH_OCI_SC_ALLOW:
		return SCMP_ACT_ALLOW;
	case HUTCH_OCI_SC_ERRNO:
		return SCMP_ACT_ERRNO(eno);
	case HUTCH_OCI_SC_KILL_PROCESS:
		return SCMP_ACT_KILL_PROCESS;
	case HUTCH_OCI_SC_TRAP:
		return SCMP_ACT_TRAP;
	case HUTCH_OCI_SC_LOG:
		return SCMP_ACT_LOG;
	case HUTCH_OCI_SC_KILL_THREAD:
	default:
		return SCMP_ACT_KILL;
	}
}

static int add_rules(const struct sc_lib *l, scmp_filter_ctx ctx,
                     const struct hutch_oci_seccomp *sc, struct hutch_err *err)
{
	for (size_t i = 0; i < sc->nrules; i++) {
		const struct hutch_oci_sc_rule *rule = &sc->rules[i];
		struct scmp_arg_cmp args[HUTCH_OCI_SECCOMP_MAX_ARGS];
		uint32_t act = action(rule->action, rule->errno_ret);

		for (size_t k = 0; k < rule->nargs; k++)
			args[k] = (struct scmp_arg_cmp){
				.arg = rule->args[k].index,
				.op = (enum scmp_compare)rule->args[k].op,
				.datum_a = rule->args[k].value,
				.datum_b = rule->args[k].value_two,
			};
		for (size_t n = 0; n < rule->nnames; n++) {
			int nr = l->resolve(rule->names[n]), r;

			if (nr == __NR_SCMP_ERROR)
				continue; /* unknown here: skipped, as runc does */
			r = l->rule_add_array(ctx, act, nr, (unsigned int)rule->nargs, args);
			/* -EACCES: the rule's action is the default one; libseccomp
			 * refuses such a rule, which changes nothing. */
			if (r < 0 && r != -EACCES)
				return hutch_err_set_errno(err, r,
				                           "linux.seccomp.syscalls[%zu]: %.64s", i,
				                           rule->names[n]);
		}
	}
	return 0;
}

/* The exported program: read back from a memfd. */
static int export(const struct sc_lib *l, scmp_filter_ctx ctx, struct sock_fprog *ret,
                  struct hutch_err *err)
{
	_cleanup_close_ int fd = memfd_create("hutch-seccomp", MFD_CLOEXEC);
	struct sock_filter *prog;
	off_t size;
	int r;

	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "linux.seccomp: memfd");
	r = l->export_bpf(ctx, fd);
	if (r < 0)
		return hutch_err_set_errno(err, r, "linux.seccomp: export the program");
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % (off_t)sizeof(*prog) != 0 ||
	    size / (off_t)sizeof(*prog) > BPF_MAXINSNS)
		return hutch_err_set(err, -E2BIG, "linux.seccomp: the program has %lld bytes",
		                     (long long)size);
	prog = malloc((size_t)size);
	if (!prog)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	if (pread(fd, prog, (size_t)size, 0) != size) {
		free(prog);
		return hutch_err_set_errno(err, -EIO, "linux.seccomp: read the program");
	}
	ret->filter = prog;
	ret->len = (unsigned short)(size / (off_t)sizeof(*prog));
	return 0;
}

int hutch_oci_seccomp_compile(const struct hutch_oci_seccomp *sc, struct sock_fprog *ret,
                              struct hutch_err *err)
{
	struct sc_lib l = { 0 };
	scmp_filter_ctx ctx = NULL;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!sc->present)
		return 0;
	r = load(&l, err);
	if (r >= 0) {
		ctx = l.init(action(sc->default_action, sc->default_errno));
		if (!ctx)
			r = hutch_err_set(err, -EINVAL,
			                  "linux.seccomp.defaultAction: refused by "
			                  "libseccomp");
	}
	if (r >= 0)
		r = add_rules(&l, ctx, sc, err);
	if (r >= 0)
		r = export(&l, ctx, ret, err);
	if (ctx)
		l.release(ctx);
	/* The library stays loaded: nothing of it runs again, and create
	 * forks the supervisor next. */
	return r;
}
