/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every creating verb (run, create, fork, replay) shares: the
 * configuration completed from the environment and checked, the image
 * resolved, a warm pool's sandbox claimed or a new one created, and a
 * failure said with its class's exit code (docs/errors.md).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "config.h"
#include "pool.h"
#include "sandbox.h"
#include "verbs.h"

/* --progress: where the setup steps' output goes while create waits (-1:
 * nowhere); 0 or an exit code after saying why. */
static int progress_fd(const char *when, int *ret_fd)
{
	if (!when || !strcmp(when, "auto"))
		*ret_fd = isatty(2) ? 2 : -1;
	else if (!strcmp(when, "always"))
		*ret_fd = 2;
	else if (!strcmp(when, "never"))
		*ret_fd = -1;
	else
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "invalid --progress '%s': give auto, always or never", when);
	return 0;
}

static int create_sandbox(struct hutch_config *cfg, const char *progress, int stream_fd,
                          struct hutch_created *c);

int hutch_cli_create_sandbox(struct hutch_config *cfg, const char *progress,
                             struct hutch_created *c)
{
	return create_sandbox(cfg, progress, -EBADF, c);
}

int hutch_cli_create_run(struct hutch_config *cfg, const char *progress, int stream_fd,
                         struct hutch_created *c)
{
	return create_sandbox(cfg, progress, stream_fd, c);
}

static int create_sandbox(struct hutch_config *cfg, const char *progress, int stream_fd,
                          struct hutch_created *c)
{
	struct hutch_setup_failure setup = { 0 };
	struct hutch_err err = { 0 };
	enum hutch_errc cls;
	int r, progress_to = -1;

	c->handover_fd = c->sup_pidfd = -EBADF; /* (a pool's was handed over to the pool) */
	c->command_sent = false;

	r = progress_fd(progress, &progress_to);
	if (r)
		return r;
	r = hutch_cli_config_from_env(cfg);
	if (r)
		return r;
	for (size_t i = 0; cfg->header_bindings && i < cfg->header_bindings->n; i++)
		if (cfg->header_bindings->b[i].literal)
			fprintf(stderr,
			        "hutch: warning: header binding '%s:%s' has its value on the "
			        "command "
			        "line, where ps and shell history show it; use @env:NAME, "
			        "@file:PATH "
			        "or @fd:N\n",
			        cfg->header_bindings->b[i].host, cfg->header_bindings->b[i].header);
	r = hutch_config_validate(cfg, &err);
	if (r < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "%s", err.msg);
	r = hutch_cli_resolve_image(cfg, progress && !strcmp(progress, "never"));
	if (r)
		return r;
	hutch_cli_say_root(cfg, progress_to);
	/* a fork's disk is its own: no pool's sandbox has it; a build's
	 * sandbox must end with its builder */
	r = cfg->disk_from[0] || cfg->no_pool
	            ? 0
	            : hutch_pool_claim(cfg, hutch_runtime_dir(), stream_fd, c, &err);
	if (r > 0)
		return 0;      /* a warm sandbox from `hutch pool` */
	hutch_err_clear(&err); /* no pool, or nothing ready: create cold */
	r = hutch_sandbox_create_run(cfg, hutch_runtime_dir(), stream_fd, c, &setup, progress_to,
	                             &err);
	if (r == -ECANCELED && setup.step[0]) {
		size_t n = setup.shown ? 0 : strlen(setup.tail);
		fprintf(stderr, "hutch: cannot create sandbox: %s; sandbox %s was deleted\n",
		        err.msg, setup.id);
		if (n) {
			fprintf(stderr, "hutch: last %zu bytes of its output:\n%s%s", n, setup.tail,
			        setup.tail[n - 1] == '\n' ? "" : "\n");
		}
		return HUTCH_EXIT_SETUP;
	}
	/* The class says the exit code (docs/errors.md): an image without a
	 * shell or python3 is usage, a -p address in use or not on this host
	 * a conflict, a -v directory that is not there not found, the process
	 * limit reached a limit (not the host's fault), what this host lacks
	 * not capable;
	 * for the last and any other failure, doctor may say more. */
	cls = r < 0 ? hutch_err_class(&err) : HUTCH_ERRC_NONE;
	/* a fork's disk that will not come (runtime/disk.h): its fork says
	 * why, from the source's answer (a snapshot route, a refusal) */
	if (r == -ENOLINK && cfg->disk_from[0])
		return hutch_errc_exit(cls);
	if (cls == HUTCH_ERRC_USAGE || cls == HUTCH_ERRC_CONFLICT || cls == HUTCH_ERRC_NOT_FOUND ||
	    cls == HUTCH_ERRC_LIMIT)
		return hutch_cli_fail(hutch_errc_exit(cls), "cannot create sandbox: %s", err.msg);
	if (r < 0)
		return hutch_cli_fail(
		        hutch_errc_exit(cls),
		        "cannot create sandbox: %s (run 'hutch doctor' to check this host)",
		        err.msg);
	return 0;
}
