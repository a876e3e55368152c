/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pods (see pod.h): the namespaces a container joins, checked before
 * anything is made for it, and the clone of its init inside them.
 *
 * The checks: each path must be a namespace of the type its entry names;
 * none may be the host's (init's); all must be owned by one user
 * namespace, which must be that of a live hutch sandbox's init, found in
 * the same runtime dir (its state.json: init_pid, uid_slot, uid_base, its
 * network option). The pod's uid slot is pinned (runtime/state.h) before
 * the sandbox is checked a second time, so that its ids are never handed
 * to another sandbox while this container runs with them.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/nsfs.h>

#include "cleanup.h"
#include "container.h"
#include "fdutil.h"
#include "kind.h"
#include "ns.h"
#include "pod.h"
#include "state.h"
#include "supervisor.h"
#include "syscalls.h"

/* Names in the rows, not pointers: no relocation at start (issue 31). */
static const struct {
	char field[8]; /* linux.namespaces[].type */
	char proc[8];  /* /proc/PID/ns/<proc> */
	int nstype;
} ns_info[HUTCH_POD_NS_N] = {
	[HUTCH_POD_NS_USER] = { "user", "user", CLONE_NEWUSER },
	[HUTCH_POD_NS_NET] = { "network", "net", CLONE_NEWNET },
	[HUTCH_POD_NS_IPC] = { "ipc", "ipc", CLONE_NEWIPC },
	[HUTCH_POD_NS_UTS] = { "uts", "uts", CLONE_NEWUTS },
	[HUTCH_POD_NS_PID] = { "pid", "pid", CLONE_NEWPID },
};

/* What the pod's state.json says. */
struct pod {
	char id[HUTCH_ID_LEN + 1];
	pid_t init_pid;
	unsigned slot;
	uid_t uid_base;
	char network[4096];
};

/* A pod member: a container whose spec names namespaces to join (a
 * pod's, or a CNI network namespace; a cgroup namespace's path is only
 * checked). Its init is then cloned by pod_clone(). */
static bool is_pod(const struct hutch_config *cfg, const struct hutch_container *ct)
{
	(void)cfg;
	for (int k = 0; ct && k < HUTCH_POD_NS_N; k++)
		if (ct->join.path[k])
			return true;
	return false;
}

/* After hutch_pod_join_prepare(): the user, ipc, uts and pid namespaces
 * are joined when a pod's are (active), the network namespace also when
 * it is the CNI's. */
static bool joins(const struct sup *s, int nstype)
{
	const struct hutch_pod_join *j = &s->container->join;

	switch (nstype) {
	case CLONE_NEWUSER:
		return j->active;
	case CLONE_NEWNET:
		return (j->active || j->cni) && j->joined[HUTCH_POD_NS_NET];
	case CLONE_NEWUTS:
		return j->active && j->joined[HUTCH_POD_NS_UTS];
	case CLONE_NEWPID:
		return j->active && j->joined[HUTCH_POD_NS_PID];
	default:
		return false;
	}
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The namespace /proc/PID/ns/<name> is, or -errno. */
static int stat_proc_ns(pid_t pid, const char *name, struct stat *ret)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, name);
	return stat(path, ret) < 0 ? -errno : 0;
}

/* Whether st is the host's namespace of this name: ours (the supervisor
 * runs in the caller's) or, where we may look, PID 1's. */
static bool is_hosts(const struct stat *st, const char *name)
{
	struct stat host;

	if (stat_proc_ns(getpid(), name, &host) == 0 && same_file(st, &host))
		return true;
	return stat_proc_ns(1, name, &host) == 0 && same_file(st, &host);
}

/*
 * The pid podman and containerd know for a hutch container is its
 * supervisor's (the pid-file's: the one a subreaper waits for;
 * docs/architecture.md), so a pod's later containers name
 * /proc/SUPERVISOR/ns/NAME: that means the container's namespace, its
 * init's (pid: the one its process is PID 1 of). Any other path is taken
 * as it is.
 */
static const char *resolve(const char *runtime_dir, const char *path, char *buf, size_t size)
{
	char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	char name[16], tail;
	size_t n = 0;
	int pid;

	if (sscanf(path, "/proc/%d/ns/%15[a-z_]%c", &pid, name, &tail) != 2 || pid <= 0 ||
	    hutch_state_list(runtime_dir, &ids, &n) < 0)
		return path;
	for (size_t i = 0; i < n; i++) {
		struct hutch_paths p;
		_cleanup_cjson_ cJSON *st = NULL;
		const cJSON *sup, *init;

		if (hutch_paths_init(runtime_dir, ids[i], &p) < 0 || hutch_state_is_live(&p) != 1 ||
		    hutch_state_read(&p, &st) < 0)
			continue;
		sup = cJSON_GetObjectItemCaseSensitive(st, "supervisor_pid");
		init = cJSON_GetObjectItemCaseSensitive(st, "init_pid");
		if (cJSON_IsNumber(sup) && sup->valuedouble == pid && cJSON_IsNumber(init) &&
		    init->valuedouble >= 1 && init->valuedouble <= INT_MAX) {
			/* pid: the namespace its process is PID 1 of, nested in
			 * init's (init/pidns.c), as under runc; init's own when
			 * none is (its children's then). */
			snprintf(buf, size, "/proc/%d/ns/%s", (int)init->valuedouble,
			         strcmp(name, "pid") ? name : "pid_for_children");
			path = buf;
			break;
		}
	}
	free(ids);
	return path;
}

/* Open one path as a namespace of type k, not the host's; its owner's
 * identity into *owner. */
static int open_ns(const struct hutch_pod_join *j, enum hutch_pod_ns k, const char *runtime_dir,
                   struct stat *owner, struct hutch_err *err)
{
	char buf[64];
	const char *path = resolve(runtime_dir, j->path[k], buf, sizeof(buf));
	_cleanup_close_ int fd = -EBADF, ufd = -EBADF;
	struct stat st;
	int type;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "linux.namespaces[%u].path: open '%.200s'",
		                           j->index[k], path);
	type = ioctl(fd, NS_GET_NSTYPE);
	if (type != ns_info[k].nstype)
		return hutch_err_set(
		        err, -EINVAL,
		        "linux.namespaces[%u].path: '%.200s' is not a namespace of type %s",
		        j->index[k], path, ns_info[k].field);
	if (fstat(fd, &st) < 0)
		return hutch_err_set_errno(err, -errno, "linux.namespaces[%u].path: stat",
		                           j->index[k]);
	if (is_hosts(&st, ns_info[k].proc))
		return hutch_err_set(err, -EPERM,
		                     "linux.namespaces[%u].path: '%.200s' is the host's %s "
		                     "namespace, which hutch refuses",
		                     j->index[k], path, ns_info[k].field);
	ufd = k == HUTCH_POD_NS_USER ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : ioctl(fd, NS_GET_USERNS);
	if (ufd < 0 || fstat(ufd, owner) < 0)
		return hutch_err_set_errno(
		        err, -errno, "linux.namespaces[%u].path: the user namespace of '%.200s'",
		        j->index[k], path);
	return TAKE_FD(fd);
}

/* Whether the live process pidfd is (pid) is in user namespace owner. */
static bool init_owns(pid_t pid, const struct stat *owner)
{
	_cleanup_close_ int pidfd = sys_pidfd_open(pid, 0);
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
	struct stat st;

	if (pidfd < 0 || stat_proc_ns(pid, "user", &st) < 0 || !same_file(&st, owner))
		return false;
	/* Still the same process after the look (readable: it exited). */
	return poll(&pfd, 1, 0) == 0;
}

/* The sandbox id of runtime_dir, if live and its init owns owner. */
static bool read_pod(const char *runtime_dir, const char *id, const struct stat *owner,
                     struct pod *ret)
{
	struct hutch_paths p;
	_cleanup_cjson_ cJSON *st = NULL;
	const cJSON *pid, *slot, *base, *net;

	if (hutch_paths_init(runtime_dir, id, &p) < 0 || hutch_state_is_live(&p) != 1 ||
	    hutch_state_read(&p, &st) < 0)
		return false;
	pid = cJSON_GetObjectItemCaseSensitive(st, "init_pid");
	slot = cJSON_GetObjectItemCaseSensitive(st, "uid_slot");
	base = cJSON_GetObjectItemCaseSensitive(st, "uid_base");
	net = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "config"),
	                                       "network");
	if (!cJSON_IsNumber(pid) || pid->valuedouble < 1 || pid->valuedouble > INT_MAX ||
	    !cJSON_IsNumber(slot) || slot->valuedouble < 0 || slot->valuedouble >= HUTCH_SLOTS ||
	    !cJSON_IsNumber(base) || base->valuedouble < 0 || base->valuedouble > UINT32_MAX ||
	    !cJSON_IsString(net) || strlen(net->valuestring) >= sizeof(ret->network))
		return false;
	if (!init_owns((pid_t)pid->valuedouble, owner))
		return false;
	if (id != ret->id) /* the check again: read_pod(.., pod.id, .., &pod) */
		snprintf(ret->id, sizeof(ret->id), "%s", id);
	ret->init_pid = (pid_t)pid->valuedouble;
	ret->slot = (unsigned)slot->valuedouble;
	ret->uid_base = (uid_t)base->valuedouble;
	snprintf(ret->network, sizeof(ret->network), "%s", net->valuestring);
	return true;
}

static int find_pod(const char *runtime_dir, const char *self, const struct stat *owner,
                    struct pod *ret)
{
	char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	size_t n = 0;
	int r = hutch_state_list(runtime_dir, &ids, &n);

	if (r < 0)
		return r;
	r = -ESRCH;
	for (size_t i = 0; i < n && r < 0; i++)
		if (strcmp(ids[i], self) && read_pod(runtime_dir, ids[i], owner, ret))
			r = 0;
	free(ids);
	return r;
}

/* The pod's network option becomes the container's: the namespace is
 * the pod's, and so are its wiring and policy. */
static int take_network(struct sup *s, const struct pod *pod, struct hutch_err *err)
{
	const struct hutch_pod_join *j = &s->container->join;

	if (j->cni)
		return 0; /* the CNI's namespace, not the pod's: cni_network() */
	if (j->fd[HUTCH_POD_NS_NET] < 0) {
		/* Its own network namespace in the pod's user namespace: its
		 * wiring would need a slot of its own (mode all's addresses). */
		if (hutch_net_policy_wired_mode(&s->cfg->net) != HUTCH_NET_NONE)
			return hutch_err_set(
			        err, -EPERM,
			        "annotations.run.hutch.network: a container that shares "
			        "a pod's user namespace but not its network namespace "
			        "has network none");
		return 0;
	}
	if (j->network_given && strcmp(s->cfg->network_spec, pod->network))
		return hutch_err_set(err, -EPERM,
		                     "annotations.run.hutch.network: '%.100s' is not the pod's "
		                     "network '%.100s' (the container joins its network namespace)",
		                     s->cfg->network_spec, pod->network);
	if (hutch_config_set(s->cfg, "network", pod->network, err) < 0)
		return hutch_err_prefix(err, "the pod's network");
	return 0;
}

/* A sysfs of the CNI network namespace, made as host root (init's user
 * namespace cannot mount one of a network namespace it does not own): a
 * detached read-only mount's fd. */
static int cni_sysfs(const struct sup *s, struct hutch_err *err)
{
	const unsigned attrs =
	        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
	_cleanup_close_ int own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int fsfd = -EBADF;
	int mnt = -EBADF, r = 0;

	if (own < 0)
		return hutch_err_set_errno(err, -errno, "open the supervisor's network namespace");
	/* sysfs shows the network namespace of whoever makes it: this
	 * thread's, for the moment of the mount only. */
	if (setns(s->container->join.fd[HUTCH_POD_NS_NET], CLONE_NEWNET) < 0)
		return hutch_err_set_errno(err, -errno, "sysfs: enter the CNI network namespace");
	fsfd = sys_fsopen("sysfs", FSOPEN_CLOEXEC);
	if (fsfd < 0 || sys_fsconfig(fsfd, FSCONFIG_SET_STRING, "source", "sysfs", 0) < 0 ||
	    sys_fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
	    (mnt = sys_fsmount(fsfd, FSMOUNT_CLOEXEC, attrs)) < 0)
		r = -errno;
	if (setns(own, CLONE_NEWNET) < 0)
		abort(); /* the supervisor's wiring would go to the wrong place */
	if (r < 0)
		return hutch_err_set_errno(err, r, "mounts: sysfs of the CNI network namespace");
	return mnt;
}

/*
 * containerd 2.x's defaults (enable_unprivileged_ports, _icmp), for a pod
 * that sets neither key: written whatever containerd's version, because
 * under runc the container's root is host root, whose CAP_NET_BIND_SERVICE
 * and CAP_NET_RAW hold in CNI's namespace, while hutch's root's hold in its
 * own user namespace only: without them nothing in a hutch pod listens
 * below 1024 (docs/kubernetes.md, "Port 80"). They open the pod's own
 * network namespace to its own processes, nothing of the host's.
 */
static const char *const cni_defaults[] = {
	"net.ipv4.ip_unprivileged_port_start=0",
	"net.ipv4.ping_group_range=0 2147483647",
};

static bool has_key(char *const *kv, const char *entry)
{
	size_t klen = (size_t)(strchr(entry, '=') - entry) + 1;

	for (; kv && *kv; kv++)
		if (strncmp(*kv, entry, klen) == 0)
			return true;
	return false;
}

/*
 * A pod's net.* sysctls in the CNI network namespace (containerd puts
 * them in the pause container's spec: the pod's own, and 2.x's defaults
 * net.ipv4.ip_unprivileged_port_start and ping_group_range): init's user
 * namespace does not own that namespace, so the runtime writes them, as
 * host root, in that namespace only, before any process runs there (as
 * runc does from its init). The first container there (the pause
 * container: no namespace of a pod's joined) also gets cni_defaults[]
 * that its spec lacks. Only the network namespace is entered, for the
 * writes, by this thread; the container's init gets the other keys.
 */
static int cni_sysctls(struct sup *s, struct hutch_err *err)
{
	struct hutch_container *ct = s->container;
	const size_t ndef = sizeof(cni_defaults) / sizeof(cni_defaults[0]);
	_cleanup_free_ const char **net = NULL;
	_cleanup_close_ int own = -EBADF;
	size_t n = 0, k = 0;
	char **rest;
	int r;

	while (ct->sysctls && ct->sysctls[n])
		n++;
	net = calloc(n + ndef + 1, sizeof(*net));
	if (!net)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (strncmp(ct->sysctls[i], "net.", 4) == 0)
			net[k++] = ct->sysctls[i];
	for (size_t i = 0; !ct->join.active && i < ndef; i++)
		if (!has_key(ct->sysctls, cni_defaults[i]))
			net[k++] = cni_defaults[i];
	net[k] = NULL;
	if (k == 0)
		return 0;
	own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (own < 0)
		return hutch_err_set_errno(err, -errno, "open the supervisor's network namespace");
	if (setns(ct->join.fd[HUTCH_POD_NS_NET], CLONE_NEWNET) < 0)
		return hutch_err_set_errno(err, -errno, "sysctls: enter the CNI network namespace");
	r = hutch_init_write_sysctls(net, NULL, err);
	if (setns(own, CLONE_NEWNET) < 0)
		abort(); /* the supervisor's wiring would go to the wrong place */
	if (r < 0)
		return hutch_err_prefix(err, "the CNI network namespace");
	/* The rest for init (borrowed strings: the spec keeps them). */
	rest = calloc(n + 1, sizeof(*rest));
	if (!rest)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0, j = 0; i < n; i++)
		if (strncmp(ct->sysctls[i], "net.", 4) != 0)
			rest[j++] = ct->sysctls[i];
	ct->sysctls = rest; /* for the process's life, as the spec's */
	return 0;
}

/*
 * A network namespace the CRI made and CNI wired: its addresses, routes
 * and filters are the cluster's (CNI, NetworkPolicy), and hutch can wire
 * nothing there (its user namespace does not own it), so a hutch network
 * mode other than the default (none: hutch adds nothing) is refused.
 */
static int cni_network(struct sup *s, struct hutch_err *err)
{
	const struct hutch_pod_join *j = &s->container->join;

	if (j->network_given && strcmp(s->cfg->network_spec, "none"))
		return hutch_err_set(err, -EPERM,
		                     "annotations.run.hutch.network: '%.100s' with "
		                     "linux.namespaces[%u].path, a network namespace of the "
		                     "host's user namespace (CNI's): its network is the "
		                     "cluster's, hutch wires none; give none or no annotation",
		                     s->cfg->network_spec, j->index[HUTCH_POD_NS_NET]);
	if (cni_sysctls(s, err) < 0)
		return err->code;
	for (size_t i = 0; i < s->container->nmounts; i++) {
		struct hutch_container_mount *m = &s->container->mounts[i];
		int fd;

		if (!m->sysfs)
			continue;
		fd = cni_sysfs(s, err);
		if (fd < 0)
			return fd;
		s->container->mount_fds[i] = fd;
		m->sysfs = false;
		m->premade = true;
	}
	return 0;
}

/* Open each path; all must have one owner, not the host's user namespace,
 * but for a network namespace (the CRI's: j->cni). Returns how many are
 * a pod's (owned by *owner). */
static int open_all(struct hutch_pod_join *j, const char *runtime_dir, struct stat *owner,
                    struct hutch_err *err)
{
	struct stat own;
	int any = 0;

	for (int k = 0; k < HUTCH_POD_NS_N; k++) {
		if (!j->path[k])
			continue;
		j->fd[k] = open_ns(j, (enum hutch_pod_ns)k, runtime_dir, &own, err);
		if (j->fd[k] < 0)
			return j->fd[k];
		j->joined[k] = true;
		if (k == HUTCH_POD_NS_NET && is_hosts(&own, "user")) {
			j->cni = true; /* not the host's netns: open_ns() checked */
			continue;
		}
		if (is_hosts(&own, "user"))
			return hutch_err_set(
			        err, -EPERM,
			        "linux.namespaces[%u].path: '%.200s' is owned by the "
			        "host's user namespace, not a hutch container's, which "
			        "hutch refuses",
			        j->index[k], j->path[k]);
		if (any && !same_file(&own, owner))
			return hutch_err_set(
			        err, -EPERM,
			        "linux.namespaces[%u].path: '%.200s' belongs to another "
			        "user namespace than the other paths",
			        j->index[k], j->path[k]);
		*owner = own;
		any++;
	}
	return any;
}

/* The pod's user namespace itself, when only the others were named. */
static int open_owner(struct hutch_pod_join *j, struct hutch_err *err)
{
	if (j->fd[HUTCH_POD_NS_USER] >= 0)
		return 0;
	for (int k = 0; k < HUTCH_POD_NS_N; k++)
		if (j->fd[k] >= 0 && !(j->cni && k == HUTCH_POD_NS_NET)) {
			j->fd[HUTCH_POD_NS_USER] = ioctl(j->fd[k], NS_GET_USERNS);
			if (j->fd[HUTCH_POD_NS_USER] < 0)
				return hutch_err_set_errno(err, -errno, "the pod's user namespace");
			return 0;
		}
	return 0;
}

/* A cgroup namespace's path must name one; the container gets its own
 * all the same (its cgroup is its root: never weaker than the path's). */
static int check_cgroup_ns(const struct hutch_pod_join *j, struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;

	if (!j->cgroup_path)
		return 0;
	fd = open(j->cgroup_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "linux.namespaces[%u].path: open '%.200s'",
		                           j->cgroup_index, j->cgroup_path);
	if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWCGROUP)
		return hutch_err_set(
		        err, -EINVAL,
		        "linux.namespaces[%u].path: '%.200s' is not a namespace of type cgroup",
		        j->cgroup_index, j->cgroup_path);
	return 0;
}

int hutch_pod_join_prepare(struct sup *s, struct hutch_kind_slot *ret_slot, struct hutch_err *err)
{
	struct hutch_pod_join *j;
	char dir[sizeof(s->paths.dir)], runtime_dir[sizeof(s->paths.dir)];
	struct stat owner;
	struct pod pod;
	int r;

	if (!s->container)
		return 0;
	j = &s->container->join;
	r = check_cgroup_ns(j, err);
	if (r < 0)
		return r;
	for (int k = 0; k < HUTCH_POD_NS_N; k++) {
		j->fd[k] = -EBADF;
		j->active = j->active || j->path[k];
	}
	if (!j->active)
		return 0;
	if (s->idmap.rootless)
		return hutch_err_set(
		        err, -EPERM,
		        "linux.namespaces: joining a pod's namespaces needs hutch as root");
	snprintf(dir, sizeof(dir), "%s", s->paths.dir);
	snprintf(runtime_dir, sizeof(runtime_dir), "%s", dirname(dir));
	r = open_all(j, runtime_dir, &owner, err);
	if (r < 0)
		return r;
	j->active = r > 0;
	if (j->cni && (r = cni_network(s, err)) < 0)
		return r;
	s->net.joined_cni = j->cni;
	if (!j->active)
		return 0; /* a CNI network namespace alone: its own user namespace */
	r = find_pod(runtime_dir, s->id, &owner, &pod);
	for (int k = 0; r < 0 && k < HUTCH_POD_NS_N; k++)
		if (j->path[k])
			return hutch_err_set(err, -EPERM,
			                     "linux.namespaces[%u].path: '%.200s' is no live hutch "
			                     "container's namespace (only a pod's containers share "
			                     "namespaces), which hutch refuses",
			                     j->index[k], j->path[k]);
	r = hutch_slot_pin(s->idmap.slots_dir, pod.slot, err);
	if (r < 0)
		return r;
	ret_slot->fd = r; /* the caller's from now on, whatever follows */
	/* Pinned: checked again (its supervisor's lock held, its init alive),
	 * so the slot was still the pod's while the pin was held (a
	 * supervisor holds its slot as long as its lock: both go at its exit). */
	if (!read_pod(runtime_dir, pod.id, &owner, &pod))
		return hutch_err_set(err, -ESRCH, "the pod's sandbox %s ended", pod.id);
	ret_slot->slot = pod.slot;
	ret_slot->uid_base = pod.uid_base;
	r = open_owner(j, err);
	if (r < 0)
		return r;
	if (j->joined[HUTCH_POD_NS_NET] && !j->cni)
		snprintf(s->net.joined_pod, sizeof(s->net.joined_pod), "%s", pod.id);
	return take_network(s, &pod, err);
}

/* The supervisor's end: close what hutch_pod_join_prepare() opened. */
static void join_done(struct hutch_kind_setup *k)
{
	hutch_close_many(k->container->join.fd, HUTCH_POD_NS_N);
}

/*
 * The helper: into the pod's namespaces (user first: the others need
 * CAP_SYS_ADMIN in it), then init's clone. Returns as clone3 does.
 *
 * The pod's pid namespace (the CRI's POD mode, shareProcessNamespace):
 * setns() there only sets where this helper's children are born, so init
 * is born inside it, the pod's processes' sibling, never a host process
 * entering a live namespace: nothing of the host runs there but hutch's
 * inits, each made by hutch, and nothing else runs in the helper. The
 * pod's root (same ids) could ptrace or open /proc/PID/exe and mem of a
 * dumpable process there, so init is born non-dumpable (the flag follows
 * fork; its memory's owner is the host's user namespace, so only host
 * root may look) and stays so (init.c: no oom_score_adj file then).
 */
static long helper_clone(const struct hutch_pod_join *j, uint64_t flags)
{
	struct clone_args args = { 0 };

	if (j->fd[HUTCH_POD_NS_PID] >= 0 && prctl(PR_SET_DUMPABLE, 0) < 0)
		return -1;

	/* A CNI network namespace first, as host root: CAP_SYS_ADMIN over it
	 * is the host user namespace's, which init never has. */
	if (j->cni && setns(j->fd[HUTCH_POD_NS_NET], CLONE_NEWNET) < 0)
		return -1;
	for (int k = 0; k < HUTCH_POD_NS_N; k++)
		if (j->fd[k] >= 0 && !(j->cni && k == HUTCH_POD_NS_NET) &&
		    setns(j->fd[k], ns_info[k].nstype) < 0)
			return -1;
	for (int k = 0; k < HUTCH_POD_NS_N; k++)
		if (j->fd[k] >= 0)
			flags &= ~(uint64_t)ns_info[k].nstype;
	/* exit_signal must be 0 with CLONE_PARENT: init gets the helper's
	 * (SIGCHLD), to the supervisor. */
	args.flags = flags | CLONE_PARENT;
	return sys_clone3(&args, sizeof(args));
}

static pid_t pod_clone(struct hutch_kind_setup *k, uint64_t flags, int *ret_pidfd,
                       struct hutch_err *err)
{
	int p[2], status, answer[2] = { 0, 0 }, pidfd;
	pid_t helper;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		return hutch_err_set_errno(err, -errno, "pipe");
	helper = fork();
	if (helper < 0) {
		int r = -errno;

		hutch_close_many(p, 2);
		return hutch_err_set_errno(err, r, "fork");
	}
	if (helper == 0) {
		long pid = helper_clone(&k->container->join, flags);

		if (pid == 0)
			return 0; /* init: p[1] is closed with the rest */
		answer[0] = pid > 0 ? (int)pid : 0;
		answer[1] = pid > 0 ? 0 : -errno;
		(void)!write(p[1], answer, sizeof(answer));
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], answer, sizeof(answer));
	close(p[0]);
	while (waitpid(helper, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(answer) || answer[0] <= 0)
		return hutch_err_set_errno(err, answer[1] < 0 ? answer[1] : -EIO,
		                           "join the pod's namespaces and clone init");
	/* Our child now (CLONE_PARENT): its pid stays its own until we reap. */
	pidfd = sys_pidfd_open(answer[0], 0);
	if (pidfd < 0) {
		int r = -errno;

		(void)kill(answer[0], SIGKILL);
		while (waitpid(answer[0], &status, 0) < 0 && errno == EINTR)
			;
		return hutch_err_set_errno(err, r, "pidfd_open of init");
	}
	*ret_pidfd = pidfd;
	return answer[0];
}

const struct hutch_kind hutch_kind_pod = {
	.name = "pod",
	.is = is_pod,
	HUTCH_CONTAINER_KIND_OPS,
	.join = hutch_pod_join_prepare,
	.joins = joins,
	.clone = pod_clone,
	.spawned = join_done,
};
