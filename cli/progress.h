/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image verbs' progress on stderr (pull, import, build-default and
 * create's fetch of a missing --image): on a terminal a bar redrawn in
 * place (the layer, its blob's bytes read of its size, the import's total),
 * at most once per HUTCH_PROGRESS_INTERVAL_MS (default 100); otherwise
 * plain lines, one per layer stored and one per 50 intervals (5 s) while a
 * large layer unpacks; nothing when quiet. One final line per layer stays.
 */
#ifndef HUTCH_CLI_PROGRESS_H
#define HUTCH_CLI_PROGRESS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"

struct hutch_cli_progress {
	bool tty, quiet;
	int64_t interval_ms, drawn_ms, plain_ms; /* when the bar, a plain line was last drawn */
	size_t drawn_layer;                      /* the layer the bar shows (+1), 0: none */
	struct sigaction old_int, old_term;      /* restored by hutch_cli_progress_done() */
};

/* tty: stderr is a terminal (and TERM is not "dumb"); quiet: print nothing. */
void hutch_cli_progress_init(struct hutch_cli_progress *p, bool quiet);
/* Point st's callbacks (and quiet) at p. */
void hutch_cli_progress_attach(struct hutch_cli_progress *p, struct hutch_image_import_stats *st);
/* Take a bar still drawn off the line (before an error message). */
void hutch_cli_progress_end(struct hutch_cli_progress *p);
/* The end, then SIGINT's and SIGTERM's handlers as before init. */
void hutch_cli_progress_done(struct hutch_cli_progress *p);
/*
 * One bar line (no newline) of at most cols - 1 characters into buf (pure:
 * tests/unit/test_cli.c): "layer 2/5 sha256:0123456789ab [=====>    ]
 * 12.3/40.0 MB, total 52.3/120.0 MB"; an archive is "archive". Returns its
 * length.
 */
size_t hutch_cli_progress_format(const struct hutch_image_progress *pr, int cols, char *buf,
                                 size_t len);

#endif
