/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress log per command (issue 29; docs/history.md "Egress per
 * command"): every connection the egress proxy decides (netpolicy.h,
 * struct hutch_egress_observer) becomes one JSON record, attributed to the
 * command that made it, kept in a ring (the last HUTCH_NETLOG_RING, for
 * GET /v1/net_log) and appended to net.jsonl in the state dir (0600,
 * bounded: past HUTCH_NETLOG_FILE_MAX / 2 it becomes net.1.jsonl and a new
 * one starts; moved beside the tombstone at the end, as the journal).
 *
 * Attribution: with one command running, the connection is its own (by
 * time: "owner": "time"); with several, the supervisor looks for the
 * process that holds the client's socket (netowner.c: "owner": "exact"),
 * and only if that fails gives it to every running command ("shared").
 *
 * Made only for a sandbox whose network has an egress (allow, all) and
 * --net-log on (the default): a sandbox of network none, or with the log
 * off, never allocates or calls anything here.
 */
#ifndef HUTCH_SUP_NETLOG_H
#define HUTCH_SUP_NETLOG_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

struct sup;

#define HUTCH_NETLOG_RING       1024      /* records answered by GET /v1/net_log */
#define HUTCH_NETLOG_FILE_MAX   (4 << 20) /* net.jsonl and net.1.jsonl together */
#define HUTCH_NETLOG_FILE       "net.jsonl"
#define HUTCH_NETLOG_OLD_FILE   "net.1.jsonl"
#define HUTCH_NETLOG_SUFFIX     ".net" /* $RT/.gone/<id>.net after the end */
#define HUTCH_NETLOG_OLD_SUFFIX ".net.1"

/* Before the network is served: the plan's observer is the log (nothing
 * when the sandbox has no egress). */
void hutch_netlog_start(struct sup *s);
/* The records with seq >= since, at most limit of them, as the body of GET
 * /v1/net_log ({"records": [...], "next": N, "dropped": N}); malloc'd, its
 * length in *ret_len; NULL when out of memory. */
char *hutch_netlog_answer(struct sup *s, uint64_t since, size_t limit, size_t *ret_len);
/* Command cmd's egress summary at its end (its result's and journal
 * line's "egress", docs/api.md): {"allowed", "refused", "bytes_up",
 * "bytes_down", "dns", "dns_refused"} and "open" (connections not ended:
 * their bytes so far), "shared", "complete": false when so; NULL when it
 * made no connection and asked no name, or there is no log. */
cJSON *hutch_netlog_summary(struct sup *s, uint64_t cmd);
/* The sandbox has ended: the files move beside the tombstone. */
void hutch_netlog_keep(struct sup *s);
/* The supervisor is done (after the egress is freed). */
void hutch_netlog_free(struct sup *s);

/* netowner.c: the process inside the sandbox that holds the socket
 * socket:[inode] (hutch_egress_sock_inode()), found from the host in the
 * fds of init's descendants; the holders found last (hints, zeroed at
 * first) are looked at first. Fills *ret_pid (that process), *ret_top and
 * *ret_top_sid (its ancestor among init's children: pid and session, all
 * as the sandbox sees them). 0, -ENOENT (not found), or -errno. */
#define HUTCH_NETOWNER_HINTS 4
struct hutch_netowner_hints {
	pid_t pid[HUTCH_NETOWNER_HINTS]; /* host pids; 0 none */
	unsigned next;
};
int hutch_netowner_find(pid_t init_pid, uint32_t inode, struct hutch_netowner_hints *hints,
                        pid_t *ret_pid, pid_t *ret_top, pid_t *ret_top_sid);

#endif
