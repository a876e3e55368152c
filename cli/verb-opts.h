/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rows of the option tables of run, create and exec (cli/verb-sandbox.c):
 * a command's options, and docker's habits (docs/docker.md): the flags
 * that mean the same work (-w, --workdir, --env-file, run --rm), the
 * others are refused naming what hutch does instead (HUTCH_CLI_REFUSE
 * rows are not in --help).
 */
#ifndef HUTCH_VERB_OPTS_H
#define HUTCH_VERB_OPTS_H

#include <stddef.h>

#include "args.h"

/* exec's modes, for the options that apply in one only. The rows use the
 * including file's A(field). */
#define ATTACHED (1u << 0)
#define DETACHED (1u << 1)

/* The help texts of these rows and the docker refusals' messages, one
 * macro a text (VERB_HELP_<id>(X) calls X(id, "text")), for the including
 * file's pool (HUTCH_CLI_POOL, args.h), whose HELP() the rows use: a file
 * lists the texts of the rows it uses (build and fork: --progress and
 * --no-limits; each pool held all ~2 KiB of them before), run's, create's
 * and exec's file all of them (VERB_OPTS_HELP). */
#define VERB_HELP_cwd(X) X(cwd, "working directory (default /workspace; -w, --workdir as docker)")
#define VERB_HELP_env(X) X(env, "set an environment variable (repeatable)")
#define VERB_HELP_timeout(X) \
	X(timeout, "kill the command and its children after S seconds (exit 124)")
#define VERB_HELP_interactive(X)                                                              \
	X(interactive, "stream standard input to CMD, byte-exact, until its end (without -i " \
	               "stdin is not read; with -d: CMD's stdin stays open, see hutch stdin)")
#define VERB_HELP_tty(X)                                                                  \
	X(tty, "run CMD on a terminal of the sandbox (-it: interactive; stdin must be a " \
	       "terminal; exec -it ID alone starts a login shell)")
#define VERB_HELP_no_limits(X)                                                                     \
	X(no_limits, "create the sandbox without a cgroup: no CPU, memory or pids limit, no idle " \
	             "sleep (for ordinary users where cgroup v2 is not delegated)")
#define VERB_HELP_progress(X)                                                                     \
	X(progress, "show the setup script's and on_create's output on stderr as it comes: auto " \
	            "(default: when stderr is a terminal), always, never")
#define VERB_HELP_workdir(X) X(workdir, "docker's name of --cwd")
#define VERB_HELP_env_file(X)                                                                \
	X(env_file, "set the environment variables of FILE, as docker reads it: NAME=VALUE " \
	            "lines, '#' comments, a NAME alone takes this shell's value (repeatable)")
#define VERB_HELP_mount(X)                                                                    \
	X(mount, "docker's form of -v (SRC:PATH): read-only unless readonly=false (docker's " \
	         "default is read-write)")
#define VERB_HELP_docker_user(X)                                                         \
	X(docker_user, "%s: commands always run as appuser (uid 1000, no capabilities, " \
	               "no_new_privs); there is no other user to choose")
#define VERB_HELP_docker_name(X)                                                                \
	X(docker_name, "%s: sandboxes have ids, not names (create prints it, 'hutch ls' lists " \
	               "them, any unique prefix works); --description TEXT keeps a note that "  \
	               "'hutch ls -f description=TEXT' finds")
#define VERB_HELP_docker_label(X)                                                           \
	X(docker_label, "%s: no labels; --description TEXT keeps a note that 'hutch ls -f " \
	                "description=TEXT' finds")
#define VERB_HELP_docker_rm(X)                                                                 \
	X(docker_rm, "%s: 'hutch create' keeps the sandbox until 'hutch rm ID' or its --ttl; " \
	             "'hutch run' deletes it when CMD ends")
#define VERB_HELP_docker_detach(X)                                                              \
	X(docker_detach, "%s: 'hutch run' waits for CMD and deletes the sandbox; for one that " \
	                 "stays, 'hutch create', then 'hutch exec -d ID -- CMD' (a background " \
	                 "process; 'hutch logs ID PROC -f' follows it)")
/* clang-format off */
#define VERB_OPTS_HELP(X) \
	VERB_HELP_cwd(X) \
	VERB_HELP_env(X) \
	VERB_HELP_timeout(X) \
	VERB_HELP_interactive(X) \
	VERB_HELP_tty(X) \
	VERB_HELP_no_limits(X) \
	VERB_HELP_progress(X) \
	VERB_HELP_workdir(X) \
	VERB_HELP_env_file(X) \
	VERB_HELP_mount(X) \
	VERB_HELP_docker_user(X) \
	VERB_HELP_docker_name(X) \
	VERB_HELP_docker_label(X) \
	VERB_HELP_docker_rm(X) \
	VERB_HELP_docker_detach(X)
/* clang-format on */

/* The options of a command, run's and exec's; modes: those of --timeout,
 * --interactive and --tty (exec -d takes -i alone: its stdin stays open
 * for hutch stdin). */
#define COMMAND_OPTS(m)                                                                         \
	{ .name = "cwd",                                                                        \
	  .short_name = 'w',                                                                    \
	  .kind = HUTCH_CLI_STRING,                                                             \
	  A(cwd),                                                                               \
	  .metavar = "DIR",                                                                     \
	  HELP(cwd) },                                                                          \
	        { .name = "env",                                                                \
		  .short_name = 'e',                                                            \
		  .kind = HUTCH_CLI_ENV,                                                        \
		  A(env),                                                                       \
		  .metavar = "K=V",                                                             \
		  HELP(env) },                                                                  \
	        { .name = "timeout",                                                            \
		  .kind = HUTCH_CLI_SECONDS,                                                    \
		  A(timeout),                                                                   \
		  .metavar = "S",                                                               \
		  .range = HUTCH_CLI_RANGE_TIMEOUT,                                             \
		  .modes = (m),                                                                 \
		  HELP(timeout) },                                                              \
	        { .name = "interactive",                                                        \
		  .short_name = 'i',                                                            \
		  .kind = HUTCH_CLI_FLAG,                                                       \
		  A(interactive),                                                               \
		  .modes = (m) ? (m) | DETACHED : 0,                                            \
		  HELP(interactive) },                                                          \
	{                                                                                       \
		.name = "tty", .short_name = 't', .kind = HUTCH_CLI_FLAG, A(tty), .modes = (m), \
		HELP(tty)                                                                       \
	}

/* Of run and create (not an API option: a property of this host). */
#define NO_LIMITS_OPT                                                                      \
	{                                                                                  \
		.name = "no-limits", .kind = HUTCH_CLI_FLAG, A(no_limits), HELP(no_limits) \
	}

#define PROGRESS_OPT                                                                          \
	{                                                                                     \
		.name = "progress", .kind = HUTCH_CLI_STRING, A(progress), .metavar = "WHEN", \
		.complete = "auto always never", HELP(progress)                               \
	}

/* ---- docker's ---- */

/* A refused docker flag: its name, its short name, its message's id. */
#define DOCKER_REFUSE(n, s, msg)                                                    \
	{                                                                           \
		.name = (n), .short_name = (s), .kind = HUTCH_CLI_REFUSE, HELP(msg) \
	}

#define DOCKER_WORKDIR                                                                          \
	{                                                                                       \
		.name = "workdir", .kind = HUTCH_CLI_STRING,                                    \
		.offset = offsetof(struct hutch_cli_args, cwd), .metavar = "DIR", HELP(workdir) \
	}
#define DOCKER_ENV_FILE                                                                           \
	{                                                                                         \
		.name = "env-file", .kind = HUTCH_CLI_ENV_FILE, .metavar = "FILE", HELP(env_file) \
	}
#define DOCKER_USER DOCKER_REFUSE("user", 'u', docker_user)
#define DOCKER_MOUNT                                                                        \
	{                                                                                   \
		.name = "mount", .kind = HUTCH_CLI_MOUNT,                                   \
		.metavar = "type=bind,source=SRC,target=PATH[,readonly=false]", HELP(mount) \
	}
#define DOCKER_NAME       DOCKER_REFUSE("name", 0, docker_name)
#define DOCKER_LABEL      DOCKER_REFUSE("label", 'l', docker_label)
#define DOCKER_CREATE_RM  DOCKER_REFUSE("rm", 0, docker_rm)
#define DOCKER_RUN_DETACH DOCKER_REFUSE("detach", 'd', docker_detach)

#endif
