/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch stats [ID...]: what sandboxes use, as docker stats shows it: CPU
 * (a percentage of one CPU over the last interval, from two samples of
 * GET /stats), memory against the instance type's limit, pids, the
 * writable /workspace's use, network bytes and OOM kills. Refreshed every
 * second until Ctrl-C, or one sample with --no-stream; --json prints the
 * samples as JSON (one array per refresh). Measuring wakes nothing: the
 * supervisor answers from the host.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "format.h"
#include "state.h"
#include "util.h"
#include "verbs.h"

#define STATS_MAX 1024

struct sample {
	char id[HUTCH_ID_LEN + 1];
	cJSON *prev, *cur; /* the last two answers; NULL once it is gone */
};

/* NULL when the sandbox ended, or with err filled when it did not answer. */
static cJSON *fetch_stats(const char *id, struct hutch_err *err)
{
	struct hutch_paths p;
	struct hutch_http_resp resp = { 0 };
	cJSON *j = NULL;
	int r;

	if (hutch_paths_init(hutch_runtime_dir(), id, &p) < 0)
		return NULL;
	r = hutch_client_request(p.sock, "GET", "/stats", NULL, 0, &resp, err);
	if (r < 0 && r != -ETIMEDOUT && r != -EINVAL)
		err->code = 0; /* gone: not an error */
	if (r < 0)
		return NULL;
	if (resp.status == 200 && resp.body.data)
		j = cJSON_ParseWithLength(resp.body.data, resp.body.len);
	hutch_http_resp_done(&resp);
	return j;
}

static double num(const cJSON *o, const char *path)
{
	char key[64];
	const char *dot = strchr(path, '.');

	if (dot) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		return num(cJSON_GetObjectItemCaseSensitive(o, key), dot + 1);
	}
	o = cJSON_GetObjectItemCaseSensitive(o, path);
	return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

/* CPU over the interval between the two samples, in % of one CPU. */
static double cpu_percent(const struct sample *s)
{
	double du, dt;

	if (!s->prev || !s->cur)
		return NAN;
	du = num(s->cur, "cpu_usec") - num(s->prev, "cpu_usec");
	dt = num(s->cur, "read_at_ms") - num(s->prev, "read_at_ms");
	return dt > 0 && du >= 0 ? du / (dt * 1000.0) * 100.0 : NAN;
}

static const char *human(double bytes, char *buf, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	size_t u = 0;

	if (isnan(bytes))
		return "-";
	while (bytes >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]))
		bytes /= 1024, u++;
	snprintf(buf, size, u ? "%.1f%s" : "%.0f%s", bytes, units[u]);
	return buf;
}

/* A number, or "-" when the sandbox cannot say (NaN: absent, null). */
static const char *fmt_num(double v, bool percent, char *buf, size_t size)
{
	if (isnan(v))
		return "-";
	snprintf(buf, size, percent ? "%.1f%%" : "%.0f", v);
	return buf;
}

static void print_table(struct sample *s, size_t n)
{
	char a[32], b[32], c[32], d[32], e[32];

	printf("%-12s  %7s  %-21s  %6s  %5s  %-10s  %-19s  %s\n", "ID", "CPU %",
	       "MEM USAGE / LIMIT", "MEM %", "PIDS", "WORKSPACE", "NET I/O", "OOM");
	for (size_t i = 0; i < n; i++) {
		const cJSON *j = s[i].cur;
		double cpu = cpu_percent(&s[i]);
		double mem = num(j, "memory.current_bytes"), lim = num(j, "memory.limit_bytes");
		char mb[80], nb[80], cpus[16], f[3][24];

		if (!j)
			continue;
		snprintf(cpus, sizeof(cpus), isnan(cpu) ? "-" : "%.1f%%", cpu);
		snprintf(mb, sizeof(mb), "%s / %s", human(mem, a, sizeof(a)),
		         human(lim, b, sizeof(b)));
		snprintf(nb, sizeof(nb), "%s / %s", human(num(j, "network.rx_bytes"), c, sizeof(c)),
		         human(num(j, "network.tx_bytes"), d, sizeof(d)));
		printf("%-12s  %7s  %-21s  %6s  %5s  %-10s  %-19s  %s\n", s[i].id, cpus, mb,
		       fmt_num(lim > 0 ? mem / lim * 100.0 : NAN, true, f[0], sizeof(f[0])),
		       fmt_num(num(j, "pids.current"), false, f[1], sizeof(f[1])),
		       human(num(j, "disk./workspace.used_bytes"), e, sizeof(e)), nb,
		       fmt_num(num(j, "oom_kills"), false, f[2], sizeof(f[2])));
	}
}

/* A sample as stats --json gives it: GET /stats and cpu_percent. */
static cJSON *sample_json(const struct sample *s)
{
	double cpu = cpu_percent(s);
	cJSON *j = s->cur ? cJSON_Duplicate(s->cur, true) : NULL;

	if (j && isnan(cpu))
		cJSON_AddNullToObject(j, "cpu_percent");
	else if (j)
		cJSON_AddNumberToObject(j, "cpu_percent", hutch_round(cpu * 100) / 100);
	return j;
}

static void print_json(struct sample *s, size_t n)
{
	_cleanup_cjson_ cJSON *arr = cJSON_CreateArray();
	_cleanup_free_ char *text = NULL;

	for (size_t i = 0; arr && i < n; i++) {
		cJSON *j = sample_json(&s[i]);
		if (j)
			cJSON_AddItemToArray(arr, j);
	}
	text = arr ? cJSON_Print(arr) : NULL;
	printf("%s\n", text ? text : "[]");
}

/* ---- --format: docker stats' fields over sample_json()'s objects ---- */

static char *cpu_text(const cJSON *j)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "cpu_percent");
	char buf[32];

	snprintf(buf, sizeof(buf), cJSON_IsNumber(v) ? "%.2f%%" : "-",
	         cJSON_IsNumber(v) ? v->valuedouble : 0.0);
	return strdup(buf);
}

/* "USED / OF", both in bytes made human. */
static char *bytes_pair(const cJSON *j, const char *used, const char *of)
{
	char a[32], b[32], out[80];

	snprintf(out, sizeof(out), "%s / %s", human(num(j, used), a, sizeof(a)),
	         human(num(j, of), b, sizeof(b)));
	return strdup(out);
}

static char *mem_usage_text(const cJSON *j)
{
	return bytes_pair(j, "memory.current_bytes", "memory.limit_bytes");
}

static char *mem_perc_text(const cJSON *j)
{
	double mem = num(j, "memory.current_bytes"), lim = num(j, "memory.limit_bytes");
	char buf[32];

	return strdup(fmt_num(lim > 0 ? mem / lim * 100.0 : NAN, true, buf, sizeof(buf)));
}

static char *net_io_text(const cJSON *j)
{
	return bytes_pair(j, "network.rx_bytes", "network.tx_bytes");
}

static char *pids_text(const cJSON *j)
{
	char buf[32];

	return strdup(fmt_num(num(j, "pids.current"), false, buf, sizeof(buf)));
}

static char *workspace_text(const cJSON *j)
{
	char buf[32];

	return strdup(human(num(j, "disk./workspace.used_bytes"), buf, sizeof(buf)));
}

static char *oom_text(const cJSON *j)
{
	char buf[32];

	return strdup(fmt_num(num(j, "oom_kills"), false, buf, sizeof(buf)));
}

#define STATS_FIELD_NAMES                                                                     \
	".ID (.Container, .Name), .CPUPerc, .MemUsage, .MemPerc, .NetIO, .PIDs, .Workspace, " \
	".OOMKills"

enum {
	TEXT_NONE,
	TEXT_CPU,
	TEXT_MEM,
	TEXT_MEM_PERC,
	TEXT_NET_IO,
	TEXT_PIDS,
	TEXT_DISK,
	TEXT_OOM
};
static hutch_cli_field_text *const stats_texts[] = {
	[TEXT_CPU] = cpu_text,       [TEXT_MEM] = mem_usage_text, [TEXT_MEM_PERC] = mem_perc_text,
	[TEXT_NET_IO] = net_io_text, [TEXT_PIDS] = pids_text,     [TEXT_DISK] = workspace_text,
	[TEXT_OOM] = oom_text,
};

static const struct hutch_cli_field stats_field_rows[] = {
	{ .name = "ID", .header = "ID", .key = "id" },
	{ .name = "Container", .header = "CONTAINER", .key = "id" },
	{ .name = "Name", .header = "NAME", .key = "id" },
	{ .name = "CPUPerc", .header = "CPU %", .key = "cpu_percent", .text = TEXT_CPU },
	{ .name = "MemUsage", .header = "MEM USAGE / LIMIT", .text = TEXT_MEM },
	{ .name = "MemPerc", .header = "MEM %", .text = TEXT_MEM_PERC },
	{ .name = "NetIO", .header = "NET I/O", .text = TEXT_NET_IO },
	{ .name = "PIDs", .header = "PIDS", .text = TEXT_PIDS },
	{ .name = "Workspace", .header = "WORKSPACE", .text = TEXT_DISK },
	{ .name = "OOMKills", .header = "OOM", .key = "oom_kills", .text = TEXT_OOM },
	{ .name = "" },
};

static const struct hutch_cli_fields stats_fields = {
	.fields = stats_field_rows,
	.texts = stats_texts,
	.names = STATS_FIELD_NAMES,
	.table = "table {{.ID}}\\t{{.CPUPerc}}\\t{{.MemUsage}}\\t{{.MemPerc}}\\t{{.PIDs}}\\t"
	         "{{.Workspace}}\\t{{.NetIO}}\\t{{.OOMKills}}",
	.verb = "stats",
};

static int print_format(const struct hutch_cli_tmpl *t, struct sample *s, size_t n)
{
	cJSON *v[STATS_MAX] = { 0 };
	size_t m = 0;
	int r;

	for (size_t i = 0; i < n; i++)
		if ((v[m] = sample_json(&s[i])))
			m++;
	r = hutch_cli_tmpl_print(t, v, m, stdout);
	for (size_t i = 0; i < m; i++)
		cJSON_Delete(v[i]);
	return r;
}

/* Take one sample of each; returns how many sandboxes still answer. err
 * keeps the last failure of one that is alive but did not answer. */
static size_t sample_all(struct sample *s, size_t n, struct hutch_err *err)
{
	size_t alive = 0;

	for (size_t i = 0; i < n; i++) {
		struct hutch_err e = { 0 };
		cJSON_Delete(s[i].prev);
		s[i].prev = s[i].cur;
		s[i].cur = fetch_stats(s[i].id, &e);
		alive += s[i].cur != NULL;
		if (e.code)
			*err = e;
	}
	return alive;
}

/* The sandboxes asked for, or every live one. */
static int pick(struct hutch_cli_args *a, struct sample *s, size_t *ret_n)
{
	_cleanup_free_ char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	size_t n = 0, all = 0;
	int r;

	for (size_t i = 0; i < a->npos && n < STATS_MAX; i++, n++) {
		struct hutch_paths p;
		r = hutch_cli_open_live(a->pos[i], &p);
		if (r)
			return r;
		memcpy(s[n].id, p.id, sizeof(s[n].id));
	}
	if (!a->npos) {
		r = hutch_state_list(hutch_runtime_dir(), &ids, &all);
		if (r < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "list '%s': %s",
			                      hutch_runtime_dir(), strerror(-r));
		for (size_t i = 0; i < all && n < STATS_MAX; i++) {
			struct hutch_paths p;
			if (hutch_paths_init(hutch_runtime_dir(), ids[i], &p) < 0 ||
			    hutch_state_is_live(&p) <= 0)
				continue;
			memcpy(s[n].id, ids[i], sizeof(s[n].id));
			n++;
		}
	}
	*ret_n = n;
	return 0;
}

/* Sample every second (once with --no-stream), print each refresh. */
static int stats_loop(struct hutch_cli_args *a, const struct hutch_cli_tmpl *t, struct sample *s,
                      size_t n)
{
	struct timespec tick = { 1, 0 }, first = { 0, 500000000 };
	bool tty = isatty(STDOUT_FILENO) && !a->json && !t;
	struct hutch_err err = { 0 };

	sample_all(s, n, &err);
	for (;;) {
		nanosleep(a->no_stream ? &first : &tick, NULL);
		if (!sample_all(s, n, &err) && a->npos)
			return err.code ? hutch_cli_fail(HUTCH_EXIT_FAILURE, "%s", err.msg)
			                : hutch_cli_fail(HUTCH_EXIT_GONE, "the sandbox%s ended",
			                                 n > 1 ? "es" : "");
		if (tty && !a->no_stream)
			fputs("\033[H\033[2J", stdout); /* redraw in place */
		if (t && print_format(t, s, n) < 0)
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
		else if (a->json)
			print_json(s, n);
		else if (!t)
			print_table(s, n);
		fflush(stdout);
		if (a->no_stream)
			return 0;
	}
}

static int cmd_stats(struct hutch_cli_args *a)
{
	static struct sample s[STATS_MAX];
	struct hutch_cli_tmpl *t = NULL;
	struct hutch_err err = { 0 };
	size_t n = 0;
	int r;

	if (a->format && a->json)
		return hutch_cli_fail(
		        HUTCH_EXIT_USAGE,
		        "give --format or --json, not both; see 'hutch stats --help'");
	/* A bad template is refused before anything is measured. */
	r = a->format ? hutch_cli_tmpl_parse_fields(a->format, &stats_fields, &t, &err) : 0;
	if (r < 0)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)),
		                      "%s; see 'hutch stats --help'", err.msg);
	r = pick(a, s, &n);
	if (!r)
		r = stats_loop(a, t, s, n);
	hutch_cli_tmpl_free(t);
	return r;
}

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X)                                                                              \
	X(no_stream, "print one sample (over half a second) and exit")                             \
	X(json, "print the samples as JSON: GET /stats and cpu_percent")                           \
	X(format, "print each sandbox with a Go-like template, as docker stats does: {{.ID}} "     \
	          "(.Container, .Name) {{.CPUPerc}} {{.MemUsage}} {{.MemPerc}} {{.NetIO}} "        \
	          "{{.PIDs}} {{.Workspace}} {{.OOMKills}}, {{json .}} (or 'json': a sample as "    \
	          "--json gives it, one line each), {{upper X}}, {{lower X}}; 'table ...' adds a " \
	          "header and aligns the columns at \\t ('table' alone: stats' columns)")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt stats_opts[] = {
	{ .name = "no-stream",
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, no_stream),
	  HELP(no_stream) },
	{ .name = "json",
	  .kind = HUTCH_CLI_FLAG,
	  .offset = offsetof(struct hutch_cli_args, json),
	  HELP(json) },
	{ .name = "format",
	  .kind = HUTCH_CLI_STRING,
	  .offset = offsetof(struct hutch_cli_args, format),
	  .metavar = "TEMPLATE",
	  .complete = "table json",
	  HELP(format) },
	{ .name = "" },
};

const struct hutch_cli_verb hutch_verb_stats = {
	.name = "stats",
	.synopsis = "[ID...] [--no-stream] [--json | --format TEMPLATE]",
	.about = "Show what sandboxes use (all live ones when no id is given): CPU in % of one\n"
	         "CPU over the last interval (the instance type's quota is the limit), memory\n"
	         "(processes and tmpfs files) against its limit, pids, /workspace's use, network\n"
	         "bytes (links other than loopback) and OOM kills. Refreshed every second until\n"
	         "Ctrl-C; measuring never wakes a sleeping sandbox.\n",
	.opts = stats_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = HUTCH_CLI_MANY,
	.id_pos = HUTCH_CLI_MANY,
	.run = cmd_stats,
};
