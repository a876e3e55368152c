/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OCI runtime command line (see oci.h): global options as runc takes
 * them (--root, --log, --log-format, --systemd-cgroup, --debug), then the
 * dispatch to each command's file: create, start and state (runtime.c),
 * kill, delete, features, ps and run (control.c), exec, pause, resume and
 * update (exec.c), list and the refused ones (list.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "oci-internal.h"
#include "oci.h"

static const char usage[] =
        "usage: hutch oci [GLOBAL OPTIONS] COMMAND [OPTIONS] CONTAINER-ID\n"
        "       (also as hutch-runc: a runtime for containerd's runc shim and podman)\n"
        "\n"
        "commands (runtime-spec 1.x, as runc):\n"
        "  create [-b BUNDLE] [--pid-file F] ID  build the container; its process waits for start\n"
        "  start ID                              start the container's process\n"
        "  state ID                              print the container's state (JSON)\n"
        "  kill [--all] ID [SIGNAL]              signal the container's process (default TERM;\n"
        "                                        --all: each of its processes; 0: only ask)\n"
        "  delete [--force] ID                   remove a stopped or created one (--force: any)\n"
        "  run [-b BUNDLE] [-d] [--pid-file F] ID  create and start; without -d wait for the end\n"
        "  create/run --console-socket PATH      process.terminal: the pty's master goes there\n"
        "  create/run/exec --preserve-fds N      our fds 3..3+N-1 are the process's 3, 4, ...\n"
        "  ps [--format table|json] ID           host pids of the container's processes\n"
        "  exec [-d] [--pid-file F] [-t --console-socket S] [--process FILE | ID CMD...]\n"
        "                                        another process in a running container\n"
        "  pause ID / resume ID                  freeze / thaw the container's processes\n"
        "  update [-r FILE|-] [--memory N] [--cpu-quota N] [--cpu-period N] [--pids-limit N] ID\n"
        "                                        new limits, no higher than the instance type's;\n"
        "                                        -r: linux.resources JSON, as at create\n"
        "  list [-q] [--format table|json]       the containers under --root\n"
        "  features                              what this runtime supports (JSON)\n"
        "  checkpoint, restore: refused (CRIU images hold the whole memory); events: not\n"
        "    supported (read the container's cgroup)\n"
        "\n"
        "global options: --root DIR (default " HUTCH_OCI_DEFAULT_ROOT "), --log FILE,\n"
        "  --log-format text|json, --debug,\n"
        "  --systemd-cgroup (linux.cgroupsPath is SLICE:PREFIX:NAME; cgroups nest under the "
        "caller's)\n"
        "linux.resources: every field honoured, lowered to the instance type's, or refused\n"
        "  naming the field (realtime, rdma; what this host's cgroups lack); see\n"
        "  docs/kubernetes.md\n"
        "annotations: run.hutch.network (none, all, allow:HOST,...), run.hutch.ttl-seconds,\n"
        "  run.hutch.instance-type (nano ... 2xlarge)\n"
        "pods: linux.namespaces[].path may name another hutch container's network, ipc,\n"
        "  uts and user namespaces (podman pod, the CRI's pause container); its id range\n"
        "  and network policy are then the pod's; a network namespace CNI made (the CRI's,\n"
        "  not the host's) is joined with no capability over it, its policy the cluster's\n"
        "  (run.hutch.network other than none is refused); see docs/kubernetes.md\n"
        "hooks: prestart, createRuntime (create, the caller's namespaces), createContainer\n"
        "  (create, the container's), startContainer (start, in the container), poststart,\n"
        "  poststop (delete); the state JSON on stdin, each within its timeout\n";

static bool is_opt(const char *a, size_t klen, const char *name)
{
	return strlen(name) == klen && !strncmp(a, name, klen);
}

/* Global options before the command; returns the command's index. */
static int parse_global(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i], *eq = strchr(a, '='), *val = NULL;
		size_t klen = eq ? (size_t)(eq - a) : strlen(a);

		if (!strcmp(a, "--version") || !strcmp(a, "-v") || !strcmp(a, "--help") ||
		    !strcmp(a, "-h"))
			return i; /* handled as a command */
		if (is_opt(a, klen, "--root") || is_opt(a, klen, "--log") ||
		    is_opt(a, klen, "--log-format") || is_opt(a, klen, "--criu") ||
		    is_opt(a, klen, "--rootless")) {
			val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
			if (!val)
				return -1;
		} else if (!is_opt(a, klen, "--systemd-cgroup") && !is_opt(a, klen, "--debug")) {
			return -1;
		}
		if (is_opt(a, klen, "--root"))
			hutch_oci_opts.root = val;
		else if (is_opt(a, klen, "--log"))
			hutch_oci_opts.log = val;
		else if (is_opt(a, klen, "--log-format"))
			hutch_oci_opts.log_json = !strcmp(val, "json");
		else if (is_opt(a, klen, "--systemd-cgroup"))
			hutch_oci_opts.systemd_cgroup = true;
		/* --debug, --criu, --rootless: accepted */
	}
	return i;
}

static const struct {
	const char *name;
	int (*fn)(int, char **);
} cmds[] = {
	{ "create", hutch_oci_cmd_create },   { "start", hutch_oci_cmd_start },
	{ "state", hutch_oci_cmd_state },     { "kill", hutch_oci_cmd_kill },
	{ "delete", hutch_oci_cmd_delete },   { "features", hutch_oci_cmd_features },
	{ "run", hutch_oci_cmd_run },         { "ps", hutch_oci_cmd_ps },
	{ "exec", hutch_oci_cmd_exec },       { "pause", hutch_oci_cmd_pause },
	{ "resume", hutch_oci_cmd_resume },   { "update", hutch_oci_cmd_update },
	{ "list", hutch_oci_cmd_list },       { "checkpoint", hutch_oci_cmd_refused },
	{ "restore", hutch_oci_cmd_refused }, { "events", hutch_oci_cmd_refused },
};

const char *hutch_oci_command(size_t i)
{
	return i < sizeof(cmds) / sizeof(cmds[0]) ? cmds[i].name : NULL;
}

int hutch_oci_main(int argc, char **argv)
{
	int i = parse_global(argc, argv);
	const char *cmd;

	if (i < 0 || i >= argc) {
		fputs(usage, stderr);
		return 1;
	}
	cmd = argv[i];
	if (hutch_oci_opts.log) {
		hutch_oci_opts.log_fd =
		        open(hutch_oci_opts.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (hutch_oci_opts.log_fd < 0)
			return hutch_oci_fail("--log '%s': %s", hutch_oci_opts.log,
			                      strerror(errno));
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-v") || !strcmp(cmd, "version")) {
		printf("hutch-runc version %s\nspec: %s\n", HUTCH_VERSION, HUTCH_OCI_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(usage, stdout);
		return 0;
	}
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
		if (!strcmp(cmd, cmds[k].name))
			return cmds[k].fn(argc - i, argv + i);
	return hutch_oci_fail("unknown command '%s'; see 'hutch oci --help'", cmd);
}
