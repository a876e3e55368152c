/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kill, delete, ps, features and run (see oci.h).
 *
 * kill: a running container's process is signalled by its host pid through
 * a pidfd, after checking that the pid still names the process the
 * supervisor recorded (its start time, as runc checks its init's), so a
 * reused pid is never signalled. A created container (no process yet) is
 * ended through its supervisor (SIGTERM: it tears the sandbox down and
 * exits as killed). --all with SIGKILL kills the sandbox's init, and with
 * it every process of the pid namespace; --all with another signal
 * signals every process of the pid namespace but hutch's init. In a pod's
 * shared pid namespace "every process" is every descendant of the
 * container's init (the others are the pod's other containers').
 *
 * The wording and exit status of kill and delete on stopped, missing and
 * half-made containers are runc's, because engines parse them: containerd's
 * runc shim (checkKillError) takes "container not running", "no such
 * process" and "does not exist" as "already gone" and retries anything
 * else forever; its delete ignores "does not exist". So: kill of a stopped
 * container fails with "container not running", kill --all of one
 * succeeds (runc 1.2's rule; 1.1 signals the empty cgroup), kill and
 * delete of a missing one fail with "does not exist", delete of a created
 * one kills and removes it, delete of a half-made one (no state.json)
 * removes its directory and still says "does not exist", --force makes
 * that a success (docs/kubernetes.md, "runc's contract").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "oci-internal.h"
#include "state.h"
#include "syscalls.h"

#define WAIT_MS 10000

/* The names in the rows, not pointers: no relocation, the table stays in
 * read-only data the dynamic loader never writes (issue 31: CLI start). */
static const struct {
	char name[8];
	int sig;
} signals[] = {
	{ "HUP", SIGHUP },       { "INT", SIGINT },   { "QUIT", SIGQUIT },   { "ILL", SIGILL },
	{ "TRAP", SIGTRAP },     { "ABRT", SIGABRT }, { "BUS", SIGBUS },     { "FPE", SIGFPE },
	{ "KILL", SIGKILL },     { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV },   { "USR2", SIGUSR2 },
	{ "PIPE", SIGPIPE },     { "ALRM", SIGALRM }, { "TERM", SIGTERM },   { "CHLD", SIGCHLD },
	{ "CONT", SIGCONT },     { "STOP", SIGSTOP }, { "TSTP", SIGTSTP },   { "TTIN", SIGTTIN },
	{ "TTOU", SIGTTOU },     { "URG", SIGURG },   { "XCPU", SIGXCPU },   { "XFSZ", SIGXFSZ },
	{ "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH }, { "IO", SIGIO },
	{ "PWR", SIGPWR },       { "SYS", SIGSYS },
};

static int parse_signal(const char *s)
{
	char *end;
	long n = strtol(s, &end, 10);

	if (*s && *end == '\0')
		return n >= 0 && n < NSIG ? (int)n : -1; /* 0: only asks, as runc's */
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (!strcmp(s, signals[i].name))
			return signals[i].sig;
	return -1;
}

/* The start time (clock ticks since boot) of a live pid, 0 if unknown. */
static unsigned long long start_time(pid_t pid)
{
	char path[64], buf[2048], *p;
	unsigned long long t = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (hutch_read_file_at(AT_FDCWD, path, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')))
		return 0;
	if (sscanf(p + 1,
	           " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
	           "%*d %llu",
	           &t) != 1)
		return 0;
	return t;
}

/* Signal pid through a pidfd if it is still the process started at start
 * (0: not checked). */
static int signal_pid(pid_t pid, unsigned long long start, int sig)
{
	_cleanup_close_ int pidfd = sys_pidfd_open(pid, 0);

	if (pidfd < 0)
		return -errno;
	if (start && start_time(pid) != start)
		return -ESRCH;
	return sys_pidfd_send_signal(pidfd, sig, NULL, 0) < 0 ? -errno : 0;
}

/* The parent of a live pid as the host sees it, 0 if unknown. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[2048], *p;
	int ppid = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (hutch_read_file_at(AT_FDCWD, path, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')))
		return 0;
	return sscanf(p + 1, " %*c %d", &ppid) == 1 ? (pid_t)ppid : 0;
}

/* Whether pid descends from init. A pod's pid namespace (the CRI's POD
 * mode) holds its other containers' processes too; init is the
 * subreaper of its own, so each has it as an ancestor. */
static bool descends(pid_t pid, pid_t init)
{
	for (int depth = 0; depth < 4096 && pid > 1; depth++)
		if ((pid = parent_of(pid)) == init)
			return true;
	return false;
}

/* Whether init is PID 1 of its pid namespace (its own), not a pod
 * member's init in the pod's (the last NSpid field). */
static bool is_ns_init(pid_t init)
{
	char path[64], buf[4096], *line, *last;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)init);
	if (hutch_read_file_at(AT_FDCWD, path, buf, sizeof(buf)) <= 0 ||
	    !(line = strstr(buf, "\nNSpid:")))
		return true;
	line += 7;
	*strchrnul(line, '\n') = '\0';
	last = strrchr(line, '\t');
	return !last || strtol(last + 1, NULL, 10) == 1;
}

/* Whether the pid namespace link other (n bytes) is ns or inner. */
static bool same_ns(const char *other, ssize_t n, const char *ns, const char *inner)
{
	return n > 0 && (((size_t)n == strlen(ns) && !memcmp(other, ns, (size_t)n)) ||
	                 ((size_t)n == strlen(inner) && !memcmp(other, inner, (size_t)n)));
}

/* Call fn(pid, arg) for every process of init's in its pid namespace, or
 * in the container's nested in it (init/pidns.c: init's pid_for_children),
 * its init first, then its descendants, as the host's /proc lists them;
 * stops at fn's first negative return. */
static int for_each_ns_pid(pid_t init, int (*fn)(pid_t pid, void *arg), void *arg)
{
	_cleanup_closedir_ DIR *d = NULL;
	char ns[64], inner[64] = "", path[300], other[64];
	struct dirent *de;
	ssize_t n;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)init);
	n = readlink(path, ns, sizeof(ns) - 1);
	if (n <= 0)
		return -ESRCH;
	ns[n] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/ns/pid_for_children", (int)init);
	n = readlink(path, inner, sizeof(inner) - 1);
	inner[n > 0 ? n : 0] = '\0';
	if (!(d = opendir("/proc")))
		return -errno;
	if ((r = fn(init, arg)) < 0)
		return r;
	while ((de = readdir(d))) {
		pid_t pid;
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = (pid_t)strtol(de->d_name, NULL, 10);
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
		n = readlink(path, other, sizeof(other) - 1);
		if (pid == init || !same_ns(other, n, ns, inner) || !descends(pid, init))
			continue;
		if ((r = fn(pid, arg)) < 0)
			return r;
	}
	return 0;
}

struct signal_all {
	pid_t init;
	int sig, sent;
};

static int signal_one(pid_t pid, void *arg)
{
	struct signal_all *a = arg;

	if (pid == a->init)
		return 0;
	if (signal_pid(pid, 0, a->sig) == 0)
		a->sent++;
	return 0;
}

static int not_running(const char *id)
{
	return hutch_oci_fail("cannot kill container %s: container not running", id);
}

static int do_kill(const char *id, int sig, bool all)
{
	struct hutch_oci_paths p;
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	bool running;
	int r;

	if (hutch_oci_paths_init(hutch_oci_opts.root, id, &p, &err) < 0 ||
	    hutch_oci_state_read(&p, id, &st, &err) < 0)
		return hutch_oci_fail("%s", err.msg);
	hutch_oci_state_done(&st);
	if (!strcmp(st.status, "stopped"))
		return all ? 0 : not_running(id);
	/* A paused one too: the signal waits for resume (v1's freezer) or,
	 * SIGKILL on v2, ends it frozen, as under runc. */
	running = !strcmp(st.status, "running") || !strcmp(st.status, "paused");
	if (running && all && sig == SIGKILL && st.init_pid > 0) {
		/* PID 1's end kills its namespace; a pod member's init's does
		 * not: its processes first, while they descend from it. */
		struct signal_all a = { .init = st.init_pid, .sig = SIGKILL };
		if (!is_ns_init(st.init_pid))
			(void)for_each_ns_pid(st.init_pid, signal_one, &a);
		r = signal_pid(st.init_pid, 0, SIGKILL);
	} else if (running && all && st.init_pid > 0) {
		struct signal_all a = { .init = st.init_pid, .sig = sig };
		r = for_each_ns_pid(st.init_pid, signal_one, &a);
		r = r < 0 ? r : a.sent ? 0 : -ESRCH;
	} else if (running && st.process_pid > 0) {
		r = signal_pid(st.process_pid, st.process_start, sig);
	} else if (st.pid > 0) {
		/* created: the supervisor ends it; signal 0 only asks whether
		 * it is there */
		r = signal_pid(st.pid, 0, sig == 0 ? 0 : SIGTERM);
	} else {
		r = -ESRCH;
	}
	if (r == -ESRCH)
		return all ? 0 : not_running(id);
	if (r < 0)
		return hutch_oci_fail("kill container %s: %s", id, strerror(-r));
	return 0;
}

int hutch_oci_cmd_kill(int argc, char **argv)
{
	bool all = false;
	int i = 1, sig = SIGTERM;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--all") || !strcmp(argv[i], "-a"))
			all = true;
		else
			return hutch_oci_fail("kill: unknown option '%s'", argv[i]);
	}
	if (i >= argc || argc - i > 2)
		return hutch_oci_fail("usage: kill [--all] CONTAINER-ID [SIGNAL]");
	if (argc - i == 2 && (sig = parse_signal(argv[i + 1])) < 0)
		return hutch_oci_fail("kill: unknown signal '%s'", argv[i + 1]);
	return do_kill(argv[i], sig, all);
}

static void on_alarm(int sig)
{
	(void)sig; /* only to interrupt flock() */
}

/* Wait for the supervisor to let go of the lock: it has exited, or its
 * teardown child is done (exit_early() in supervisor/container.c). A
 * blocking flock(), woken by the kernel when the lock goes; an interval
 * timer interrupts it (no SA_RESTART) every 100 ms to check the
 * deadline. */
static bool wait_stopped(const struct hutch_oci_paths *p)
{
	_cleanup_close_ int fd = open(p->lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	struct itimerval it = { .it_interval = { 0, 100000 }, .it_value = { 0, 100000 } };
	struct itimerval off = { 0 };
	int64_t deadline = hutch_now_mono_ms() + WAIT_MS;
	int r;

	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) == 0)
		return true;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, &old) < 0 || setitimer(ITIMER_REAL, &it, NULL) < 0)
		return false;
	while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR && hutch_now_mono_ms() < deadline)
		;
	(void)setitimer(ITIMER_REAL, &off, NULL);
	(void)sigaction(SIGALRM, &old, NULL);
	return r == 0;
}

/*
 * delete --force of a container that does not exist succeeds, as runc's
 * and crun's (containerd's shim runs it in its cleanup, after the delete
 * that removed it). A directory without state.json (a create that died
 * early) goes, unless a create still holds its lock.
 */
static int delete_missing(const struct hutch_oci_paths *p)
{
	_cleanup_close_ int fd = open(p->lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int r;

	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
		return 0;
	r = hutch_rm_rf_at(AT_FDCWD, p->dir);
	if (r < 0)
		return hutch_oci_fail("delete: remove '%s': %s", p->dir, strerror(-r));
	return 0;
}

int hutch_oci_cmd_delete(int argc, char **argv)
{
	struct hutch_oci_paths p;
	struct hutch_oci_state st, after;
	struct hutch_err err = { 0 };
	bool force = false;
	const char *id;
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f"))
			force = true;
		else
			return hutch_oci_fail("delete: unknown option '%s'", argv[i]);
	}
	if (i != argc - 1)
		return hutch_oci_fail("usage: delete [--force] CONTAINER-ID");
	id = argv[i];
	if (hutch_oci_paths_init(hutch_oci_opts.root, id, &p, &err) < 0)
		return hutch_oci_fail("%s", err.msg);
	if (hutch_oci_state_read(&p, id, &st, &err) < 0) {
		/* runc removes a half-made one and still says it does not
		 * exist (containerd's delete takes that as done). */
		if (delete_missing(&p))
			return 1;
		return force ? 0 : hutch_oci_fail("%s", err.msg);
	}
	hutch_oci_state_done(&st);
	/* A created one is killed and removed as runc does (no process
	 * ran); a running or paused one only with --force. */
	if (strcmp(st.status, "stopped") != 0) {
		if (!force && strcmp(st.status, "created") != 0)
			return hutch_oci_fail("cannot delete container %s that is not stopped: %s "
			                      "(--force kills it)",
			                      id, st.status);
		if (st.pid > 0)
			(void)signal_pid(st.pid, 0, SIGTERM);
	}
	if (!wait_stopped(&p))
		return hutch_oci_fail("delete container %s: its supervisor (pid %d) does not end",
		                      id, (int)st.pid);
	/* poststop: the container is stopped, its state still there. */
	if (hutch_oci_state_read(&p, id, &after, &err) >= 0) {
		(void)hutch_oci_hooks_after(&p, id, &after, HUTCH_OCI_HOOK_POSTSTOP);
		hutch_oci_state_done(&after);
	}
	/* A supervisor that died without its teardown left its sandbox to gc. */
	if (st.sandbox[0])
		(void)hutch_state_reap(hutch_runtime_dir(), st.sandbox, "deleted", &err);
	if (hutch_rm_rf_at(AT_FDCWD, p.dir) < 0)
		return hutch_oci_fail("delete container %s: remove '%s': %s", id, p.dir,
		                      strerror(errno));
	return 0;
}

static int add_pid(pid_t pid, void *arg)
{
	cJSON *n = cJSON_CreateNumber(pid);

	return n && cJSON_AddItemToArray(arg, n) ? 0 : -ENOMEM;
}

/* ps [--format table|json] ID: the host pids of the container's processes
 * (hutch's init, then every descendant of it in its pid namespace), as
 * runc lists those of its cgroup. */
int hutch_oci_cmd_ps(int argc, char **argv)
{
	struct hutch_oci_paths p;
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	_cleanup_cjson_ cJSON *pids = cJSON_CreateArray();
	_cleanup_free_ char *text = NULL;
	bool json = false;
	int i = 1, r;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--format=json") ||
		    (!strcmp(argv[i], "--format") && i + 1 < argc && !strcmp(argv[++i], "json")))
			json = true;
		else if (strcmp(argv[i], "--format=table") != 0 && strcmp(argv[i], "table") != 0)
			return hutch_oci_fail("ps: unknown option '%s'", argv[i]);
	}
	if (i != argc - 1 || !pids)
		return hutch_oci_fail("usage: ps [--format table|json] CONTAINER-ID");
	if (hutch_oci_paths_init(hutch_oci_opts.root, argv[i], &p, &err) < 0 ||
	    hutch_oci_state_read(&p, argv[i], &st, &err) < 0)
		return hutch_oci_fail("%s", err.msg);
	hutch_oci_state_done(&st);
	if (!strcmp(st.status, "stopped") || st.init_pid <= 0)
		return hutch_oci_fail("container %s: container not running", argv[i]);
	if ((r = for_each_ns_pid(st.init_pid, add_pid, pids)) < 0)
		return hutch_oci_fail("container %s: its pid namespace: %s", argv[i], strerror(-r));
	if (json) {
		text = cJSON_PrintUnformatted(pids);
		printf("%s\n", text ? text : "[]");
		return 0;
	}
	printf("PID\tCMD\n");
	for (const cJSON *e = pids->child; e; e = e->next) {
		char comm[64] = "?", path[64];
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)e->valuedouble);
		if (hutch_read_file_at(AT_FDCWD, path, comm, sizeof(comm)) > 0)
			comm[strcspn(comm, "\n")] = '\0';
		printf("%d\t%s\n", (int)e->valuedouble, comm);
	}
	return 0;
}

int hutch_oci_cmd_features(int argc, char **argv)
{
	static const char *const ns[] = { "pid",   "network", "ipc",    "uts",
		                          "mount", "user",    "cgroup", NULL };
	_cleanup_cjson_ cJSON *j = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;
	cJSON *linux_, *a, *caps, *cg, *ann;

	if (!j)
		return hutch_oci_fail("out of memory");
	cJSON_AddStringToObject(j, "ociVersionMin", "1.0.0");
	cJSON_AddStringToObject(j, "ociVersionMax", "1.1.0");
	a = cJSON_AddArrayToObject(j, "hooks");
	for (size_t i = 0; i < HUTCH_OCI_HOOK_PHASES; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(hutch_oci_hook_names[i]));
	a = cJSON_AddArrayToObject(j, "mountOptions");
	for (const char *const *o = (const char *const[]){ "bind", "rbind", "ro", "rw", "noexec",
	                                                   "nosuid", "nodev", "shared", "rshared",
	                                                   "slave", "rslave", "private", "rprivate",
	                                                   "unbindable", "runbindable", NULL };
	     *o; o++)
		cJSON_AddItemToArray(a, cJSON_CreateString(*o));
	linux_ = cJSON_AddObjectToObject(j, "linux");
	a = cJSON_AddArrayToObject(linux_, "namespaces");
	for (size_t i = 0; ns[i]; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(ns[i]));
	caps = cJSON_AddArrayToObject(linux_, "capabilities");
	for (size_t i = 0; hutch_oci_default_caps[i][0]; i++)
		cJSON_AddItemToArray(caps, cJSON_CreateString(hutch_oci_default_caps[i]));
	cg = cJSON_AddObjectToObject(linux_, "cgroup");
	cJSON_AddBoolToObject(cg, "v1", true);
	cJSON_AddBoolToObject(cg, "v2", true);
	cJSON_AddBoolToObject(cg, "systemd", true);
	cJSON_AddBoolToObject(cg, "rdma", false); /* linux.resources.rdma is refused */
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(linux_, "seccomp"), "enabled", true);
	ann = cJSON_AddObjectToObject(j, "annotations");
	cJSON_AddStringToObject(ann, "run.hutch.network", "none | all | allow:HOST,...");
	cJSON_AddStringToObject(ann, "run.hutch.ttl-seconds", "seconds until deleted");
	cJSON_AddStringToObject(ann, "run.hutch.instance-type", hutch_instance_type_names());
	text = cJSON_Print(j);
	if (!text)
		return hutch_oci_fail("out of memory");
	printf("%s\n", text);
	return 0;
}

/* create + start; without --detach wait for the supervisor and exit with
 * the container process's exit code (128+N for a signal). */
int hutch_oci_cmd_run(int argc, char **argv)
{
	struct hutch_oci_create_args a = { 0 };
	struct hutch_oci_paths p;
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	_cleanup_close_ int pidfd = -EBADF;
	_cleanup_free_ char *text = NULL;
	bool detach = false;
	pid_t pid = 0;
	cJSON *status;
	const cJSON *v;
	int code = 1;

	if (hutch_oci_parse_create(argc, argv, &a, &detach) || hutch_oci_create(&a, &pid))
		return 1;
	pidfd = sys_pidfd_open(pid, 0);
	if (hutch_oci_start(a.id))
		return 1;
	if (detach)
		return 0;
	if (pidfd >= 0) {
		struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
		while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
			;
	}
	if (hutch_oci_paths_init(hutch_oci_opts.root, a.id, &p, &err) < 0 ||
	    hutch_oci_state_read(&p, a.id, &st, &err) < 0)
		return hutch_oci_fail("%s", err.msg);
	hutch_oci_state_done(&st);
	if (hutch_read_file_alloc_at(AT_FDCWD, p.status, 1u << 16, &text) > 0 &&
	    (status = cJSON_Parse(text)) != NULL) {
		v = cJSON_GetObjectItemCaseSensitive(status, "exit_status");
		if (cJSON_IsNumber(v)) {
			int ws = (int)v->valuedouble;
			code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
		}
		cJSON_Delete(status);
	}
	return code;
}
