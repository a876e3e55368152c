/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bundle's hooks run (runtime-spec config.md, "POSIX-platform Hooks";
 * parsed by spec-hooks.c), each with the container's state JSON on its
 * stdin, its stdout and stderr kept for the error, bounded by its timeout
 * (then its process group is killed):
 *
 *   prestart, createRuntime   create, by the supervisor once the sandbox is
 *                             built, in the runtime's namespaces (the
 *                             caller's: root or the rootless user);
 *   createContainer           right after, in the container's namespaces
 *                             (user, mount, pid, ...; as its root), the
 *                             program opened in the runtime's;
 *   startContainer            start, by the supervisor before the main
 *                             process, in the container's namespaces, the
 *                             program resolved in the container's root;
 *   poststart                 start, by `oci start`, once running;
 *   poststop                  delete, by `oci delete`.
 *
 * A failing prestart, createRuntime or createContainer hook fails create
 * (the sandbox is torn down, the state dir removed); a failing
 * startContainer hook stops the container before its process runs and
 * fails start; poststart and poststop failures are logged only. Hooks are
 * the engine's (whoever wrote config.json: containerd, podman), never the
 * container's, so they run with the caller's rights, as runc's do.
 *
 * hutch builds the container's root and pivots into it in init before the
 * supervisor hears "ready", so the create hooks run after pivot_root, not
 * before it as runc's: the container's mounts are in place, and a
 * createContainer hook opened from the host has its ELF or #! interpreter
 * resolved in the container (a static program runs anywhere).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "oci-internal.h"
#include "syscalls.h"

/* The container's namespaces a hook in it joins, user first or last. */
static const struct {
	const char *name;
	int type;
} container_ns[] = {
	{ "user", CLONE_NEWUSER },
	{ "mnt", CLONE_NEWNS },
	{ "ipc", CLONE_NEWIPC },
	{ "uts", CLONE_NEWUTS },
	{ "net", CLONE_NEWNET },
	{ "cgroup", CLONE_NEWCGROUP },
	/* the one the container's process is PID 1 of, nested in init's
	 * (init/pidns.c); init's own when none is */
	{ "pid_for_children", CLONE_NEWPID },
};
#define NS_N (sizeof(container_ns) / sizeof(container_ns[0]))

struct hook_run {
	const struct hutch_oci_hook *h;
	enum hutch_oci_hook_phase phase;
	size_t index;
	const char *state;
	pid_t ns_pid; /* > 0: in this process's namespaces (the container's) */
	int ns[NS_N];
	int exe; /* createContainer: the program, opened in the runtime's namespaces */
};

static __attribute__((noreturn)) void child_exec(const struct hook_run *r, int in, int out)
{
	char *const path_only[] = { r->h->path, NULL }, *const no_env[] = { NULL };
	char *const *argv = r->h->nargs ? r->h->args : path_only;
	char *const *envp = r->h->nenv ? r->h->env : no_env;
	sigset_t none;

	/* The supervisor blocks what its signalfd reads. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		(void)signal(sig, SIG_DFL);
	/* in and out are memfds above 2 (0-2 are always open). */
	if (dup3(in, 0, 0) < 0 || dup3(out, 1, 0) < 0 || /* lint-fds: ok */
	    dup3(out, 2, 0) < 0)                         /* lint-fds: ok */
		_exit(126);
	/* A #! script opened by fd is read by its interpreter as /dev/fd/3:
	 * that fd must survive the exec. */
	if (r->exe == 3 ? fcntl(3, F_SETFD, 0) < 0
	                : r->exe >= 0 && dup3(r->exe, 3, 0) < 0) /* lint-fds: ok */
		_exit(126);
	(void)sys_close_range(r->exe >= 0 ? 4 : 3, ~0U, 0);
	if (r->exe >= 0)
		syscall(SYS_execveat, 3, "", argv, envp, AT_EMPTY_PATH);
	else
		execve(r->h->path, argv, envp);
	dprintf(2, "exec: %s", strerror(errno));
	_exit(127);
}

/* Join the container's namespaces: host root joins the others first (a
 * CNI network namespace is the host user namespace's), a rootless caller
 * its user namespace first (it has no capability outside). */
static int join_container(const struct hook_run *r)
{
	bool user_first = geteuid() != 0;

	if (user_first && setns(r->ns[0], CLONE_NEWUSER) < 0)
		return -errno;
	for (size_t k = 1; k < NS_N; k++)
		if (r->ns[k] >= 0 && setns(r->ns[k], container_ns[k].type) < 0)
			return -errno;
	if (!user_first && setns(r->ns[0], CLONE_NEWUSER) < 0)
		return -errno;
	/* Root of the container (its uid 0), as runc's hooks are. */
	(void)setgroups(0, NULL);
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* In the container's namespaces; its pid namespace holds the hook's
 * children, so the hook is our child, killed with us. */
static __attribute__((noreturn)) void child_in_container(const struct hook_run *r, int in, int out)
{
	pid_t pid;
	int status, e = join_container(r);

	if (e < 0) {
		dprintf(out, "join the container's namespaces: %s", strerror(-e));
		_exit(126);
	}
	pid = fork();
	if (pid < 0)
		_exit(126);
	if (pid == 0) {
		/* Its parent is outside its pid namespace (getppid() is 0):
		 * no race check; the parent waits for it, never gone first
		 * unless killed, and then so is the group. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
			_exit(126);
		if (chdir("/") < 0)
			_exit(126);
		child_exec(r, in, out);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			_exit(126);
	hutch_exit_like(status);
}

static int open_container_ns(struct hook_run *r, const char *what, struct hutch_err *err)
{
	for (size_t k = 0; k < NS_N; k++) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)r->ns_pid,
		         container_ns[k].name);
		r->ns[k] = open(path, O_RDONLY | O_CLOEXEC);
		if (r->ns[k] < 0)
			return hutch_err_set_errno(err, -errno, "%s: the container's %s namespace",
			                           what, container_ns[k].name);
	}
	return 0;
}

/* "exited with status N" or "killed by signal N", then what it printed. */
static int hook_failed(int out, int status, const char *what, struct hutch_err *err)
{
	char said[120] = "";
	ssize_t n = pread(out, said, sizeof(said) - 1, 0);

	said[n > 0 ? n : 0] = '\0';
	for (char *c = said; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	while (n > 0 && said[n - 1] == ' ')
		said[--n] = '\0';
	if (WIFSIGNALED(status))
		return hutch_err_set(err, -ECHILD, "%s: killed by signal %d%s%s", what,
		                     WTERMSIG(status), said[0] ? ": " : "", said);
	return hutch_err_set(err, -ECHILD, "%s: exited with status %d%s%s", what,
	                     WEXITSTATUS(status), said[0] ? ": " : "", said);
}

/* Wait for pid (its pidfd), at most the hook's timeout: then its process
 * group is killed. */
static int wait_hook(const struct hook_run *r, pid_t pid, int *status, const char *what,
                     struct hutch_err *err)
{
	_cleanup_close_ int pidfd = sys_pidfd_open(pid, 0);
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
	int timeout = r->h->timeout ? (int)r->h->timeout * 1000 : -1, q = 1;

	if (pidfd >= 0)
		while ((q = poll(&pfd, 1, timeout)) < 0 && errno == EINTR)
			;
	if (q == 0 || pidfd < 0) {
		(void)kill(-pid, SIGKILL);
		(void)kill(pid, SIGKILL);
	}
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return hutch_err_set_errno(err, -errno, "%s: wait", what);
	if (q == 0)
		return hutch_err_set(err, -ETIMEDOUT, "%s: timed out after %u s (killed)", what,
		                     r->h->timeout);
	return pidfd < 0 ? hutch_err_set(err, -ENOSYS, "%s: no pidfd", what) : 0;
}

static int run_hook(struct hook_run *r, struct hutch_err *err)
{
	_cleanup_close_ int in = memfd_create("hook-state", MFD_CLOEXEC),
	                    out = memfd_create("hook-output", MFD_CLOEXEC);
	char what[160];
	pid_t pid;
	int status = 0, q;

	snprintf(what, sizeof(what), "hooks.%s[%zu] '%.100s'", hutch_oci_hook_names[r->phase],
	         r->index, r->h->path);
	if (in < 0 || out < 0 || hutch_write_all(in, r->state, strlen(r->state)) < 0 ||
	    lseek(in, 0, SEEK_SET) < 0)
		return hutch_err_set_errno(err, -errno, "%s: its stdin", what);
	pid = fork();
	if (pid < 0)
		return hutch_err_set_errno(err, -errno, "%s: fork", what);
	if (pid == 0) {
		(void)setpgid(0, 0);
		if (r->ns_pid > 0)
			child_in_container(r, in, out);
		child_exec(r, in, out);
	}
	(void)setpgid(pid, pid);
	q = wait_hook(r, pid, &status, what, err);
	if (q < 0)
		return q;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return hook_failed(out, status, what, err);
	return 0;
}

int hutch_oci_hooks_run(const struct hutch_oci_hooks *hooks, enum hutch_oci_hook_phase phase,
                        const char *state, pid_t ns_pid, struct hutch_err *err)
{
	struct hook_run r = { .phase = phase, .state = state, .ns_pid = ns_pid, .exe = -EBADF };
	int q = 0;

	for (size_t k = 0; k < NS_N; k++)
		r.ns[k] = -EBADF;
	if (ns_pid > 0 && open_container_ns(&r, hutch_oci_hook_names[phase], err) < 0)
		q = err->code;
	for (size_t i = 0; q >= 0 && i < hooks->n[phase]; i++) {
		r.h = &hooks->hooks[phase][i];
		r.index = i;
		/* createContainer's program is the runtime's, startContainer's
		 * the container's. */
		if (phase == HUTCH_OCI_HOOK_CREATE_CONTAINER &&
		    (r.exe = open(r.h->path, O_PATH | O_CLOEXEC)) < 0)
			q = hutch_err_set_errno(err, -errno, "hooks.%s[%zu].path: '%.100s'",
			                        hutch_oci_hook_names[phase], i, r.h->path);
		else
			q = run_hook(&r, err);
		closep(&r.exe);
	}
	hutch_close_many(r.ns, NS_N);
	return q;
}

/* The state JSON as `state` prints it; status and init_pid replaced when
 * given (the create hooks: "creating", before status.json says more). */
static char *state_text(const struct hutch_oci_paths *p, const char *id, const char *status,
                        pid_t init_pid)
{
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	_cleanup_cjson_ cJSON *j = NULL;

	if (hutch_oci_state_read(p, id, &st, &err) < 0)
		return NULL;
	if (status)
		snprintf(st.status, sizeof(st.status), "%s", status);
	if (init_pid > 0)
		st.init_pid = init_pid;
	j = hutch_oci_state_json(&st, id);
	hutch_oci_state_done(&st);
	return j ? cJSON_PrintUnformatted(j) : NULL;
}

/* container.h's run_hooks, in the supervisor. A startContainer failure is
 * also left in ROOT/ID/hook-error for `oci start` to report. */
int hutch_oci_hooks_supervisor(const struct hutch_container *ct,
                               enum hutch_container_hook_point point, pid_t init_pid,
                               struct hutch_err *err)
{
	const struct hutch_oci_hooks_ctx *c = ct->hooks_ctx;
	bool create = point == HUTCH_CONTAINER_HOOKS_CREATE;
	_cleanup_free_ char *state =
	        state_text(&c->paths, c->id, create ? "creating" : NULL, init_pid);
	int r = 0;

	if (!state)
		return hutch_err_set(err, -EIO, "hooks: the container's state");
	if (create) {
		if ((r = hutch_oci_hooks_run(c->hooks, HUTCH_OCI_HOOK_PRESTART, state, 0, err)) >=
		            0 &&
		    (r = hutch_oci_hooks_run(c->hooks, HUTCH_OCI_HOOK_CREATE_RUNTIME, state, 0,
		                             err)) >= 0)
			r = hutch_oci_hooks_run(c->hooks, HUTCH_OCI_HOOK_CREATE_CONTAINER, state,
			                        init_pid, err);
		return r;
	}
	r = hutch_oci_hooks_run(c->hooks, HUTCH_OCI_HOOK_START_CONTAINER, state, init_pid, err);
	if (r < 0) {
		char path[sizeof(c->paths.dir) + 16];

		snprintf(path, sizeof(path), "%s/hook-error", c->paths.dir);
		(void)hutch_write_file_at(AT_FDCWD, path, err->msg, 0600);
	}
	return r;
}

int hutch_oci_hooks_after(const struct hutch_oci_paths *p, const char *id,
                          const struct hutch_oci_state *st, enum hutch_oci_hook_phase phase)
{
	struct hutch_oci_hooks hooks;
	struct hutch_err err = { 0 };
	_cleanup_free_ char *state = NULL;
	int r;

	if (!cJSON_GetObjectItemCaseSensitive(st->doc, "hooks"))
		return 0;
	r = hutch_oci_hooks_parse(cJSON_GetObjectItemCaseSensitive(st->doc, "hooks"), &hooks, &err);
	if (r >= 0 && hooks.n[phase] && !(state = state_text(p, id, NULL, 0)))
		r = hutch_err_set(&err, -EIO, "hooks: the container's state");
	/* Every hook of the phase runs; a failure is logged, not fatal. */
	for (size_t i = 0; r >= 0 && i < hooks.n[phase]; i++) {
		struct hook_run run = { .h = &hooks.hooks[phase][i],
			                .phase = phase,
			                .index = i,
			                .state = state,
			                .exe = -EBADF };
		if (run_hook(&run, &err) < 0)
			(void)hutch_oci_fail("%s (ignored)", err.msg);
	}
	if (r < 0)
		(void)hutch_oci_fail("%s (ignored)", err.msg);
	hutch_oci_hooks_done(&hooks);
	return 0;
}
