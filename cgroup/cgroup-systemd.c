/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's own systemd unit: a transient scope "hutch-<id>.scope" with
 * Delegate=yes holding its supervisor, made through systemd's D-Bus API
 * (StartTransientUnit) with sd-bus, on systemd's private socket (root:
 * /run/systemd/private; an ordinary user: their manager's
 * $XDG_RUNTIME_DIR/systemd/private), so no bus daemon is needed.
 *
 * Why: run from a plain service, a login session or a scope without
 * delegation, hutch's own cgroup cannot give controllers to children, and
 * a cgroup made beside it belongs to no unit systemd knows: after a
 * daemon-reload or a unit with CPUQuota= starts, systemd turns the cpu
 * controller off there. In a delegated unit of its own the subtree is
 * hutch's (cgroup-place.c moves the supervisor into its leaf and nests the
 * sandbox beside it); the scope ends when the supervisor does.
 *
 * libsystemd is dlopen()ed by the supervisor only when a scope is needed:
 * linked, it and its dependencies (lz4, zstd, lzma, gcrypt, capability)
 * would cost every CLI call loader time, as libnftables did (see
 * docs/architecture.md).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "cleanup.h"
#include "fdutil.h"
#include "util.h"

#include "cgroup-systemd.h"
#include "cgroup-util.h"

#define SCOPE_WAIT_MS 5000

/* What we take from libsystemd: loaded per call, never kept. */
struct sdbus {
	void *lib;
	int (*bus_new)(sd_bus **);
	int (*set_address)(sd_bus *, const char *);
	int (*start)(sd_bus *);
	sd_bus *(*close_unref)(sd_bus *);
	int (*new_call)(sd_bus *, sd_bus_message **, const char *, const char *, const char *,
	                const char *);
	int (*append)(sd_bus_message *, const char *, ...);
	int (*open)(sd_bus_message *, char, const char *);
	int (*close)(sd_bus_message *);
	int (*call)(sd_bus *, sd_bus_message *, uint64_t, sd_bus_error *, sd_bus_message **);
	sd_bus_message *(*msg_unref)(sd_bus_message *);
	void (*error_free)(sd_bus_error *);
};

#define SDBUS_SYMBOLS(X)                            \
	X(sd_bus_new, bus_new)                      \
	X(sd_bus_set_address, set_address)          \
	X(sd_bus_start, start)                      \
	X(sd_bus_flush_close_unref, close_unref)    \
	X(sd_bus_message_new_method_call, new_call) \
	X(sd_bus_message_append, append)            \
	X(sd_bus_message_open_container, open)      \
	X(sd_bus_message_close_container, close)    \
	X(sd_bus_call, call)                        \
	X(sd_bus_message_unref, msg_unref)          \
	X(sd_bus_error_free, error_free)

static int sdbus_load(struct sdbus *f)
{
	/* The names as one string pool and the slots' offsets: no pointer
	 * for the dynamic loader to relocate at every start (base/dl.h). */
#define X(fn, field) #fn "\0"
	static const char names[] = SDBUS_SYMBOLS(X);
#undef X
	static const size_t offsets[] = {
#define X(fn, field) offsetof(struct sdbus, field),
		SDBUS_SYMBOLS(X)
#undef X
	};
	const char *name = names;

	memset(f, 0, sizeof(*f));
	f->lib = dlopen(HUTCH_SYSTEMD_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!f->lib)
		return -ENOENT;
	for (size_t i = 0; i < ELEMENTSOF(offsets); i++, name += strlen(name) + 1) {
		void *p = dlsym(f->lib, name);

		if (!p) {
			dlclose(f->lib);
			return -ENOENT;
		}
		memcpy((char *)f + offsets[i], &p, sizeof(p));
	}
	return 0;
}

int hutch_cgroup_systemd_address(char *ret, size_t size)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	char path[4096];

	if (access("/run/systemd/system", F_OK) < 0)
		return -ENOENT; /* systemd is not the init system */
	if (geteuid() == 0)
		snprintf(path, sizeof(path), "/run/systemd/private");
	else if (x && x[0] == '/')
		snprintf(path, sizeof(path), "%s/systemd/private", x);
	else
		return -ENOENT;
	if (access(path, W_OK) < 0)
		return -errno;
	if ((size_t)snprintf(ret, size, "unix:path=%s", path) >= size)
		return -ENAMETOOLONG;
	return 0;
}

/* StartTransientUnit(name, "fail", [PIDs, Delegate, Description], []). */
static int start_scope(struct sdbus *f, sd_bus *bus, const char *unit, pid_t pid,
                       struct hutch_err *err)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *m = NULL, *reply = NULL;
	char desc[64];
	int r;

	snprintf(desc, sizeof(desc), "hutch sandbox %.40s", unit);
	r = f->new_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
	                "org.freedesktop.systemd1.Manager", "StartTransientUnit");
	if (r >= 0)
		r = f->append(m, "ss", unit, "fail");
	if (r >= 0)
		r = f->open(m, 'a', "(sv)");
	if (r >= 0)
		r = f->append(m, "(sv)(sv)(sv)(sv)", "PIDs", "au", 1, (uint32_t)pid, "Delegate",
		              "b", 1, "Description", "s", desc, "CollectMode", "s",
		              "inactive-or-failed");
	if (r >= 0)
		r = f->close(m);
	if (r >= 0)
		r = f->append(m, "a(sa(sv))", 0);
	if (r < 0) {
		f->msg_unref(m);
		return hutch_err_set_errno(err, r, "systemd: build StartTransientUnit");
	}
	r = f->call(bus, m, 10 * 1000000ULL, &e, &reply);
	if (r < 0)
		hutch_err_set(err, r, "systemd: start '%s' with Delegate=yes: %.150s", unit,
		              e.message ? e.message : strerror(-r));
	f->error_free(&e);
	f->msg_unref(reply);
	f->msg_unref(m);
	return r < 0 ? r : 0;
}

/* Until /proc/self/cgroup names the unit: the job moves us asynchronously. */
static int wait_in_unit(const char *unit, struct hutch_err *err)
{
	int64_t deadline = hutch_now_mono_ms() + SCOPE_WAIT_MS;

	for (;;) {
		char buf[4096], want[300];
		ssize_t n = hutch_read_file_at(AT_FDCWD, "/proc/self/cgroup", buf, sizeof(buf));

		snprintf(want, sizeof(want), "/%s\n", unit);
		if (n > 0 && strstr(buf, want))
			return 0;
		if (hutch_now_mono_ms() > deadline)
			return hutch_err_set(err, -ETIMEDOUT,
			                     "systemd: not moved into '%s' after %d ms", unit,
			                     SCOPE_WAIT_MS);
		hutch_cgroup_sleep_ms(1);
	}
}

int hutch_cgroup_systemd_scope(const char *address, const char *name, struct hutch_err *err)
{
	struct sdbus f;
	sd_bus *bus = NULL;
	char unit[128];
	int r;

	if (!hutch_cgroup_name_is_valid(name))
		return hutch_err_set(err, -EINVAL, "invalid unit name '%s'", name);
	snprintf(unit, sizeof(unit), CG_PREFIX "%s.scope", name);
	r = sdbus_load(&f);
	if (r < 0)
		return hutch_err_set(err, r,
		                     "systemd: cannot load " HUTCH_SYSTEMD_SONAME
		                     " (package libsystemd0) for a delegated scope");
	r = f.bus_new(&bus);
	if (r >= 0)
		r = f.set_address(bus, address);
	if (r >= 0)
		r = f.start(bus);
	if (r < 0)
		hutch_err_set_errno(err, r, "systemd: connect to '%s'", address);
	else
		r = start_scope(&f, bus, unit, getpid(), err);
	if (bus)
		f.close_unref(bus);
	dlclose(f.lib);
	return r < 0 ? r : wait_in_unit(unit, err);
}
