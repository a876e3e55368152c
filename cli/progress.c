/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Progress of the image verbs on stderr (progress.h). The numbers come from
 * image/ (import.c's on_progress, fed by the unpacker child's reports);
 * this file only draws them. A bar is one line rewritten after "\r\033[K"
 * and kept shorter than the terminal, so that it never wraps; a line that
 * stays (a layer stored) first takes the bar off. Ctrl-C while a bar is
 * drawn ends the line first, so the shell's prompt starts on its own.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "progress.h"
#include "util.h"

#define PLAIN_EVERY 50 /* intervals between two plain bytes lines */
#define BAR_MAX     40

static volatile sig_atomic_t bar_on_line; /* for the signal handler */
static pid_t bar_owner;                   /* not in an unpacker child forked meanwhile */

static void on_signal(int sig)
{
	if (bar_on_line && getpid() == bar_owner)
		(void)!write(2, "\n", 1);
	(void)signal(sig, SIG_DFL); /* and die of it, as without this handler */
	(void)raise(sig);
}

static int term_cols(void)
{
	struct winsize ws;

	return ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20 ? ws.ws_col : 80;
}

/* "12.3/40.0 MB": read and size in the unit of size (kB below 1 MB, GB
 * from 10 GB), as the line is easier to read with one unit. */
static void amount(uint64_t read, uint64_t size, char out[64])
{
	double div = size < 1000000 ? 1e3 : size < 10000000000ULL ? 1e6 : 1e9;
	const char *unit = size < 1000000 ? "kB" : size < 10000000000ULL ? "MB" : "GB";

	snprintf(out, 64, "%.1f/%.1f %s", (double)read / div, (double)size / div, unit);
}

/* The bar of w columns (w >= 5) for read of size. */
static void make_bar(uint64_t read, uint64_t size, int w, char *bar)
{
	int fill = !size || read >= size ? w : (int)((double)w * (double)read / (double)size);
	bar[0] = '[';
	for (int i = 0; i < w; i++)
		bar[1 + i] = i < fill ? '=' : i == fill ? '>' : ' ';
	bar[w + 1] = ']';
	bar[w + 2] = ' ';
	bar[w + 3] = '\0';
}

size_t hutch_cli_progress_format(const struct hutch_image_progress *pr, int cols, char *buf,
                                 size_t len)
{
	char head[2][64], tail[2][160], widest[2][160], one[64], all[64], bar[BAR_MAX + 4] = "";
	bool total = pr->total_size > pr->size;
	int h = 0, t = total ? 0 : 1, w = 0;

	/* The full line; narrower: without the total, then without the digest. */
	snprintf(head[0], sizeof(head[0]), "layer %zu/%zu %.19s ", pr->layer, pr->layers,
	         pr->diff_id ? pr->diff_id : "");
	snprintf(head[1], sizeof(head[1]), "layer %zu/%zu ", pr->layer, pr->layers);
	if (!pr->layers)
		snprintf(head[0], sizeof(head[0]), "%s", "archive ");
	/* The bar's width from the widest tail of this layer, so that it
	 * does not move while the numbers grow. */
	amount(pr->size, pr->size, one);
	amount(pr->total_size, pr->total_size, all);
	snprintf(widest[0], sizeof(widest[0]), "%s, total %s", one, all);
	snprintf(widest[1], sizeof(widest[1]), "%s", one);
	amount(pr->read, pr->size, one);
	amount(pr->total_read, pr->total_size, all);
	snprintf(tail[0], sizeof(tail[0]), "%s, total %s", one, all);
	snprintf(tail[1], sizeof(tail[1]), "%s", one);
	for (;;) {
		w = cols - 1 - (int)strlen(head[h]) - (int)strlen(widest[t]) - 3;
		if (w >= 5 || (t == 1 && (h == 1 || !pr->layers)))
			break;
		if (t == 0)
			t = 1;
		else
			h = 1;
	}
	if (w > BAR_MAX)
		w = BAR_MAX;
	if (w >= 5)
		make_bar(pr->read, pr->size, w, bar);
	snprintf(buf, len, "%s%s%s", head[h], bar, tail[t]);
	if (cols > 1 && strlen(buf) > (size_t)cols - 1)
		buf[cols - 1] = '\0';
	return strlen(buf);
}

static void draw(struct hutch_cli_progress *p, const struct hutch_image_progress *pr)
{
	char line[512];
	int64_t now = hutch_now_mono_ms();

	/* A new layer's first bar at once; then at most once per interval. */
	if (p->drawn_layer == pr->layer + 1 && now - p->drawn_ms < p->interval_ms &&
	    pr->read < pr->size)
		return;
	p->drawn_ms = now;
	p->drawn_layer = pr->layer + 1;
	hutch_cli_progress_format(pr, term_cols(), line, sizeof(line));
	bar_on_line = 1;
	fprintf(stderr, "\r\033[K%s", line);
	fflush(stderr);
}

static void plain(struct hutch_cli_progress *p, const struct hutch_image_progress *pr)
{
	int64_t now = hutch_now_mono_ms();
	char a[64];

	if (p->drawn_layer != pr->layer + 1) { /* a new layer: its clock starts */
		p->drawn_layer = pr->layer + 1;
		p->plain_ms = now;
		return;
	}
	if (now - p->plain_ms < p->interval_ms * PLAIN_EVERY || pr->read >= pr->size)
		return;
	p->plain_ms = now;
	amount(pr->read, pr->size, a);
	if (pr->layers)
		fprintf(stderr, "layer %zu/%zu %.19s: %s read\n", pr->layer, pr->layers,
		        pr->diff_id ? pr->diff_id : "", a);
	else
		fprintf(stderr, "archive: %s read\n", a);
}

static void on_progress(void *ud, const struct hutch_image_progress *pr)
{
	struct hutch_cli_progress *p = ud;

	if (p->tty)
		draw(p, pr);
	else
		plain(p, pr);
}

void hutch_cli_progress_end(struct hutch_cli_progress *p)
{
	if (p->tty && bar_on_line) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	bar_on_line = 0;
	p->drawn_layer = 0;
}

/* One line per layer stored, which stays: a user sees which and how large. */
static void on_layer(void *ud, size_t i, size_t n, const char *diff_id, uint64_t bytes, bool cached)
{
	struct hutch_cli_progress *p = ud;
	char a[64];

	hutch_cli_progress_end(p);
	amount(bytes, bytes, a);
	if (cached)
		fprintf(stderr, "layer %zu/%zu %.19s: already in the store\n", i, n, diff_id);
	else
		fprintf(stderr, "layer %zu/%zu %.19s: %s unpacked\n", i, n, diff_id,
		        strchr(a, '/') + 1);
}

void hutch_cli_progress_init(struct hutch_cli_progress *p, bool quiet)
{
	const char *term = getenv("TERM");
	const char *iv = getenv("HUTCH_PROGRESS_INTERVAL_MS");
	char *end = NULL;
	long v = iv && *iv ? strtol(iv, &end, 10) : -1;

	*p = (struct hutch_cli_progress){ .quiet = quiet };
	p->tty = !quiet && isatty(2) && !(term && !strcmp(term, "dumb"));
	p->interval_ms = end && !*end && v >= 0 ? v : 100;
	if (p->tty) {
		struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };

		bar_owner = getpid();
		/* What is ignored (a background job's SIGINT) stays ignored. */
		(void)sigaction(SIGINT, NULL, &p->old_int);
		(void)sigaction(SIGTERM, NULL, &p->old_term);
		if (p->old_int.sa_handler != SIG_IGN)
			(void)sigaction(SIGINT, &sa, NULL);
		if (p->old_term.sa_handler != SIG_IGN)
			(void)sigaction(SIGTERM, &sa, NULL);
	}
}

void hutch_cli_progress_done(struct hutch_cli_progress *p)
{
	hutch_cli_progress_end(p);
	if (p->tty) {
		(void)sigaction(SIGINT, &p->old_int, NULL);
		(void)sigaction(SIGTERM, &p->old_term, NULL);
		p->tty = false;
	}
}

void hutch_cli_progress_attach(struct hutch_cli_progress *p, struct hutch_image_import_stats *st)
{
	st->quiet = p->quiet;
	st->on_layer = p->quiet ? NULL : on_layer;
	st->on_progress = p->quiet ? NULL : on_progress;
	st->ud = p;
}
