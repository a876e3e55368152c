/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress log per command (netlog.h): the egress's observer, the ring of
 * record lines, net.jsonl and GET /v1/net_log's answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cleanup.h"
#include "cmd.h"
#include "events.h"
#include "fdutil.h"
#include "journal.h"
#include "netlog.h"
#include "netpolicy.h"
#include "state.h"
#include "supervisor.h"
#include "util.h"

#define LINES_KEPT 32 /* command lines of the commands attributed last */

struct hutch_netlog {
	struct sup *s;
	struct hutch_egress_observer obs;
	char *ring[HUTCH_NETLOG_RING]; /* record lines, no newline; seq % RING */
	uint64_t n;                    /* records ever made: the next seq */
	int fd;                        /* net.jsonl, -EBADF: not yet (or failed) */
	size_t bytes;
	bool failed, kept;
	struct slot { /* a command's line as it was when a connection was its own */
		uint64_t id;
		int32_t pid;
		char *line;
		/* its records so far, for its summary at its end */
		uint64_t allowed, refused, up, down, dns, dns_refused;
		bool shared;
	} cmds[LINES_KEPT];
	unsigned ncmds;
	struct hutch_netowner_hints hints; /* the exact owner's last holders */
};

/* ---- attribution ---- */

static bool is_running(const struct sup *s, uint64_t id)
{
	for (const struct cmd *c = s->cmds.list; c; c = c->next)
		if (c->id == id)
			return c->state != CMD_DONE;
	return false;
}

static struct slot *slot_of(struct hutch_netlog *l, uint64_t id)
{
	for (unsigned i = 0; i < LINES_KEPT; i++)
		if (l->cmds[i].id == id)
			return &l->cmds[i];
	return NULL;
}

/* c's slot, made when it has none: the oldest of a command that has
 * ended is reused (a running one's summary is still to come). */
static void keep_line(struct hutch_netlog *l, const struct cmd *c)
{
	const char *line = hutch_journal_cmd_line(c);
	struct slot *k = NULL;

	if (slot_of(l, c->id))
		return;
	for (unsigned tries = 0; tries < LINES_KEPT; tries++) {
		k = &l->cmds[l->ncmds++ % LINES_KEPT];
		if (!k->id || !is_running(l->s, k->id))
			break;
	}
	free(k->line);
	*k = (struct slot){ .id = c->id, .pid = c->pid };
	k->line = line ? strndup(line, 512) : NULL;
}

static void attribute(void *ud, const struct sockaddr_in *client, const struct sockaddr_in *server,
                      struct hutch_net_owner *ret)
{
	struct hutch_netlog *l = ud;
	struct sup *s = l->s;
	pid_t pid = 0, top = 0, sid = 0;
	uint32_t inode = 0;

	for (struct cmd *c = s->cmds.list; c; c = c->next)
		if (c->state != CMD_DONE)
			ret->running++;
	/* Several at once: the holder of the client's socket (TCP; NULL:
	 * UDP) says which; the socket by its addresses (sock_diag). */
	if (ret->running > 1 && client && server &&
	    hutch_egress_sock_inode(s->net.plan.egress, client, server, &inode) == 0 &&
	    hutch_netowner_find(s->init_pid, inode, &l->hints, &pid, &top, &sid) == 0)
		for (struct cmd *c = s->cmds.list; c; c = c->next)
			if (c->state != CMD_DONE && c->pid > 0 &&
			    (c->pid == top || c->pid == sid)) {
				ret->cmd[0] = c->id;
				ret->ncmd = 1;
				ret->exact = true;
				ret->pid = pid;
				keep_line(l, c);
				return;
			}
	for (struct cmd *c = s->cmds.list; c; c = c->next)
		if (c->state != CMD_DONE && ret->ncmd < HUTCH_NET_OWNER_CMDS) {
			ret->cmd[ret->ncmd++] = c->id;
			keep_line(l, c);
		}
}

/* ---- records ---- */

static void add_time(cJSON *o, const char *key, int64_t at_ms)
{
	char t[48];
	size_t len;

	hutch_format_time(at_ms / 1000, t, sizeof(t));
	len = strlen(t);
	if (len > 1 && t[len - 1] == 'Z') /* "...Z" with milliseconds */
		snprintf(t + len - 1, sizeof(t) - len + 1, ".%03dZ", (int)(at_ms % 1000));
	cJSON_AddStringToObject(o, key, t);
}

static void add_addr(cJSON *o, const char *key, const struct sockaddr_in *sa)
{
	char ip[INET_ADDRSTRLEN], buf[INET_ADDRSTRLEN + 8];

	inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
	snprintf(buf, sizeof(buf), "%s:%u", ip, ntohs(sa->sin_port));
	cJSON_AddStringToObject(o, key, buf);
}

static void add_owner(struct hutch_netlog *l, cJSON *o, const struct hutch_net_owner *w)
{
	cJSON *arr;

	cJSON_AddStringToObject(o, "owner", !w || !w->ncmd ? "none" : w->exact ? "exact" : "time");
	if (w && w->ncmd > 1)
		cJSON_AddBoolToObject(o, "shared", true);
	arr = cJSON_AddArrayToObject(o, "commands");
	for (unsigned i = 0; w && arr && i < w->ncmd; i++) {
		cJSON *c = cJSON_CreateObject();

		if (!c)
			break;
		cJSON_AddNumberToObject(c, "id", (double)w->cmd[i]);
		const struct slot *k = slot_of(l, w->cmd[i]);

		if (k) {
			cJSON_AddNumberToObject(c, "pid", k->pid);
			if (k->line)
				cJSON_AddStringToObject(c, "command", k->line);
		}
		if (w->exact)
			cJSON_AddNumberToObject(c, "process", w->pid);
		cJSON_AddItemToArray(arr, c);
	}
}

static cJSON *record_json(struct hutch_netlog *l, const struct hutch_net_conn_record *r)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "seq", (double)l->n);
	add_time(o, "time", r->at_ms);
	cJSON_AddStringToObject(o, "kind", r->kind);
	if (r->proto)
		cJSON_AddStringToObject(o, "proto", r->proto);
	cJSON_AddStringToObject(o, "host", r->host);
	add_addr(o, "address", r->dst);
	cJSON_AddNumberToObject(o, "port", ntohs(r->dst->sin_port));
	cJSON_AddStringToObject(o, "verdict", r->allowed ? "allowed" : "refused");
	cJSON_AddStringToObject(o, "rule", r->rule);
	if (!r->allowed)
		cJSON_AddStringToObject(o, "reason", r->reason);
	if (r->upstream)
		add_addr(o, "upstream", r->upstream);
	if (!r->bytes_unknown) {
		cJSON_AddNumberToObject(o, "bytes_up", (double)r->bytes_up);
		cJSON_AddNumberToObject(o, "bytes_down", (double)r->bytes_down);
	}
	cJSON_AddNumberToObject(o, "ms", (double)(r->end_ms - r->at_ms));
	add_owner(l, o, r->owner);
	return o;
}

static int open_file(struct hutch_netlog *l, const char *name)
{
	char path[sizeof(l->s->paths.dir) + 32];

	int fd;

	snprintf(path, sizeof(path), "%s/%s", l->s->paths.dir, name);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	/* Held while it is written, as the journal's: a reader of an ended
	 * sandbox's file (hutch net-log) waits for its last records. */
	if (fd >= 0)
		(void)flock(fd, LOCK_EX | LOCK_NB);
	return fd;
}

/* One line to net.jsonl; past half the bound the file becomes net.1.jsonl. */
static void write_line(struct hutch_netlog *l, const char *text, size_t len)
{
	const char *dir = l->s->paths.dir;
	char from[sizeof(l->s->paths.dir) + 32], to[sizeof(l->s->paths.dir) + 32];
	int r;

	if (l->failed || (l->kept && l->fd < 0))
		return;
	if (l->fd >= 0 && l->bytes + len + 1 > HUTCH_NETLOG_FILE_MAX / 2 && !l->kept) {
		snprintf(from, sizeof(from), "%s/" HUTCH_NETLOG_FILE, dir);
		snprintf(to, sizeof(to), "%s/" HUTCH_NETLOG_OLD_FILE, dir);
		(void)rename(from, to);
		closep(&l->fd);
		l->bytes = 0;
	}
	if (l->fd < 0)
		l->fd = open_file(l, HUTCH_NETLOG_FILE);
	r = l->fd < 0 ? -errno : hutch_write_all(l->fd, text, len);
	if (r >= 0)
		r = hutch_write_all(l->fd, "\n", 1);
	if (r < 0) {
		l->failed = true;
		hutch_event(l->s,
		            "net log: write " HUTCH_NETLOG_FILE ": %s; no more lines are written",
		            strerror(-r));
		return;
	}
	l->bytes += len + 1;
}

/* The record's line to the file and the ring (o is taken). */
static void keep(struct hutch_netlog *l, cJSON *o)
{
	char *text = o ? cJSON_PrintUnformatted(o) : NULL;
	char **slot = &l->ring[l->n % HUTCH_NETLOG_RING];

	cJSON_Delete(o);
	if (!text)
		return;
	write_line(l, text, strlen(text));
	free(*slot);
	*slot = text;
	l->n++;
}

/* A record counts in the summary of each command it is attributed to. */
static void count(struct hutch_netlog *l, const struct hutch_net_owner *w, bool refused,
                  const struct hutch_net_conn_record *r)
{
	for (unsigned i = 0; w && i < w->ncmd; i++) {
		struct slot *k = slot_of(l, w->cmd[i]);

		if (!k)
			continue;
		k->shared |= w->ncmd > 1;
		if (!r) {
			k->dns++;
			k->dns_refused += refused;
			continue;
		}
		k->allowed += !refused;
		k->refused += refused;
		if (!r->bytes_unknown) {
			k->up += r->bytes_up;
			k->down += r->bytes_down;
		}
	}
}

static void record(void *ud, const struct hutch_net_conn_record *r)
{
	struct hutch_netlog *l = ud;

	count(l, r->owner, !r->allowed, r);
	keep(l, record_json(l, r));
}

static const char *rcode_name(int rcode)
{
	static const char *const names[] = { "NOERROR",  "FORMERR", "SERVFAIL",
		                             "NXDOMAIN", "NOTIMP",  "REFUSED" };

	return rcode >= 0 && rcode < (int)ELEMENTSOF(names) ? names[rcode] : "OTHER";
}

/* One answer of the DNS stub: the name, what it resolved to, who asked. */
static void dns(void *ud, const struct hutch_net_dns_record *r)
{
	struct hutch_netlog *l = ud;
	cJSON *o = cJSON_CreateObject(), *arr;
	char ip[INET_ADDRSTRLEN];

	if (!o)
		return;
	cJSON_AddNumberToObject(o, "seq", (double)l->n);
	add_time(o, "time", r->at_ms);
	cJSON_AddStringToObject(o, "kind", "dns");
	cJSON_AddStringToObject(o, "host", r->name);
	if (r->qtype == 1 || r->qtype == 28)
		cJSON_AddStringToObject(o, "type", r->qtype == 1 ? "A" : "AAAA");
	else
		cJSON_AddNumberToObject(o, "type", r->qtype);
	cJSON_AddStringToObject(o, "answer", rcode_name(r->rcode));
	arr = cJSON_AddArrayToObject(o, "addresses");
	for (size_t i = 0; arr && i < r->naddrs; i++) {
		inet_ntop(AF_INET, &r->addrs[i], ip, sizeof(ip));
		cJSON_AddItemToArray(arr, cJSON_CreateString(ip));
	}
	cJSON_AddStringToObject(o, "verdict", r->refused ? "refused" : "allowed");
	cJSON_AddStringToObject(o, "rule", r->rule);
	if (r->refused)
		cJSON_AddStringToObject(o, "reason", "name not in the allow list: NXDOMAIN");
	add_owner(l, o, r->owner);
	count(l, r->owner, r->refused, NULL);
	keep(l, o);
}

/* ---- the supervisor's side ---- */

void hutch_netlog_start(struct sup *s)
{
	struct hutch_netlog *l;

	if (!s->cfg->net_log || !s->net.plan.policy ||
	    hutch_net_policy_wired_mode(s->net.plan.policy) == HUTCH_NET_NONE)
		return;
	l = calloc(1, sizeof(*l));
	if (!l)
		return; /* no log: the sandbox carries on */
	l->s = s;
	l->fd = -EBADF;
	l->obs = (struct hutch_egress_observer){
		.attribute = attribute, .record = record, .dns = dns, .ud = l
	};
	s->netlog = l;
	s->net.plan.observer = &l->obs;
}

char *hutch_netlog_answer(struct sup *s, uint64_t since, size_t limit, size_t *ret_len)
{
	struct hutch_netlog *l = s->netlog;
	const struct hutch_net_policy *pol = s->net.plan.policy;
	uint64_t n = l ? l->n : 0;
	uint64_t first = n > HUTCH_NETLOG_RING ? n - HUTCH_NETLOG_RING : 0;
	struct hutch_buf b;
	char head[160];
	uint64_t i = since > first ? since : first, end;

	hutch_buf_init(&b, SIZE_MAX);
	end = limit && n - (i < n ? i : n) > limit ? i + limit : n;
	/* The mode that applies: none with --egress CIDRs is wired as all
	 * (its table in the netns narrows it), all with an empty list as
	 * none. Mode all whose kernel could not log the NAT path (natlog.c). */
	snprintf(head, sizeof(head),
	         "{\"mode\":\"%s\",%s\"dropped\":%llu,\"next\":%llu,\"records\":[",
	         pol ? hutch_net_mode_name(hutch_net_policy_wired_mode(pol)) : "none",
	         l && pol && hutch_net_policy_wired_mode(pol) == HUTCH_NET_ALL &&
	                         !hutch_egress_logs_nat(s->net.plan.egress)
	                 ? "\"complete\":false,"
	                 : "",
	         (unsigned long long)(since < first ? first - since : 0),
	         (unsigned long long)(end > i ? end : i));
	if (hutch_buf_append(&b, head, strlen(head)) < 0)
		return NULL;
	for (uint64_t k = i; k < end; k++) {
		const char *line = l->ring[k % HUTCH_NETLOG_RING];
		if ((k > i && hutch_buf_append(&b, ",", 1) < 0) ||
		    hutch_buf_append(&b, line, strlen(line)) < 0) {
			hutch_buf_done(&b);
			return NULL;
		}
	}
	if (hutch_buf_append(&b, "]}", 2) < 0) {
		hutch_buf_done(&b);
		return NULL;
	}
	*ret_len = b.len;
	return b.data;
}

cJSON *hutch_netlog_summary(struct sup *s, uint64_t cmd)
{
	struct hutch_netlog *l = s->netlog;
	struct hutch_net_open open;
	const struct slot *k;
	cJSON *o;

	if (!l)
		return NULL;
	/* First: a NAT flow's end read now is a record (counted below). */
	hutch_egress_open_of(s->net.plan.egress, cmd, &open);
	k = slot_of(l, cmd);
	if (!open.n && (!k || !(k->allowed || k->refused || k->dns)))
		return NULL;
	o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "allowed", (double)((k ? k->allowed : 0) + open.allowed));
	cJSON_AddNumberToObject(o, "refused", (double)(k ? k->refused : 0));
	cJSON_AddNumberToObject(o, "bytes_up", (double)((k ? k->up : 0) + open.bytes_up));
	cJSON_AddNumberToObject(o, "bytes_down", (double)((k ? k->down : 0) + open.bytes_down));
	cJSON_AddNumberToObject(o, "dns", (double)(k ? k->dns : 0));
	cJSON_AddNumberToObject(o, "dns_refused", (double)(k ? k->dns_refused : 0));
	if (open.n)
		cJSON_AddNumberToObject(o, "open", open.n);
	if (k && k->shared)
		cJSON_AddBoolToObject(o, "shared", true);
	if (hutch_net_policy_wired_mode(s->net.plan.policy) == HUTCH_NET_ALL &&
	    !hutch_egress_logs_nat(s->net.plan.egress))
		cJSON_AddBoolToObject(o, "complete", false);
	return o;
}

void hutch_netlog_keep(struct sup *s)
{
	struct hutch_netlog *l = s->netlog;

	if (!l || l->kept)
		return;
	/* The fd follows the file; no more rotation (its name has changed). */
	(void)hutch_gone_keep(s->paths.dir, s->id, HUTCH_NETLOG_FILE, HUTCH_NETLOG_SUFFIX);
	(void)hutch_gone_keep(s->paths.dir, s->id, HUTCH_NETLOG_OLD_FILE, HUTCH_NETLOG_OLD_SUFFIX);
	l->kept = true;
}

void hutch_netlog_free(struct sup *s)
{
	struct hutch_netlog *l = s->netlog;

	if (!l)
		return;
	s->net.plan.observer = NULL;
	for (size_t i = 0; i < HUTCH_NETLOG_RING; i++)
		free(l->ring[i]);
	for (size_t i = 0; i < LINES_KEPT; i++)
		free(l->cmds[i].line);
	if (l->fd >= 0)
		close(l->fd);
	free(l);
	s->netlog = NULL;
}
