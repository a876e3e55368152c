/* SPDX-License-Identifier: Apache-2.0 */
/* How a sandbox ends; see lifecycle.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "cleanup.h"
#include "events.h"
#include "fdutil.h"
#include "fork.h"
#include "hooks.h"
#include "idle.h"
#include "initproc.h"
#include "journal.h"
#include "kind.h"
#include "lifecycle.h"
#include "log.h"
#include "netlog.h"
#include "netpolicy.h"
#include "pasta.h"
#include "ports.h"
#include "procview.h"
#include "sandbox-image.h"
#include "supervisor.h"
#include "volumes.h"

/* The sandbox's cgroups, once every process of it is dead and its
 * commands have read their OOM counts: before the DELETE's answer, so
 * that `hutch rm` returns with nothing of the sandbox in any hierarchy
 * (a systemd scope included); it costs ~0.1-0.3 ms. pasta (rootless)
 * runs in it and is stopped first; anything else still there is killed. */
static void remove_cgroups(struct sup *s)
{
	struct hutch_err err = { 0 };

	if (!s->cg || s->end.cgroups_removed)
		return;
	s->end.cgroups_removed = true;
	hutch_net_plan_helper_done(&s->net.plan);
	if (hutch_cgroup_destroy(s->cg, &err) < 0)
		hutch_log(HUTCH_LOG_WARN, "%s", err.msg);
}

/* Tear down now, skipping or after on_destroy. */
static void end_now(struct sup *s, const char *reason)
{
	if (s->state == SUP_GONE)
		return;
	/* pasta's end kept for the thaw needs no restart now: the teardown
	 * stops whatever pasta there is. */
	hutch_sup_pasta_ending(s);
	hutch_idle_wake_to_end(s);
	s->state = SUP_CLOSING;
	s->end.reason = reason;
	s->end.at = hutch_now_realtime();
	hutch_sup_teardown(s, reason);
	/* Every command is dead now: finish them with what they wrote. */
	hutch_cmds_finish_all(&s->cmds);
	remove_cgroups(s);
	/* Nothing of the sandbox reads lxcfs's views now: its hold goes
	 * before the answer too, so that `hutch rm; hutch gc` stops the
	 * runtime dir's lxcfs at once (a hold kept until this process's
	 * exit made that gc find it in use, and leave it running). */
	closep(&s->procview_hold);
	hutch_procview_done(s);
	s->state = SUP_GONE;
	hutch_hooks_sandbox_ended(s);
	hutch_api_sandbox_ended(s);
}

void hutch_sup_end(struct sup *s, const char *reason)
{
	if (s->state == SUP_RUNNING)
		hutch_event(s, "ending: %s", reason ? reason : "creation failed");
	if (s->state == SUP_RUNNING && hutch_hooks_destroy_start(s)) {
		s->state = SUP_CLOSING;
		s->end.reason = reason;
		s->end.at = hutch_now_realtime();
		s->end.destroy_hook = true;
		return;
	}
	if (s->state == SUP_CLOSING && s->end.destroy_hook)
		return; /* on_destroy is running; it is bounded */
	end_now(s, reason);
}

void hutch_sup_after_events(struct sup *s)
{
	if (s->state == SUP_GONE)
		return;
	switch (hutch_hooks_after_events(s)) {
	case HUTCH_HOOKS_FAILED:
		/* Creation failed: delete without a tombstone (the id was
		 * never given out). */
		end_now(s, NULL);
		break;
	case HUTCH_HOOKS_DESTROY_DONE:
		end_now(s, s->end.reason); /* records on_destroy's result too */
		break;
	case HUTCH_HOOKS_CONTINUE:
		break;
	}
}

void hutch_sup_init_died(struct sup *s)
{
	if (s->state == SUP_RUNNING || s->end.destroy_hook)
		hutch_event(s, "init died unasked%s",
		            s->state == SUP_RUNNING ? ": the sandbox crashed"
		                                    : " during on_destroy");
	if (s->state == SUP_RUNNING)
		hutch_sup_end(s, "crashed");
	else if (s->end.destroy_hook)
		hutch_hooks_on_deadline(s); /* on_destroy cannot finish */
}

/* The runtime dir is the parent of the sandbox's state dir. The supervisor
 * cleared its environment (scrub_environment()), so hutch_runtime_dir()
 * would name the default, not the dir the sandbox was created in. */
static void write_tombstone(const struct sup *s, const char *reason)
{
	char rt[sizeof(s->paths.dir)];
	char *slash;

	snprintf(rt, sizeof(rt), "%s", s->paths.dir);
	slash = strrchr(rt, '/');
	if (!slash)
		return;
	*slash = '\0';
	(void)hutch_gone_write(rt, s->id, reason, hutch_now_realtime());
}

void hutch_sup_teardown(struct sup *s, const char *reason)
{
	int r = 0;
	bool retiring = !s->end.retired;

	/* The host ports first: from now on a connection is refused. */
	hutch_ports_close_all(s);
	/* init dies in the kernel (its pid namespace killed first: ~1 ms)
	 * while the sandbox is retired, not after (issue 31: a run's end
	 * waited for both in turn). The tombstone first: whoever no longer
	 * finds the sandbox finds why, and what its on_destroy did (appended
	 * after the retire, a reader could miss it: seen under emulation). */
	hutch_initproc_kill_now(s);
	if (retiring && reason) {
		write_tombstone(s, reason);
		if (s->end.destroy_hook)
			hutch_hooks_record_destroy(s);
	}
	if (retiring)
		r = hutch_state_retire(&s->paths, &s->paths);
	hutch_initproc_reap(s);
	hutch_cmds_init_gone(&s->cmds);
	if (s->kind->ended)
		s->kind->ended(s);   /* before the answer: rm, then snapshot rm at once */
	hutch_sup_volumes_let_go(s); /* and volume rm */
	if (!retiring)
		return;
	if (r < 0) {
		/* Cannot hide it: remove everything before answering. */
		hutch_log_errno(HUTCH_LOG_WARN, r, "retire '%s', removing it now", s->paths.dir);
		hutch_sup_teardown_finish(s);
		(void)hutch_rm_rf_at(AT_FDCWD, s->paths.dir);
		s->end.retired = true; /* nothing left to do */
		return;
	}
	s->end.retired = true;
	s->end.finish_pending = true;
}

void hutch_sup_teardown_finish(struct sup *s)
{
	struct hutch_err err = { 0 };

	s->end.finish_pending = false;
	if (s->end.finished)
		return;
	s->end.finished = true;
	/* The disk: its maker ended if setup failed first, its file system
	 * shut down unwritten; its root fd, closed last, keeps it until then,
	 * so that its unmount and the loop device's end (~0.1 s) come after
	 * the rest (a volume's use, an image's). */
	hutch_sup_fork_done(s);    /* the next fork's forker, made ahead: its loop device first */
	closep(&s->disk_watch);    /* the change lists' group goes here, not in init's exit */
	if (s->disk_maker_fd >= 0) /* its maker still runs (run.c reaps it as it ends) */
		hutch_loop_close(&s->loop, &s->w_disk_maker, &s->disk_maker_fd);
	hutch_disk_abandon(&s->disk_job);
	hutch_close_many(s->disk_fds, HUTCH_DISK_MOUNTS);
	hutch_disk_shutdown(s->disk_fds[HUTCH_DISK_ROOT]);
	hutch_initproc_release_mntns(s); /* the sandbox's files and mounts go now */
	hutch_netlog_keep(s); /* before the egress's end: its last records follow the file */
	if (hutch_net_plan_done(&s->net.plan, &err) < 0)
		hutch_log(HUTCH_LOG_WARN, "%s", err.msg);
	remove_cgroups(s); /* done before the answer unless setup failed */
	if (s->kind->done)
		s->kind->done(s); /* after the mounts went: an image's prune may take the layers */
	hutch_sup_env_done(s);
	hutch_sup_volumes_done(s); /* and volume rm the volumes */
	hutch_event(s, "torn down: %s", s->end.reason ? s->end.reason : "creation failed");
	hutch_events_keep(s);
	hutch_journal_keep(s); /* still open: the last answers' lines */
	/* Last: until here the retired dir's state.json names the cgroups
	 * for gc, should this process die midway. */
	if (s->end.retired)
		(void)hutch_rm_rf_at(AT_FDCWD, s->paths.dir);
	closep(&s->disk_fds[HUTCH_DISK_ROOT]);
	closep(&s->disk_fds[HUTCH_DISK_FILE]);
}
