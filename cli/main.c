/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hutch command line: finds the verb and hands it to the parser
 * (args.c), which runs it. The verbs live in verb-sandbox.c,
 * verb-procs.c, verb-pool.c, cp.c and doctor.c; every error ends as one
 * message that names the problem and the fix, and a documented exit code
 * (cli.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "config.h"
#include "fdutil.h"
#include "log.h"
#include "oci.h"
#include "state.h"
#include "util.h"
#include "verbs.h"

static const char *const main_usage =
        "usage: hutch COMMAND [OPTIONS]\n"
        "\n"
        "Local, isolated, throw-away Linux sandboxes with Python, a shell and /workspace.\n"
        "\n"
        "commands:\n"
        "  run [OPTIONS] -- CMD [ARG...]   create a sandbox, run CMD, print its output, delete it\n"
        "                                  (run, exec --json: the result and output as JSON)\n"
        "  create [OPTIONS]                create a sandbox and print its id\n"
        "  exec ID [OPTIONS] -- CMD...     run CMD in a sandbox, exit with its exit code\n"
        "  exec -d ID [OPTIONS] -- CMD...  start CMD in the background, print its process id\n"
        "  ps ID [--json]                  list a sandbox's background processes\n"
        "  logs ID PROC [-f]               print (-f: follow) a background process's output\n"
        "  kill ID PROC [--grace S]        stop a background process and all its children\n"
        "  stdin ID PROC [--close]         write to a background process's stdin (exec -d -i)\n"
        "  ls [-q|--json|--format T] [-f K=V]  list sandboxes (filters, templates as docker's)\n"
        "  inspect ID                      show a sandbox's status and options (JSON)\n"
        "  stats [ID...] [--no-stream]     show what sandboxes use: CPU, memory, pids, disk, net\n"
        "  events [ID] [-f]                the supervisor's log: creation, sleep, why it ended\n"
        "                                  (no ID: every sandbox's; -f: follow)\n"
        "  journal ID [--verify] [-f]      every request and command, hash-chained (audit)\n"
        "  diff ID [--since SNAP|SEQ]      files created, modified, deleted since the start\n"
        "  replay JOURNAL|ID [--into ID]   run a journal again in a new sandbox (its test)\n"
        "  net-log ID [--json]             connections allowed and refused, per command\n"
        "  set-timeout ID SECONDS          delete the sandbox SECONDS from now (not at its TTL)\n"
        "  port ID [PORT]                  where a sandbox's published ports are on the host\n"
        "  rm [--json] ID... | --all       delete sandboxes (dead and gone on return)\n"
        "  cp SRC DST                      copy files/directories: LOCAL ID:PATH or ID:PATH LOCAL\n"
        "  gc                              remove what dead sandboxes left behind\n"
        "  pool start|stop|ls|key          keep sandboxes of a configuration ready (warm pool)\n"
        "  image pull|import|ls|inspect|rm|prune|build-default  the OCI image store\n"
        "  volume create|ls|inspect|rm     named volumes (-v NAME:PATH), kept after sandboxes\n"
        "  snapshot ID [NAME] | ls|inspect|rm  a sandbox's filesystem as an image; spawn "
        "with\n"
        "                                  create --snapshot NAME\n"
        "  fork ID [-n N]                  N new sandboxes from a live one's filesystem\n"
        "  rollback ID SNAPSHOT            return a live sandbox's filesystem to a snapshot\n"
        "  build FILE [-t NAME]            a snapshot from a build file: image, files, copies,\n"
        "                                  commands, env (JSON)\n"
        "  oci create|start|state|kill|delete|exec|ps|run|features  an OCI runtime (as runc; "
        "hutch-runc)\n"
        "  doctor [--json]                 check that this host can run sandboxes\n"
        "  version [--json]                print the version\n"
        "  completion bash|zsh|fish        print a shell completion script\n"
        "\n"
        "Options may come before or after a sandbox id; '--' ends them. 'hutch COMMAND --help'\n"
        "shows a command's options. Exit codes: the command's own for\n"
        "run/exec; 64 usage error, 65 no such sandbox, 66 sandbox expired or deleted, 69 host\n"
        "not capable (missing subordinate ids or kernel feature), 70 other failure, 71 setup "
        "script or\n"
        "on_create hook failed, 124 timeout.\n"
        "State lives in $HUTCH_RUNTIME_DIR (at most 512 bytes; default /run/hutch as root,\n"
        "else $XDG_RUNTIME_DIR/hutch or /tmp/hutch-UID). Network: "
        "HUTCH_RESOLVER=IP[:PORT]\n"
        "is the DNS server the sandboxes' DNS stub asks (default: the host's first IPv4\n"
        "nameserver); HUTCH_NET_POOL=CIDR the addresses of --network all "
        "(default " HUTCH_NET_POOL_DEFAULT ").\n";

static int cmd_version(struct hutch_cli_args *a)
{
	static const char text[] = "hutch " HUTCH_VERSION "\n";
	static const char json[] = "{\"version\": \"" HUTCH_VERSION "\"}\n";
	/* A constant line by write(2), not stdio: no printf machinery
	 * (vfprintf's pages of libc), no stdout buffer (malloc's heap, its
	 * brk and getrandom, an fstat) in the start the CLI start's
	 * benchmark times (issue 31). */
	int r = a->json ? hutch_write_all(STDOUT_FILENO, json, sizeof(json) - 1)
	                : hutch_write_all(STDOUT_FILENO, text, sizeof(text) - 1);

	if (r < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE,
		                      "cannot write the version to stdout: %s; give the command "
		                      "a stdout it can write to",
		                      strerror(-r));
	return 0;
}

static const struct hutch_cli_verb verb_version = {
	.name = "version",
	.synopsis = "[--json]",
	.about = "Print hutch's version.\n",
	.opts = hutch_cli_json_opts,
	.help_pool = HUTCH_CLI_POOL_OF(hutch_cli_json_pool),
	.run = cmd_version,
};

/* Every verb, for the dispatch and for the parser's "does not apply".
 * One per line (clang-format would pack them into columns, and every new
 * verb would rewrite the table). */
/* clang-format off */
static const struct hutch_cli_verb *const verbs[] = {
	&hutch_verb_run,
	&hutch_verb_create,
	&hutch_verb_exec,
	&hutch_verb_ls,
	&hutch_verb_inspect,
	&hutch_verb_rm,
	&hutch_verb_gc,
	&hutch_verb_doctor,
	&hutch_verb_ps,
	&hutch_verb_logs,
	&hutch_verb_kill,
	&hutch_verb_stdin,
	&hutch_verb_cp,
	&verb_version,
	&hutch_verb_pool_start,
	&hutch_verb_pool_stop,
	&hutch_verb_pool_ls,
	&hutch_verb_pool_key,
	&hutch_verb_completion,
	&hutch_verb_stats,
	&hutch_verb_events,
	&hutch_verb_journal,
	&hutch_verb_diff,
	&hutch_verb_replay,
	&hutch_verb_net_log,
	&hutch_verb_set_timeout,
	&hutch_verb_port,
	&hutch_verb_image_pull,
	&hutch_verb_image_import,
	&hutch_verb_image_ls,
	&hutch_verb_image_inspect,
	&hutch_verb_image_rm,
	&hutch_verb_image_prune,
	&hutch_verb_image_build_default,
	&hutch_verb_volume_create,
	&hutch_verb_volume_ls,
	&hutch_verb_volume_inspect,
	&hutch_verb_volume_rm,
	&hutch_verb_snapshot,
	&hutch_verb_fork,
	&hutch_verb_rollback,
	&hutch_verb_build,
	&hutch_verb_snapshot_ls,
	&hutch_verb_snapshot_inspect,
	&hutch_verb_snapshot_rm,
	NULL,
};
/* clang-format on */

/* Not root: the runtime dir must be the caller's alone before any verb
 * reads sandboxes from it or makes one there (another user could have made
 * /tmp/hutch-<uid> first, with sandboxes of theirs in it). */
static int check_runtime_dir(const char *verb, int argc, char **argv)
{
	/* Names in the array, not literals: "version" as a literal is merged
	 * into the tail of http_parser's "invalid HTTP version", on a page of
	 * read-only data that `hutch version` would fault in for it alone. */
	static const char skip[][sizeof("completion")] = { "version", "completion", "doctor" };
	struct hutch_err err = { 0 };

	for (size_t i = 0; i < ELEMENTSOF(skip); i++)
		if (!strcmp(verb, skip[i]))
			return 0;
	if (geteuid() == 0)
		return 0;
	for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 0;
	if (hutch_runtime_dir_check(hutch_runtime_dir(), &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_NOT_CAPABLE, "%s", err.msg);
	return 0;
}

/* Docker's verbs that hutch has under another name, or not at all: what
 * to use instead (docs/docker.md). */
static const struct {
	char verb[12], instead[128]; /* in the row: no pointers to relocate at start */
} docker_verbs[] = {
	{ "stop", "'hutch rm ID' deletes a sandbox (none stops to start again); --idle-timeout S "
	          "freezes an idle one until its next request" },
	{ "start", "sandboxes do not stop and start again: 'hutch create' makes a new one" },
	{ "restart", "sandboxes do not stop and start again: 'hutch rm ID', then 'hutch create'" },
	{ "wait", "'hutch run' and 'hutch exec' wait for their command; 'hutch logs ID PROC -f' "
	          "follows a background process to its end" },
	{ "attach", "'hutch exec -it ID' starts a shell on a terminal in the sandbox" },
	{ "top", "'hutch ps ID' lists a sandbox's background processes, 'hutch stats ID' its use" },
	{ "images", "'hutch image ls'" },
	{ "pull", "'hutch image pull REF'" },
	{ "rmi", "'hutch image rm NAME'" },
	{ "pause", "--idle-timeout S freezes a sandbox after S idle seconds; a request wakes it" },
	{ "unpause", "a frozen (sleeping) sandbox wakes by itself at its next request" },
	{ "rename", "sandboxes have ids, not names; --description TEXT keeps a note" },
};

/* The verbs with verbs of their own. Their names in an array, not string
 * literals: the linker merges a literal into the tail of an equal string
 * anywhere in the binary ("image" into "... of the image" of image/), and
 * main() compared argv[1] with it on a page of read-only data no other
 * part of the start reads (issue 31: CLI start). */
enum group {
	GROUP_POOL,
	GROUP_IMAGE,
	GROUP_VOLUME,
	GROUP_SNAPSHOT,
	GROUP_NONE
};
static const char group_names[][sizeof("snapshot")] = {
	[GROUP_POOL] = "pool",
	[GROUP_IMAGE] = "image",
	[GROUP_VOLUME] = "volume",
	[GROUP_SNAPSHOT] = "snapshot",
};

/* "oci" as a literal was merged into oci/'s "/run/hutch-oci", 64 KiB
 * further into read-only data: a page fault at every start (issue 31). */
static const char oci_verb[] = "oci";

static enum group group_of(const char *verb)
{
	for (size_t i = 0; i < ELEMENTSOF(group_names); i++)
		if (!strcmp(verb, group_names[i]))
			return (enum group)i;
	return GROUP_NONE;
}

int main(int argc, char **argv)
{
	const char *verb = argc > 1 ? argv[1] : NULL;
	int r;

	const char *prog = argc > 0 ? strrchr(argv[0], '/') : NULL;

	hutch_proctitle_init(argc, argv);
	hutch_log_init(2, getenv("HUTCH_DEBUG") ? HUTCH_LOG_DEBUG : HUTCH_LOG_WARN, "hutch");
	/* Called as hutch-runc (a symlink): the OCI runtime command line. */
	prog = prog ? prog + 1 : argc > 0 ? argv[0] : "";
	if (!strcmp(prog, "hutch-runc"))
		return hutch_oci_main(argc, argv);
	if (verb && !strcmp(verb, oci_verb))
		return hutch_oci_main(argc - 1, argv + 1);
	if (!verb || !strcmp(verb, "--help") || !strcmp(verb, "-h") || !strcmp(verb, "help")) {
		fputs(main_usage, verb ? stdout : stderr);
		return verb ? 0 : HUTCH_EXIT_USAGE;
	}
	if (!strcmp(verb, "--version"))
		verb = "version";
	switch (group_of(verb)) {
	case GROUP_POOL: /* an ordinary user's pools are in their runtime dir */
		return check_runtime_dir(verb, argc, argv)
		               ?: hutch_cli_pool(argc - 1, argv + 1, verbs);
	case GROUP_IMAGE:
		return hutch_cli_image(argc - 1, argv + 1, verbs);
	case GROUP_VOLUME:
		return hutch_cli_volume(argc - 1, argv + 1, verbs);
	case GROUP_SNAPSHOT:
		return check_runtime_dir(verb, argc, argv)
		               ?: hutch_cli_snapshot(argc - 1, argv + 1, verbs);
	default:
		break;
	}
	for (size_t i = 0; verbs[i]; i++) {
		if (strcmp(verb, verbs[i]->name) != 0)
			continue;
		r = check_runtime_dir(verb, argc, argv);
		return r ? r : hutch_cli_run(verbs[i], verbs, argc - 1, argv + 1);
	}
	for (size_t i = 0; i < ELEMENTSOF(docker_verbs); i++)
		if (!strcmp(verb, docker_verbs[i].verb))
			return hutch_cli_fail(HUTCH_EXIT_USAGE,
			                      "unknown command '%s' (docker's): %s", verb,
			                      docker_verbs[i].instead);
	return hutch_cli_fail(HUTCH_EXIT_USAGE, "unknown command '%s'; see 'hutch --help'", verb);
}
