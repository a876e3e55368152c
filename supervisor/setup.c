/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building a sandbox (see setup.h): uid slot, network, seccomp program,
 * cgroup, init via clone3 with every namespace (setup-init.c), id maps,
 * then init's READY and the listening sockets it made for the network mode.
 * Runs in the new supervisor process, before its event loop.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "api.h"
#include "cleanup.h"
#include "cmdenv.h"
#include "events.h"
#include "fdutil.h"
#include "fullrestore.h"
#include "kind.h"
#include "netlog.h"
#include "netpolicy.h"
#include "ports.h"
#include "sandbox-image.h"
#include "seccomp-filter.h"
#include "setup-internal.h"
#include "setup.h"
#include "snapshot.h"
#include "status.h"
#include "supervisor.h"
#include "volumes.h"

/* state.json's "creating": gc's record of what it undoes after a crash,
 * written before the cgroups it names are made. */
static int write_creating(const struct setup_plan *plan, struct hutch_err *err)
{
	int r = hutch_sup_write_record(&plan->creating);

	return r < 0 ? hutch_err_set_errno(err, r, "write '%s'", plan->creating.paths->state) : 0;
}

/* v1: "creating", then the cgroups with their limits, made while init
 * makes its network namespace, and sent for init to join before GO:
 * nothing runs in the sandbox before it joined them. */
static int cgroups_after_clone(const struct setup_plan *plan, struct setup_made *m,
                               struct hutch_err *err)
{
	int r = write_creating(plan, err);

	if (r >= 0)
		r = hutch_cgroup_create(m->cg, &plan->lim, err);
	return r < 0 ? r : hutch_sup_setup_send_cgroups(m, err);
}

/* Before GO: init's id maps, its cgroups (v1: made now), its network's
 * host side; the rootless map helpers run while the rest is done. */
static int map_and_attach(const struct setup_plan *plan, struct setup_made *m,
                          struct hutch_err *err)
{
	pid_t init = m->init.pid;
	struct hutch_idmap_job job;
	struct hutch_err e2 = { 0 };
	bool cni;
	int r, q;

	/* A joined user namespace (a pod's) has its maps, a joined network
	 * namespace its wiring (pod.c). */
	if (plan->joins & CLONE_NEWUSER) {
		r = hutch_cgroup_enter(m->cg, init, err);
		if (r >= 0 && !(plan->joins & CLONE_NEWNET) &&
		    (r = hutch_net_plan_attach(&m->net, init, err)) < 0)
			(void)hutch_err_prefix(err, "network");
		return r;
	}
	r = hutch_idmap_write_start(plan->idmap, plan->slot, init, &job, err);
	if (r >= 0 && plan->cgroups_late)
		r = cgroups_after_clone(plan, m, err);
	if (r >= 0)
		r = hutch_cgroup_enter(m->cg, init, err);
	/* A CNI network namespace (pod.h) is CNI's to wire: no plan. */
	cni = (plan->joins & CLONE_NEWNET);
	if (r >= 0 && !cni && (r = hutch_net_plan_attach(&m->net, init, err)) < 0)
		(void)hutch_err_prefix(err, "network");
	q = hutch_idmap_write_finish(&job, r < 0 ? &e2 : err);
	if (r >= 0 && q < 0)
		return hutch_err_prefix(err, "id maps of sandbox init");
	/* pasta joins init's user namespace: once its maps are written; and
	 * the sandbox's cgroup (v2), which counts its memory. */
	if (r < 0 || cni || !m->net.usernet_helper)
		return r;
	q = hutch_cgroup_clone_fd(m->cg);
	r = hutch_net_plan_attach_helper(&m->net, init, q < 0 ? -1 : q, err);
	return r < 0 ? hutch_err_prefix(err, "network") : r;
}

/* The plan, and the kind's ops' part (k): what of s the steps read. */
static void setup_plan(const struct sup *s, struct setup_plan *p, struct hutch_kind_setup *k)
{
	const struct hutch_config *c = s->cfg;
	char *slash;

	p->lim = (struct hutch_limits){
		.cpu_millis = c->type->cpu_millis,
		.memory_bytes = c->type->memory_bytes,
		.pids_max = c->type->pids_max,
	};
	p->disk = (struct hutch_disk_plan){
		.want = c->disk_from[0] ? HUTCH_DISK_WANT_FORK /* sandbox.c took its forker */
		        : s->kind->sizes_inside && !strcmp(c->workspace, "disk")
		                ? HUTCH_DISK_WANT_DISK
		                : HUTCH_DISK_WANT_NONE,
		.can = s->kind->sizes_inside && !s->idmap.rootless,
		.bytes = c->type->disk_bytes,
		.uid_base = s->uid_base,
		.fork_from = c->disk_from,
		.creator_fd = -EBADF, /* setup_steps()'s */
		.answer_fd = c->disk_from[0] ? c->disk_from_fd : -EBADF,
	};
	p->net_joined = s->joins & CLONE_NEWNET;
	p->net = (struct hutch_net_plan_params){
		.policy = &c->net,
		.host_ports = c->host_ports,
		.nhost_ports = c->nhost_ports,
		.resolver = c->resolver_addr.sin_family ? &c->resolver_addr : NULL,
		.pool = c->net_pool_value.prefix ? &c->net_pool_value : NULL,
		.slot = s->slot,
		.bindings = c->header_bindings,
		.upstream_ca = c->upstream_ca,
		.usernet_helper = s->net.pasta[0] ? s->net.pasta : NULL,
		.log_nat = c->net_log && c->nat_log,
		.log_owner = c->net_log,
	};
	p->bindings = c->header_bindings;
	p->seccomp_mode = c->net.mode;
	p->volumes = (struct hutch_sup_volumes_plan){
		.set = c->volumes,
		.rootless = s->idmap.rootless,
		.uid_base = s->uid_base,
		.image_store = c->image_store,
	};
	p->creating = (struct hutch_sup_record){
		.id = s->id,
		.status = "creating",
		.paths = &s->paths,
		.cfg = c,
		.created_at = s->created_at,
		.expires_at = s->expires_at,
		.uid_base = s->uid_base,
		.slot = s->slot,
		.kind = s->kind,
	};
	snprintf(p->disk.runtime_dir, sizeof(p->disk.runtime_dir), "%s", s->paths.dir);
	slash = strrchr(p->disk.runtime_dir, '/');
	if (slash)
		*slash = '\0';
	p->kind = s->kind;
	p->joins = s->joins;
	p->slot = s->slot;
	p->idmap = &s->idmap;
	p->cpus = c->no_limits || !s->kind->sizes_inside
	                  ? 0
	                  : (size_t)((c->type->cpu_millis + 999) / 1000);
	p->change_lists = c->change_lists;
	/* Overlaps with init building the root; a container's and a run's
	 * are loaded on demand instead (hutch_api_start_late()). */
	p->api_preload = !hutch_api_on_demand(s);
	snprintf(p->hostname, sizeof(p->hostname), "hutch-%s", s->id);
	*k = (struct hutch_kind_setup){
		.container = s->container,
		.cfg = c,
		.id = s->id,
		.uid_base = s->uid_base,
		.rootless = s->idmap.rootless,
	};
}

#define TMPFS_WHY                                                                           \
	"workspace on tmpfs (charged to memory), not a disk: %s (hutch doctor says what a " \
	"disk needs)"

/* Under systemd without delegation: the cgroup in a delegated scope of
 * its own (kind.c), *ret_cg; the CLI left none for this. */
static int place_in_scope(struct sup *s, struct hutch_cgroup **ret_cg, struct hutch_err *err)
{
	if (!s->scope_bus[0] || s->cfg->no_limits)
		return 0;
	return hutch_kind_cgroup_new(s, ret_cg, err);
}

/*
 * lxcfs's views are binds of its files made once per lxcfs
 * (runtime/lxcfs.h): init's binds of them ask lxcfs nothing. What is
 * asked per sandbox is whether lxcfs answers at all: one request (a
 * statx() it must answer, rootfs.h), started before init's clone, run
 * beside the steps up to GO by a child sharing our memory
 * (base/bounded.h: raw syscalls only, nothing of ours written), waited
 * for just before GO (docs/performance.md, "lxcfs's views bound without
 * a lookup"). A lxcfs that does not answer (stopped, hung) would hold
 * the sandbox's reads of its /proc for ever: GO then says
 * HUTCH_GO_NO_VIEWS, init binds none, the log says why (views_said()):
 * the sandbox's /proc is the kernel's. So too when it did not answer the
 * lookups that make the views (acquire's, in->views_unanswered).
 */
#define VIEWS_ANSWER_MS 5000
static void views_start(struct setup_made *m)
{
	hutch_rootfs_views_probe_start(&m->views, m->procview_fd, VIEWS_ANSWER_MS);
}

/* Just before GO: its id. */
static enum hutch_go views_wait(struct setup_made *m)
{
	if (hutch_rootfs_views_probe_wait(&m->views) < 0)
		m->views_left_out = true;
	return m->views_left_out ? HUTCH_GO_NO_VIEWS : HUTCH_GO_ALL;
}

static void views_said(struct sup *s, struct setup_made *m)
{
	hutch_bounded_cancel(&m->views); /* a failure before GO */
	if (!m->views_left_out)
		return;
	hutch_event(s,
	            "lxcfs did not answer a lookup within %d s (stopped or hung?): this sandbox's "
	            "/proc and /sys/devices/system/cpu/online are the kernel's, not its sizes "
	            "(hutch gc stops that lxcfs once no sandbox uses it)",
	            VIEWS_ANSWER_MS / 1000);
}

/* GO, once the disk is finished (one that could not be made leaves tmpfs,
 * said in the log and by config.workspace, never a sandbox refused, but a
 * fork's: its files are the fork): it carries the sandbox CA's certificate
 * (header bindings), made after the clone: its key is the supervisor's
 * alone; and the disk's mounts, made meanwhile, with the change lists' group marked on it. The
 * mounts stay open here until the end: the last close of a clone init did not attach (the writable
 * layer's on the host root) waits for an RCU grace period, 5-15 ms, which init's setup would wait
 * for. */
static int send_go(const struct setup_plan *plan, struct setup_made *m, struct hutch_err *err)
{
	const char *pem;
	int fds[HUTCH_DISK_MOUNTS + 1];
	struct hutch_err why = { 0 };
	size_t n = 0;
	int r = hutch_disk_fork_setup_take(&plan->disk, &m->disk_job, true, err);

	if (r >= 0)
		r = hutch_disk_setup_finish(&plan->disk, &m->disk_job, m->disk_fds, &why, err);
	/* hutch fork's connection, inherited: watched until the disk came */
	if (plan->disk.answer_fd >= 0)
		close(plan->disk.answer_fd);
	if (r < 0)
		return r;
	if (r > 0) { /* a disk that could not be made leaves tmpfs, never a sandbox refused */
		m->tmpfs = true;
		hutch_sup_setup_warn(m, TMPFS_WHY, why.msg);
	}
	pem = hutch_net_plan_ca_pem(&m->net);
	if (m->disk_fds[HUTCH_DISK_ROOT] >= 0) {
		memcpy(fds, m->disk_fds, sizeof(fds[0]) * HUTCH_DISK_MOUNTS);
		n = HUTCH_DISK_MOUNTS;
		fds[n] = plan->change_lists ? hutch_disk_watch(m->disk_fds[HUTCH_DISK_ROOT])
		                            : -ENOENT;
		if (fds[n] >= 0)
			n++;
		else if (fds[n] != -ENOENT)
			hutch_sup_setup_warn(
			        m,
			        "change lists: the disk is not watched, what each command "
			        "changes is not listed: fanotify: %s (allow hutch "
			        "fanotify_init: its container's seccomp profile; raise "
			        "fs.fanotify.max_user_groups)",
			        strerror(-fds[n]));
	}
	r = hutch_proto_send(m->init.sock, HUTCH_MSG_GO, views_wait(m), pem, pem ? strlen(pem) : 0,
	                     fds, n);
	if (n > HUTCH_DISK_MOUNTS)
		m->disk_watch = fds[HUTCH_DISK_MOUNTS]; /* init's; our copy closed at the end */
	return r < 0 ? hutch_err_set_errno(err, r, "start sandbox init") : 0;
}

/* After the uid slot, setup's own (made, even failed: the end undoes them): -p's
 * listeners, an image's layers and use ("creating" records it), the environment. */
static int prepare_parts(const struct setup_plan *plan, struct setup_made *m, struct hutch_err *err)
{
	const struct hutch_config *c = plan->creating.cfg;
	struct hutch_kind_setup *k = &m->kind;
	int r = hutch_ports_open(c->publish, c->npublish, &m->ports, err); /* a port in use: now */

	if (r >= 0 && plan->kind->prepare_root)
		r = plan->kind->prepare_root(k, err);
	if (r >= 0)
		r = hutch_sup_env_make(c, k->image, &m->cmdenv, err);
	k->cmdenv = m->cmdenv ? (const char *const *)m->cmdenv : hutch_default_env;
	return r;
}

/* The cgroups (v1: after the clone), init cloned into them, its ids
 * mapped and its network attached. */
static int cgroup_and_init(const struct setup_plan *plan, struct setup_made *m,
                           struct hutch_err *err)
{
	int r;

	/* NULL: --no-limits */
	r = m->cg && !plan->cgroups_late ? hutch_cgroup_create(m->cg, &plan->lim, err) : 0;
	if (r < 0)
		return r;
	/* Header bindings' secrets: zeros in init and everything forked after
	 * it, locked in memory where the host allows it. */
	r = hutch_net_bindings_protect(plan->bindings);
	if (r < 0)
		return hutch_err_set_errno(err, r, "protect the header bindings (MADV_WIPEONFORK)");
	if (r > 0)
		hutch_sup_setup_warn(
		        m, "header bindings: mlock refused, their secrets may be swapped "
		           "out (raise hutch's RLIMIT_MEMLOCK: ulimit -l, LimitMEMLOCK=)");
	r = hutch_sup_setup_spawn_init(plan, m, err);
	if (plan->kind->spawned)
		plan->kind->spawned(&m->kind); /* init holds or is in them now */
	if (r < 0)
		return r;
	/* With header bindings: no ptrace or /proc/PID/mem of the supervisor,
	 * no core dump (it holds their secrets and the sandbox's CA key).
	 * After the clone: init starts dumpable (its own /proc files). */
	if (plan->bindings && prctl(PR_SET_DUMPABLE, 0) < 0)
		return hutch_err_set_errno(err, -errno, "make the supervisor non-dumpable");
	return map_and_attach(plan, m, err);
}

/* From the kind's prepare on, the steps take the plan and setup's own
 * objects, not s. */
static int init_steps(const struct setup_plan *plan, struct setup_made *m, struct hutch_err *err)
{
	const struct hutch_kind *kind = plan->kind;
	int r;

	hutch_cgroup_root_hold(); /* the cgroups made, opened, joined: one open of the root */
	r = cgroup_and_init(plan, m, err);
	hutch_cgroup_root_release();
	if (r < 0)
		return r;
	if (kind->before_go && (r = kind->before_go(&m->kind, m->init.pid, err)) < 0)
		return r;
	if ((r = send_go(plan, m, err)) < 0)
		return r;
	if (plan->api_preload)
		hutch_api_preload();
	r = hutch_sup_setup_wait_ready(plan, m, err);
	if (kind->setup_done)
		kind->setup_done(&m->kind);
	if (r < 0)
		return r;
	r = hutch_fd_nonblock(m->init.sock, true);
	return r < 0 ? hutch_err_set_errno(err, r, "init socket") : 0;
}

static int setup_steps(struct sup *s, struct setup_made *m, struct hutch_err *err)
{
	struct sock_fprog seccomp;
	struct setup_plan plan;
	const char *why;
	int r;

	r = place_in_scope(s, &m->cg, err);
	if (r < 0)
		return r;
	r = hutch_kind_join(s, err); /* a pod's: its slot, its network; the uid slot */
	if (r < 0)
		return r;
	setup_plan(s, &plan, &m->kind);
	plan.cgroups_late =
	        m->cg && !plan.kind->clone && !strcmp(hutch_cgroup_version(m->cg), "v1");
	plan.disk.creator_fd = m->creator_fd;
	/* the disk (runtime/disk.h) made while the rest is; a fork's, if there;
	 * the stock's answer to the creator's take, come meanwhile */
	(void)hutch_disk_stock_answer(&m->disk_job);
	r = hutch_disk_fork_setup_take(&plan.disk, &m->disk_job, false, err);
	if (r >= 0)
		r = hutch_disk_setup_start(&plan.disk, &m->disk_job, &why, err);
	if (r < 0)
		return r;
	if (plan.disk.want == HUTCH_DISK_WANT_FORK && m->disk_job.sock < 0)
		hutch_event(s, "fork: its disk '%s' not made yet: awaited after init's clone",
		            plan.disk.fork_from);
	if (r > 0) /* what status and inspect show (an ordinary user's always: docs/api.md) */
		snprintf(s->cfg->workspace, sizeof(s->cfg->workspace), "tmpfs");
	if (r > 0 && why)
		hutch_sup_setup_warn(m, TMPFS_WHY, why);
	r = prepare_parts(&plan, m, err);
	if (r < 0)
		return r;
	/* the volumes' mounts, made from the plan (even failed: the end undoes them) */
	r = hutch_sup_volumes_prepare(&plan.volumes, &m->vols, err);
	if (r < 0)
		return r;
	m->net.policy = plan.net.policy; /* a joined network namespace: the pod's plan */
	if (!plan.net_joined) {
		/* made, even failed: the end undoes it */
		r = hutch_net_plan_make(&m->net, &plan.net, err);
		if (r < 0)
			return hutch_err_prefix(err, "network");
		if (m->net.warning.code)
			hutch_sup_setup_warn(m, "DNS: the sandbox's names fail (SERVFAIL): %s",
			                     m->net.warning.msg);
	}
	r = hutch_seccomp_program(plan.seccomp_mode, &seccomp, err);
	if (r < 0)
		return hutch_err_prefix(err, "seccomp");
	m->seccomp = seccomp;
	/* before "creating" is written: it names the cgroups made next */
	views_start(m);
	plan.creating.cg = m->cg;
	plan.creating.ports = m->ports;
	plan.creating.kind_part = &m->kind;
	/* v1: after the clone (cgroups_after_clone()) */
	if (!plan.cgroups_late && (r = write_creating(&plan, err)) < 0)
		return r;
	if (plan.kind->prepare && (r = plan.kind->prepare(&m->kind, &plan.lim, err)) < 0)
		return r;
	return init_steps(&plan, m, err);
}

/* What setup made goes to s when it ends, on every path: the end undoes
 * it, also after a failure. */
static int hand_over(struct sup *s, struct setup_made *m, int r, struct hutch_err *err)
{
	int q;

	hutch_ports_adopt(s, m->ports);
	s->image = m->kind.image;
	hutch_sup_env_take(s, m->cmdenv);
	s->volumes = m->vols;
	s->disk_job = m->disk_job;
	memcpy(s->disk_fds, m->disk_fds, sizeof(s->disk_fds));
	s->disk_watch = m->disk_watch;
	s->net.plan = m->net;
	s->seccomp = m->seccomp;
	s->cg = m->cg;
	closep(&m->procview_fd); /* init has it, or never will */
	views_said(s, m);
	if (m->tmpfs)
		snprintf(s->cfg->workspace, sizeof(s->cfg->workspace), "tmpfs");
	for (size_t i = 0; i < m->nwarnings; i++)
		hutch_event(s, "warning: %s", m->warnings[i]);
	hutch_initproc_started(s, &m->init);
	if (m->nwrite == 0 && m->nwrite_which == 0)
		return r;
	if (r < 0) {
		hutch_close_many(m->write_fds, m->nwrite);
		return r;
	}
	q = hutch_sup_snapshot_take_fds(s, m->write_which, m->nwrite_which, m->write_fds, m->nwrite,
	                                err);
	return q < 0 ? q : r;
}

int hutch_sup_setup(struct sup *s, const struct hutch_setup_in *in, struct hutch_err *err)
{
	struct setup_made made = {
		.disk_job = in->disk_job,
		.disk_watch = -EBADF,
		.init = { .pid = 0, .pidfd = -EBADF, .sock = -EBADF },
		.procview_fd = in->procview_fd,
		.views = HUTCH_BOUNDED_INIT,
		.views_left_out = in->views_unanswered,
		.cg = in->cg, /* the CLI's, or NULL: the scope's (place_in_scope()) */
		.init_serving = in->init_serving,
		.init_serving_ud = in->init_serving_ud,
		.creator_fd = in->creator_fd,
	};
	int r;

	for (size_t i = 0; i < HUTCH_DISK_FDS; i++)
		made.disk_fds[i] = -EBADF;
	r = setup_steps(s, &made, err);
	r = hand_over(s, &made, r, err);
	if (r < 0)
		return r;
	/* init is ready: */
	hutch_initproc_hold_mntns(s); /* dropped after the DELETE answer */
	if (!(s->joins & CLONE_NEWNET))
		hutch_netlog_start(s);
	r = (s->joins & CLONE_NEWNET) ? 0 : hutch_net_plan_serve(&s->net.plan, err);
	if (r < 0)
		return hutch_err_prefix(err, "network");
	/* A full snapshot's processes replace init's (fullrestore.c). */
	if (s->cfg->full_snapshot[0] && (r = hutch_sup_restore_full(s, err)) < 0)
		return r;
	/* "running" is written when the setup steps are done (hooks.c). */
	return 0;
}
