/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch net-log ID [--since SEQ] [--json] [--follow]: the egress log of a
 * sandbox of network allow or all (docs/api.md, "The egress log"): one
 * line per connection, allowed or refused, by which rule, its bytes each
 * way and the command that made it; --json the answer as it is. A live
 * sandbox's comes from GET /v1/net_log; an ended one's from its kept file
 * (net.jsonl moved beside the tombstone, supervisor/netlog.h), as does
 * --follow's, which prints each record as it is written until the
 * sandbox has ended and its supervisor has let go of the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "netlog.h"
#include "state.h"
#include "stream.h"
#include "util.h"
#include "verbs.h"

#define LINE_MAX_BYTES 65536 /* a record line is far shorter (its command: 512) */

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* "cmd 3 (curl ...)", "cmds 3, 4 (shared)" or "no command". */
static void print_owner(const cJSON *rec)
{
	const cJSON *cmds = cJSON_GetObjectItemCaseSensitive(rec, "commands"), *c;
	int n = cJSON_GetArraySize(cmds), i = 0;

	if (n == 0) {
		printf("  no command");
		return;
	}
	printf("  %s", n > 1 ? "cmds" : "cmd");
	cJSON_ArrayForEach(c, cmds) {
		printf("%s%.0f", i++ ? ", " : " ", num(c, "id"));
		if (n == 1 && *str(c, "command"))
			printf(" (%.60s)", str(c, "command"));
	}
	if (n > 1)
		printf(" (shared: told apart by time only)");
}

/* "3 TIME allowed dns api.test.example A -> 198.51.100.10  all  cmd 4". */
static void print_dns(const cJSON *rec)
{
	const cJSON *a, *type = cJSON_GetObjectItemCaseSensitive(rec, "type");
	int i = 0;

	printf("%.0f %s %-7s dns %s ", num(rec, "seq"), str(rec, "time"), str(rec, "verdict"),
	       str(rec, "host"));
	if (cJSON_IsString(type))
		printf("%s", type->valuestring);
	else
		printf("type %.0f", num(rec, "type"));
	printf(" -> %s", str(rec, "answer"));
	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(rec, "addresses"))
		printf("%s%s", i++ ? ", " : " ", cJSON_IsString(a) ? a->valuestring : "?");
	printf("  %s", str(rec, "rule"));
	print_owner(rec);
	printf("\n");
}

static void print_conn(const cJSON *rec)
{
	const char *host = str(rec, "host"), *proto = str(rec, "proto");

	printf("%.0f %s %-7s %s%s%s%s%s %s  %s", num(rec, "seq"), str(rec, "time"),
	       str(rec, "verdict"), proto, *proto ? " " : "", *host ? host : "", *host ? " " : "",
	       str(rec, "address"), str(rec, "kind"), str(rec, "rule"));
	if (!strcmp(str(rec, "verdict"), "refused"))
		printf(": %s", str(rec, "reason"));
	else if (cJSON_GetObjectItemCaseSensitive(rec, "bytes_up"))
		printf("  up %.0f down %.0f", num(rec, "bytes_up"), num(rec, "bytes_down"));
	else
		printf("  (still open at the end)");
	print_owner(rec);
	printf("\n");
}

static void print_record(const cJSON *rec)
{
	if (!strcmp(str(rec, "kind"), "dns")) {
		print_dns(rec);
		return;
	}
	print_conn(rec);
}

/* ---- the kept files: an ended sandbox's, and --follow ---- */

/* Where the files are: the live state dir, the retired one (it has just
 * ended), or beside the tombstone. */
struct nsrc {
	char live[4300];           /* the live state dir, "" when it had ended */
	char cur[4400], old[4400]; /* the current file and the one before it */
	char dead[4300], dead_cur[4400], gone_cur[4400], gone_old[4400];
	unsigned waited; /* --follow: seconds since the end without a file */
};

static void src_paths(struct nsrc *n, const char *dir, const char *id)
{
	const char *rt = hutch_runtime_dir();

	snprintf(n->gone_cur, sizeof(n->gone_cur), "%s/.gone/%s" HUTCH_NETLOG_SUFFIX, rt, id);
	snprintf(n->gone_old, sizeof(n->gone_old), "%s/.gone/%s" HUTCH_NETLOG_OLD_SUFFIX, rt, id);
	snprintf(n->dead, sizeof(n->dead), "%s/" HUTCH_RETIRED_PREFIX "%s", rt, id);
	snprintf(n->dead_cur, sizeof(n->dead_cur), "%s/" HUTCH_NETLOG_FILE, n->dead);
	snprintf(n->cur, sizeof(n->cur), "%s/" HUTCH_NETLOG_FILE, dir);
	snprintf(n->old, sizeof(n->old), "%s/" HUTCH_NETLOG_OLD_FILE, dir);
}

/* The files of a live sandbox (its state dir live), or of an ended one:
 * in its state dir (stale: its supervisor died), its retired one, or
 * beside its tombstone. */
static void src_locate(struct nsrc *n, const char *live, const char *stale, const char *id)
{
	char dead[4300];

	snprintf(n->live, sizeof(n->live), "%s", live ? live : "");
	if (live) {
		src_paths(n, live, id);
		return;
	}
	if (stale) {
		src_paths(n, stale, id);
		if (access(n->cur, F_OK) == 0)
			return;
	}
	snprintf(dead, sizeof(dead), "%s/" HUTCH_RETIRED_PREFIX "%s", hutch_runtime_dir(), id);
	src_paths(n, dead, id);
	if (access(n->cur, F_OK) < 0) {
		snprintf(n->cur, sizeof(n->cur), "%s", n->gone_cur);
		snprintf(n->old, sizeof(n->old), "%s", n->gone_old);
	}
}

/* A file read as it grows: complete lines only. */
struct nfile {
	int fd;
	char *buf;
	size_t len;
};

struct nout {
	struct hutch_cli_args *a;
	uint64_t since, next, first;
	bool any;
	cJSON *records; /* --json of an ended sandbox: collected */
};

static void record_out(void *ud, const char *line, size_t len)
{
	struct nout *o = ud;
	_cleanup_cjson_ cJSON *rec = cJSON_ParseWithLength(line, len);
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(rec, "seq");

	if (!cJSON_IsNumber(seq) || seq->valuedouble < (double)o->since)
		return; /* not one of ours, or before --since */
	if (!o->any)
		o->first = (uint64_t)seq->valuedouble;
	o->any = true;
	o->next = (uint64_t)seq->valuedouble + 1;
	if (o->records)
		cJSON_AddItemToArray(o->records, TAKE_PTR(rec));
	else if (o->a->json)
		printf("%.*s\n", (int)len, line);
	else
		print_record(rec);
	fflush(stdout);
}

/* The complete lines f has now; 0, or an error exit code. */
static int drain(struct nfile *f, struct nout *o, const char *path)
{
	struct hutch_cli_lines l = {
		.fd = f->fd, .buf = f->buf, .len = f->len, .cap = LINE_MAX_BYTES
	};
	int r = hutch_cli_lines_drain(&l, path, record_out, o);

	f->len = l.len;
	return r;
}

static int open_file(const char *path, int *ret)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 && errno != ENOENT)
		return hutch_cli_fail(errno == EACCES ? HUTCH_EXIT_NOT_CAPABLE : HUTCH_EXIT_FAILURE,
		                      "open '%s': %s", path, strerror(errno));
	*ret = fd;
	return 0;
}

/* The file before the last rotation, whole; then the current one. */
static int read_both(struct nsrc *n, struct nfile *f, struct nout *o)
{
	int r = open_file(n->old, &f->fd);

	if (!r && f->fd >= 0) {
		r = drain(f, o, n->old);
		close(f->fd);
		f->len = 0;
	}
	return r ? r : open_file(n->cur, &f->fd);
}

static bool same_file(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

/* f reads path from now on (f->fd < 0: none yet). */
static void switch_to(struct nfile *f, int fd, const char *path, int in)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = fd;
	f->len = 0;
	(void)inotify_add_watch(in, path, IN_MODIFY | IN_MOVE_SELF);
}

/* --follow after the end without a file open: it may still be in the
 * retired dir or beside the tombstone; none once the retired dir is gone
 * (its teardown has ended: nothing writes one any more), or 10 s on (a
 * supervisor that died). 0: go on, 1: done, or an exit code. */
static int ended_without_file(struct nsrc *n, struct nfile *f, int in)
{
	int fd = -EBADF, r;

	if ((r = open_file(n->dead_cur, &fd)) || (fd < 0 && (r = open_file(n->gone_cur, &fd))))
		return r;
	if (fd >= 0) {
		switch_to(f, fd, n->gone_cur, in);
		return 0;
	}
	return access(n->dead, F_OK) < 0 || ++n->waited > 10 ? 1 : 0;
}

/* One step of --follow: what f's file has now; a file that is no longer
 * the current one (rotated: net.jsonl renamed net.1.jsonl) read to its
 * end, then the new one; at the sandbox's end the files are beside the
 * tombstone, and it is done once its writer has let go. 0: go on, 1:
 * done, or an exit code. */
static int follow_step(struct nsrc *n, struct nfile *f, struct nout *o, int in)
{
	int fd, r;

	if (n->live[0] && access(n->live, F_OK) < 0) {
		n->live[0] = '\0';
		snprintf(n->cur, sizeof(n->cur), "%s", n->gone_cur);
	}
	if (f->fd >= 0 && (r = drain(f, o, n->cur)))
		return r;
	if (f->fd < 0 && !n->live[0])
		return ended_without_file(n, f, in);
	if (f->fd < 0 || !same_file(f->fd, n->cur)) {
		if ((r = open_file(n->cur, &fd)))
			return r;
		/* The old file's last lines were written before its rename,
		 * which has been seen: read them now. */
		if (fd >= 0 && f->fd >= 0 && (r = drain(f, o, n->cur))) {
			close(fd);
			return r;
		}
		if (fd >= 0) {
			switch_to(f, fd, n->cur, in);
			return 0; /* read at the next step */
		}
	}
	if (!n->live[0] && flock(f->fd, LOCK_SH | LOCK_NB) == 0)
		return drain(f, o, n->cur) ?: 1;
	return 0;
}

static int follow(struct nsrc *n, struct nfile *f, struct nout *o)
{
	_cleanup_close_ int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	char ev[4096];
	int r = 0;

	if (in < 0 || (n->live[0] && inotify_add_watch(in, n->live, IN_CREATE | IN_MOVED_TO) < 0))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "watch '%s': %s", n->live,
		                      strerror(errno));
	if (f->fd >= 0)
		(void)inotify_add_watch(in, n->cur, IN_MODIFY | IN_MOVE_SELF);
	while ((r = follow_step(n, f, o, in)) == 0) {
		struct pollfd p = { .fd = in, .events = POLLIN };

		/* Woken by a write, a rotation or the move; at most a second
		 * apart to see the sandbox's end. */
		if (poll(&p, 1, 1000) > 0)
			while (read(in, ev, sizeof(ev)) > 0)
				;
	}
	return r < 0 ? HUTCH_EXIT_FAILURE : r == 1 ? 0 : r;
}

/* The sandbox is live, but its log will never have a record: say why. */
static int nothing_to_follow(const struct hutch_paths *p)
{
	_cleanup_cjson_ cJSON *st = NULL, *j = NULL;
	const cJSON *on;

	if (hutch_state_read(p, &st) == 0) {
		on = cJSON_GetObjectItemCaseSensitive(
		        cJSON_GetObjectItemCaseSensitive(st, "config"), "net_log");
		if (cJSON_IsFalse(on)) {
			printf("the egress log is off (created with --net-log off)\n");
			return 1;
		}
	}
	if (hutch_cli_call(p->sock, "GET", "/v1/net_log?limit=1", NULL, 200, &j) == 0 &&
	    !strcmp(str(j, "mode"), "none")) {
		printf("network none: no connection can leave this sandbox, nothing is logged\n");
		return 1;
	}
	return 0;
}

/* An ended sandbox's records, or --follow's. */
static int from_files(struct hutch_cli_args *a, const char *live, const char *stale, const char *id,
                      uint64_t since)
{
	struct nfile f = { .fd = -EBADF };
	struct nout o = { .a = a, .since = since, .next = since };
	struct nsrc n;
	int r;

	src_locate(&n, live, stale, id);
	if (!live && access(n.cur, F_OK) < 0 && access(n.old, F_OK) < 0 && errno == ENOENT)
		return hutch_cli_no_record(id, "egress log",
		                           "an egress log is kept 7 days after the sandbox ended, "
		                           "and none is written for network none or --net-log off");
	if (!(f.buf = malloc(LINE_MAX_BYTES + 1)))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	if (a->json && !a->follow)
		o.records = cJSON_CreateArray();
	r = read_both(&n, &f, &o);
	if (!r && f.fd >= 0 && !a->follow)
		hutch_cli_wait_writer(f.fd);
	if (!r && f.fd >= 0)
		r = drain(&f, &o, n.cur);
	if (!r && a->follow)
		r = follow(&n, &f, &o);
	if (f.fd >= 0)
		close(f.fd);
	free(f.buf);
	if (!r && o.records) {
		_cleanup_cjson_ cJSON *j = cJSON_CreateObject();
		_cleanup_free_ char *t = NULL;

		cJSON_AddBoolToObject(j, "ended", true);
		cJSON_AddNumberToObject(j, "dropped",
		                        (double)(o.any && o.first > since ? o.first - since : 0));
		cJSON_AddNumberToObject(j, "next", (double)o.next);
		cJSON_AddItemToObject(j, "records", TAKE_PTR(o.records));
		t = cJSON_PrintUnformatted(j);
		printf("%s\n", t ? t : "{}");
	}
	cJSON_Delete(o.records);
	return r;
}

static int cmd_net_log(struct hutch_cli_args *a)
{
	struct hutch_paths p;
	_cleanup_cjson_ cJSON *j = NULL;
	char url[96];
	uint64_t since = 0;
	const cJSON *rec;
	int r;

	if (a->npos < 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "missing sandbox id: hutch net-log ID "
		                                        "[--since SEQ] [--json] [--follow]");
	if (a->since && hutch_parse_u64(a->since, 0, UINT64_MAX / 2, &since) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "--since takes a record's number (its seq, 0 or more), not "
		                      "'%s'",
		                      a->since);
	r = hutch_cli_resolve_as(a->pos[0], HUTCH_CLI_GONE_OK, &p);
	if (r == HUTCH_CLI_SKIP)
		return from_files(a, NULL, NULL, a->pos[0], since);
	if (r)
		return r;
	if (hutch_state_is_live(&p) == 0) /* ending, or its supervisor died */
		return from_files(a, NULL, p.dir, p.id, since);
	if (a->follow)
		return nothing_to_follow(&p) ? 0 : from_files(a, p.dir, NULL, p.id, since);
	snprintf(url, sizeof(url), "/v1/net_log?since=%" PRIu64, since);
	r = hutch_cli_call(p.sock, "GET", url, NULL, 200, &j);
	if (r)
		return r;
	if (a->json) {
		_cleanup_free_ char *t = j ? cJSON_PrintUnformatted(j) : NULL;
		printf("%s\n", t ? t : "{}");
		return 0;
	}
	if (!strcmp(str(j, "mode"), "none")) {
		printf("network none: no connection can leave this sandbox, nothing is logged\n");
		return 0;
	}
	if (num(j, "dropped") > 0)
		printf("... %.0f older records are no longer kept (see the sandbox's net.jsonl)\n",
		       num(j, "dropped"));
	cJSON_ArrayForEach(rec, cJSON_GetObjectItemCaseSensitive(j, "records"))
		print_record(rec);
	if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "complete")))
		printf("network all: what left through NAT is not logged (it is with --nat-log on "
		       "where the kernel has the netfilter log and conntrack's events); host "
		       "ports', header bindings' connections and DNS answers are\n");
	return 0;
}

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                        \
	X(since, "from the record of this number on (an earlier answer's \"next\")")         \
	X(json, "the answer as JSON: {\"mode\", \"dropped\", \"next\", \"records\": [...]} " \
	        "(an ended sandbox's: \"ended\": true, no \"mode\"); with --follow one "     \
	        "record per line")                                                           \
	X(follow, "keep printing records as they are written until the sandbox has ended")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt net_log_opts[] = {
	{ .name = "since",
	  .kind = HUTCH_CLI_STRING,
	  .offset = offsetof(struct hutch_cli_args, since),
	  .metavar = "SEQ",
	  HELP(since) },
	{ .name = "json",
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, json),
	  HELP(json) },
	{ .name = "follow",
	  .short_name = 'f',
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, follow),
	  HELP(follow) },
	{ .name = "" },
};

const struct hutch_cli_verb hutch_verb_net_log = {
	.name = "net-log",
	.synopsis = "ID [--since SEQ] [--json] [-f|--follow]",
	.about = "The sandbox's egress log (network allow and all): every connection the\n"
	         "egress proxy decided and, in network all with --nat-log on, every TCP or\n"
	         "UDP flow that left through NAT, allowed or refused and by which rule (the\n"
	         "allow-list entry, \"all\", or a refusal's code and reason), the server name\n"
	         "and address, bytes each way at its close (a NAT flow's: IP packets, headers\n"
	         "included), and the command that made it (exact when several run at once,\n"
	         "else by time). The last 1,024 records; all of them in net.jsonl of the\n"
	         "sandbox's state dir (4 MiB, rotated), 0600, kept 7 days after the sandbox\n"
	         "ended (then read from that file). --follow prints records as they are\n"
	         "written until the sandbox has ended. Never anything of a header binding's\n"
	         "value.\n",
	.opts = net_log_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = 1,
	.id_pos = 1,
	.run = cmd_net_log,
};
