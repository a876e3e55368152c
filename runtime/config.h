/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sandbox options (the cloud sandbox's names, defaults and errors) and the
 * instance type table. Pure: no syscalls, unit-tested.
 */
#ifndef HUTCH_CONFIG_H
#define HUTCH_CONFIG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "netpolicy.h"
#include "portspec.h"
#include "volume.h"

#define HUTCH_DEFAULT_INSTANCE_TYPE "medium"
#define HUTCH_DEFAULT_TTL           86400
#define HUTCH_DEFAULT_REGION        "nl-north-1"
#define HUTCH_MAX_TTL               (366ull * 86400)
#define HUTCH_DEFAULT_MAX_OUTPUT    (4ull << 20) /* per stream, per command */
#define HUTCH_MAX_MAX_OUTPUT        (256ull << 20)
#define HUTCH_REGION_MAX            63
#define HUTCH_DEFAULT_SETUP_TIMEOUT 600
#define HUTCH_SETUP_SCRIPT_MAX      (1u << 20) /* bytes */
#define HUTCH_HOOK_CMD_MAX          (64u << 10)
#define HUTCH_IMAGE_HOST            "host" /* --image host: the host-derived root */
#define HUTCH_IMAGE_REF_MAX         200    /* image.h HUTCH_IMAGE_NAME_MAX */
#define HUTCH_IMAGE_STORE_MAX       1024
#define HUTCH_IMAGE_MANIFEST_LEN    71 /* "sha256:" + 64 hex */

/* The executor's /run keeps all output as the cloud does, up to this per
 * stream; beyond it the command is killed and the answer is an error that
 * names the option (it cannot flag a cut as the native /run does). */
/* The session journal (supervisor/journal.h): its bound on disk. */
#define HUTCH_DEFAULT_JOURNAL_MAX     (4ull << 20)
#define HUTCH_MAX_JOURNAL_MAX         (1ull << 30)
#define HUTCH_DEFAULT_EXEC_MAX_OUTPUT (64ull << 20)
#define HUTCH_MAX_EXEC_MAX_OUTPUT     (1ull << 30)

/* The cloud's secrets=: NAME=VALUE strings for the commands' environment. */
#define HUTCH_SECRETS_MAX      32
#define HUTCH_SECRET_NAME_MAX  128
#define HUTCH_SECRET_VALUE_MAX (64 << 10)
struct hutch_secrets {
	size_t n;
	char *env[HUTCH_SECRETS_MAX + 1]; /* "NAME=VALUE", NULL-terminated */
};

struct hutch_instance_type {
	/* in the row, not a pointer: the table needs no relocation at start
	 * (issue 31: CLI start) */
	char name[8];
	uint64_t cpu_millis; /* 1000 = one vCPU */
	uint64_t memory_bytes;
	uint64_t disk_bytes; /* size cap of each writable tmpfs */
	uint64_t pids_max;
};

/* The table, in size order; *ret_n gets its length. */
const struct hutch_instance_type *hutch_instance_types(size_t *ret_n);
/* NULL if unknown. */
const struct hutch_instance_type *hutch_instance_type_find(const char *name);
/* "nano, micro, ..." for error messages. */
const char *hutch_instance_type_names(void);

struct hutch_config {
	const struct hutch_instance_type *type;
	uint64_t ttl_seconds;
	uint64_t idle_timeout_seconds;
	char region[HUTCH_REGION_MAX + 1];
	char network_spec[4096];
	struct hutch_net_policy net;
	/* --host-port: TCP ports of the host's loopback the sandbox may reach
	 * as host.hutch.internal (all, allow). */
	size_t nhost_ports;
	uint16_t host_ports[HUTCH_NET_HOST_PORTS_MAX];
	/* -p: sandbox ports published on the host (portspec.h). */
	size_t npublish;
	struct hutch_port_spec publish[HUTCH_PUBLISH_MAX];
	/* -v (volume.c): host directories and named volumes mounted inside;
	 * NULL when none. */
	struct hutch_volumes *volumes;
	/* --header-binding (netopt.c): NULL when none; its own pages, which
	 * hold the secrets (netpolicy.h). */
	struct hutch_net_bindings *header_bindings;
	/* The upstream DNS server of the supervisor (HUTCH_RESOLVER), "" =
	 * the first IPv4 nameserver of the host's /etc/resolv.conf. The text
	 * as given (shown, and part of the pool key) and its value, parsed
	 * once by the option's setter (sin_family 0 when unset). */
	char resolver[64];
	struct sockaddr_in resolver_addr;
	/* The address pool of mode all (HUTCH_NET_POOL), "" = the default;
	 * text and value as above (prefix 0 when unset). */
	char net_pool[32];
	struct hutch_net_pool net_pool_value;
	/* Set while the sandbox waits in a warm pool (pool.h), "" otherwise. */
	char pool_key[64];
	uint64_t max_output_bytes;
	uint64_t journal_max_bytes; /* the session journal's bound on disk, 0: none */
	/* --change-lists: init keeps each command's change list (init/changes.h). */
	bool change_lists;
	/* --net-log: the supervisor keeps the egress log (supervisor/netlog.h). */
	bool net_log;
	bool nat_log; /* network all: the NAT path in the egress log too (opt-in) */
	/* access (the cloud's): "all", "files" (files only, no commands) or
	 * "none"; what the session's requests may do (supervisor/api/api.c). */
	char access[8];
	/* "disk" (runtime/disk.h; tmpfs where it cannot be made) or "tmpfs":
	 * what the writable places are. */
	char workspace[8];
	/* hutch fork (cli/verb-fork.c): the name of the forker's socket in
	 * $RT/.disk whose disk, a copy of the source's, this sandbox takes
	 * (runtime/disk.h, "Forks"); "" otherwise. The creator's only: no
	 * option, API field or pool key sets it. */
	char disk_from[64];
	/* With disk_from: an fd the fork's supervisor inherits and watches
	 * while it awaits that name (hutch fork's POST /fork connection:
	 * readable once answered, the names made before; -1: none), closed
	 * once it has its disk. The creator's only, as disk_from. */
	int disk_from_fd;
	/* hutch build (cli/verb-build.c): never a warm pool's sandbox (one
	 * handed over already, which would outlive a killed builder). The
	 * creator's only, as disk_from. */
	bool no_pool;
	/* --secret NAME=VALUE (options-cloud.c): given to every command's
	 * environment, never shown (names only); NULL when none. */
	struct hutch_secrets *secrets;
	/* The executor's /run: bytes of each stream kept whole, more is an
	 * error (HUTCH_DEFAULT_EXEC_MAX_OUTPUT). */
	uint64_t executor_max_output_bytes;
	/* --executor-port: "ADDR:PORT" of the executor's TCP listener
	 * (supervisor/api/executor.c), "" = none; its value, parsed once by the setter. */
	char executor_listen[32];
	struct sockaddr_in executor_addr;
	/* Lifecycle (hooks.c): malloc'ed, NULL when unset. */
	char *setup_script; /* shell script text, run once before create returns */
	uint64_t setup_script_timeout_seconds;
	char *on_create;  /* shell command, after setup, before create returns */
	char *on_destroy; /* shell command at close and at TTL expiry */
	/* --image: "host" (the host-derived root) or the name of an image
	 * of the store (image/); the store's path (HUTCH_IMAGE_STORE, ""
	 * = /var/lib/hutch); and the image's manifest digest, filled by the
	 * CLI when it resolves the name (hutch_cli_resolve_image()), part of
	 * the pool key so that a re-imported name never serves the old
	 * content. */
	char image[HUTCH_IMAGE_REF_MAX + 1];
	char image_store[HUTCH_IMAGE_STORE_MAX + 1];
	char image_manifest[HUTCH_IMAGE_MANIFEST_LEN + 1];
	/* --snapshot NAME set image: the CLI fetches nothing, names it a
	 * snapshot (a missing one is said so). */
	bool image_snapshot;
	/* --snapshot of a full snapshot (processes and memory): its name; the
	 * image is "host" (a plain sandbox, the dump's kind), made cold (no
	 * pool) and its processes restored from the dump (supervisor/
	 * fullrestore.c); "" for every other sandbox. CLI only (set by
	 * hutch_cli_resolve_image()), carried to the supervisor by its fork. */
	char full_snapshot[HUTCH_IMAGE_REF_MAX + 1];
	/* --description: free text for people, shown with the options;
	 * malloc'ed, NULL when unset. */
	char *description;
	/* --no-limits (CLI only, not an API option): no cgroup at all, so no
	 * CPU, memory or pids limit and no idle sleep; how an ordinary user
	 * runs on a host that cannot delegate cgroup v2 controllers. */
	bool no_limits;
	/* hutch run's (CLI only): its command comes on the hand-over, so the
	 * API's library is loaded on the socket's first connection, as a
	 * container's (hutch_api_open()): a run nobody asks never maps it. */
	bool api_on_demand;
	/* HUTCH_UPSTREAM_CA: a PEM file of the CAs that header bindings'
	 * upstream servers are verified against instead of the host's trust
	 * store (malloc'ed, NULL when unset). */
	char *upstream_ca;
};

/* Implemented by the option table (options.c, which lists the options):
 * every option at its default (medium, ttl 86400, idle 0, nl-north-1,
 * network none...). */
void hutch_config_init(struct hutch_config *c);
void hutch_config_done(struct hutch_config *c);
/* options.c: set one option from its API name and a string value (the
 * CLI's and the environment's form): instance_type, ttl_seconds,
 * setup_script (the script text), host_ports (adds one port per call),
 * resolver ("IP" or "IP:PORT"), net_pool ("A.B.C.D/N")... */
int hutch_config_set(struct hutch_config *c, const char *key, const char *value,
                     struct hutch_err *err);
/* True when the sandbox's root is an image of the store (not "host"). */
bool hutch_config_has_image(const struct hutch_config *c);
/* --image given as a file: "/abs", "./rel", "../rel" or with the
 * transport prefix skopeo and podman write ("oci:", "oci-archive:",
 * "docker-archive:"). Returns the path after the prefix, else NULL. Pure. */
const char *hutch_image_source_path(const char *image);
/* Cross-option rules (region rule, implemented network modes). */
int hutch_config_validate(const struct hutch_config *c, struct hutch_err *err);
/* "IP" or "IP:PORT" (IPv4, port 53 by default); -EINVAL if invalid. */
int hutch_config_parse_resolver(const char *value, struct sockaddr_in *ret);
/* --executor-port: "PORT" (on 127.0.0.1) or "ADDR:PORT" (IPv4), port 0 =
 * any free one, "" = none; fills *ret and the canonical "ADDR:PORT" (""
 * for none) into canon. -EINVAL if invalid. */
int hutch_config_parse_listen(const char *value, struct sockaddr_in *ret, char *canon, size_t size);
/* options.c: the options as JSON (for state.json, /status, create --json),
 * with the instance type's limits. */
cJSON *hutch_config_to_json(const struct hutch_config *c);
/* The same object written as key's value (NULL: a value or the top) by a
 * writer (base/jsonw.h): state.json without libcjson. */
struct hutch_jw;
void hutch_config_write(const struct hutch_config *c, const char *key, struct hutch_jw *w);

#endif
