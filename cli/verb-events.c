/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch events ID: the supervisor's own log of a sandbox (supervisor/
 * events.h): what it did and why, with times, also after the sandbox has
 * ended (kept beside its tombstone for 7 days).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "events.h"
#include "fdutil.h"
#include "state.h"
#include "verbs.h"

static int cmd_events(struct hutch_cli_args *a)
{
	_cleanup_close_ int fd = -EBADF;
	struct hutch_paths p;
	char path[4300], buf[65536];
	ssize_t n;
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch events ID");
	r = hutch_cli_resolve_as(a->pos[0], HUTCH_CLI_GONE_OK, &p);
	if (r == HUTCH_CLI_SKIP) /* ended: its log is kept beside its tombstone */
		snprintf(path, sizeof(path), "%s/.gone/%s" HUTCH_EVENTS_SUFFIX, hutch_runtime_dir(),
		         a->pos[0]);
	else if (r)
		return r;
	else
		snprintf(path, sizeof(path), "%s/events.log", p.dir);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && r == HUTCH_CLI_SKIP) {
		/* Just ended: its supervisor moves the log after DELETE /
		 * answered; until then it is in the retired state dir. */
		snprintf(path, sizeof(path), "%s/.dead-%s/events.log", hutch_runtime_dir(),
		         a->pos[0]);
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			snprintf(path, sizeof(path), "%s/.gone/%s" HUTCH_EVENTS_SUFFIX,
			         hutch_runtime_dir(), a->pos[0]);
		if (fd < 0) /* moved meanwhile */
			fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND,
		                      "no log of sandbox '%s' (%s): it was kept 7 days, or the "
		                      "sandbox never started",
		                      a->pos[0], strerror(errno));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (hutch_write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "write: %s", strerror(errno));
	return n < 0 ? hutch_cli_fail(HUTCH_EXIT_FAILURE, "read '%s': %s", path, strerror(errno))
	             : 0;
}

const struct hutch_cli_verb hutch_verb_events = {
	.name = "events",
	.synopsis = "ID",
	.about = "Print the supervisor's log of a sandbox: its creation with timings, setup\n"
	         "steps, idle sleep and wake, a claim from a warm pool, why it ended and its\n"
	         "teardown, one timestamped line each. Kept 7 days after the sandbox ended;\n"
	         "at most 64 KiB.\n",
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_events,
};
