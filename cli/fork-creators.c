/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What hutch fork's two routes share (verb-fork.c's, by disk or by a
 * snapshot; fork-full.c's, --full): the N creates run at once, each in a
 * *creator*, a child of ours that sends back what its create gave (the
 * hand-over socket with it), handed over all or none (supervisor/sandbox.h);
 * the source's config; the forks' root; their ids printed.
 *
 * A creator given a disk's name creates at once: its supervisor takes the
 * disk itself once its name appears (the forker's socket in $RT/.disk,
 * listening; after init's clone), so that by disk the creates run while
 * the source is frozen and cloned; it asks the forker for the disk, which
 * answers once the disk is filled.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "config.h"
#include "disk.h"
#include "fork-creators.h"
#include "options.h"
#include "proto.h"
#include "sandbox.h"
#include "state.h"
#include "stream.h"
#include "util.h"
#include "verbs.h"

/* What a creator sends back: its create's exit code (0: made) and what
 * the create gave, the hand-over socket as an fd with it. */
struct creator_msg {
	int r;
	struct hutch_created c;
};

/* The creator's life: the create (as hutch create's, its output on our
 * stderr; on a disk named, taken by its supervisor once made), its result
 * sent. It dies with us (PDEATHSIG): a create then ends with its creator
 * gone, and the supervisor deletes the sandbox (supervisor/sandbox.h). */
_Noreturn static void creator_main(struct hutch_cli_args *a, const char *disk, int sock,
                                   pid_t parent)
{
	struct creator_msg m = { .r = HUTCH_EXIT_FAILURE };

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);
	hutch_sandbox_not_inherited(&sock, 1); /* ours, not the supervisor's */
	if (disk[0])
		snprintf(a->cfg->disk_from, sizeof(a->cfg->disk_from), "%s", disk);
	m.r = hutch_cli_create_sandbox(a->cfg, a->progress, &m.c);
	(void)hutch_proto_send(sock, HUTCH_MSG_READY, 0, &m, sizeof(m), &m.c.handover_fd,
	                       m.r == 0 && m.c.handover_fd >= 0 ? 1 : 0);
	_exit(0);
}

/* The n creators started, each on its disk (cr[i].disk, set) or none;
 * not_theirs: an fd of ours they close (a full fork's record, whose lock
 * must end with us, not with a supervisor a creator leaves behind). */
int hutch_fork_creators_start(struct hutch_cli_args *a, struct hutch_fork_creator *cr, size_t n,
                              int not_theirs)
{
	pid_t parent = getpid();

	for (size_t i = 0; i < n; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: socketpair: %s",
			                      strerror(errno));
		(void)fflush(stdout);
		(void)fflush(stderr);
		cr[i].pid = fork();
		if (cr[i].pid == 0) {
			close(sv[0]);
			for (size_t j = 0; j < i; j++) /* its siblings' are not its own */
				close(cr[j].sock);
			if (not_theirs >= 0)
				close(not_theirs);
			creator_main(a, cr[i].disk, sv[1], parent);
		}
		close(sv[1]);
		if (cr[i].pid < 0) {
			close(sv[0]);
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: fork: %s",
			                      strerror(errno));
		}
		cr[i].sock = sv[0];
	}
	return 0;
}
/* Every creator's answer, in order, and every creator reaped: 0 with the
 * n forks in c[], or the first failure's exit code (*failed: its index)
 * with every fork made dropped (its supervisor deletes it). */
int hutch_fork_creators_collect(struct hutch_fork_creator *cr, size_t n, struct hutch_created *c,
                                size_t *failed)
{
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		struct hutch_msg_hdr hdr = { 0 };
		struct creator_msg m = { 0 };
		int fd = -EBADF;
		size_t nfds = 1;
		ssize_t k = cr[i].sock < 0
		                    ? -EBADF
		                    : hutch_proto_recv(cr[i].sock, &hdr, &m, sizeof(m), &fd, &nfds);

		closep(&cr[i].sock);
		if (k == (ssize_t)sizeof(m) && hdr.type == HUTCH_MSG_READY && m.r == 0 &&
		    nfds == 1) {
			c[i] = m.c;
			c[i].handover_fd = fd;
			c[i].sup_pidfd = -EBADF; /* the creator's number: a fork waits on none */
			continue;
		}
		if (nfds == 1)
			closep(&fd);
		c[i].handover_fd = c[i].sup_pidfd = -EBADF;
		if (!r) {
			r = k == (ssize_t)sizeof(m) && m.r ? m.r : HUTCH_EXIT_FAILURE;
			*failed = i;
		}
	}
	for (size_t i = 0; i < n; i++)
		while (cr[i].pid > 0 && waitpid(cr[i].pid, NULL, 0) < 0 && errno == EINTR)
			;
	for (size_t i = 0; r && i < n; i++)
		hutch_created_drop(&c[i]);
	return r;
}

/* The creators given up (each waiting for a disk that will not come
 * ends; a create on one ends with its forker), and reaped. */
void hutch_fork_creators_give_up(struct hutch_fork_creator *cr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		closep(&cr[i].sock);
	for (size_t i = 0; i < n; i++)
		while (cr[i].pid > 0 && waitpid(cr[i].pid, NULL, 0) < 0 && errno == EINTR)
			;
}

/* The source's config: its state.json's, which its supervisor wrote once
 * it was running (the same as GET /status's: a round trip and the
 * supervisor's wake-up fewer on the fork's path, 3-20 ms at load 9-12),
 * else (not readable, not running yet) GET /status's. */
int hutch_fork_source_config(const struct hutch_paths *p, cJSON **ret)
{
	const char *st;

	if (hutch_state_read(p, ret) == 0) {
		st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(*ret, "status"));
		if (st && !strcmp(st, "running") &&
		    cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(*ret, "config")))
			return 0;
		cJSON_Delete(*ret);
		*ret = NULL;
	}
	return hutch_cli_call(p->sock, "GET", "/status", NULL, 200, ret);
}

/* The forks' root: the snapshot's (its name) or the source's image with
 * a disk each. */
int hutch_fork_root(struct hutch_cli_args *a, const char *v, bool by_disk)
{
	const char *opt = by_disk ? "image" : "snapshot";
	struct hutch_err err = { 0 };

	a->cfg->no_limits = a->no_limits;
	if (hutch_option_parse(hutch_option_find(opt), a->cfg, v, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "fork: %s", err.msg);
	return 0;
}

/* --json's object o (its other fields set) given "forks": the ids, and
 * printed; o NULL: the ids, one a line. */
void hutch_fork_print_ids(cJSON *o, const struct hutch_created *c, size_t n)
{
	cJSON *ids = o ? cJSON_AddArrayToObject(o, "forks") : NULL;
	_cleanup_free_ char *t = NULL;

	for (size_t i = 0; i < n; i++)
		if (!o)
			printf("%s\n", c[i].id);
		else if (ids)
			cJSON_AddItemToArray(ids, cJSON_CreateString(c[i].id));
	if (o) {
		t = cJSON_PrintUnformatted(o);
		printf("%s\n", t ? t : "{}");
	}
}

int hutch_fork_hand_over(struct hutch_cli_args *a, const char *src, const cJSON *ans,
                         struct hutch_created *c, size_t n,
                         void (*print)(const struct hutch_cli_args *a, const char *src,
                                       const cJSON *ans, const struct hutch_created *c, size_t n))
{
	sigset_t set, old;
	int r = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	(void)sigprocmask(SIG_BLOCK, &set, &old);
	print(a, src, ans, c, n);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		r = hutch_cli_fail(HUTCH_EXIT_FAILURE, "write the forks' ids: %s; deleting them",
		                   strerror(errno));
		for (size_t i = 0; i < n; i++)
			hutch_created_drop(&c[i]);
	}
	for (size_t i = 0; !r && i < n; i++)
		if (hutch_created_ack(&c[i]) < 0)
			r = hutch_cli_fail(HUTCH_EXIT_FAILURE,
			                   "fork %s: its supervisor went away before the hand-over",
			                   c[i].id);
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}
