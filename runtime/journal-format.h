/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The session journal's format (docs/history.md, "The session
 * journal"), shared by its writer (the supervisor, supervisor/journal.c)
 * and its readers (hutch journal): one JSON object per line, each with
 * "seq" (0, 1, 2, ... without a gap) and "prev", the SHA-256 (hex) of the
 * line before it without its newline. The first line of a journal is
 * {"seq":0,"journal":"start",...} with a prev of 64 zeros; a file that
 * starts after a rotation begins with {"journal":"rotated"}, whose prev
 * names the last line of the file rotated away; an ended sandbox's last
 * line is {"journal":"end"}. So an edited line breaks the next line's
 * prev, a cut line the seq or the prev, a cut head the start, a cut tail
 * the end (or the supervisor's next line, whose prev it keeps in memory).
 *
 * Where it is: the state dir's journal.jsonl (and journal.1.jsonl, the
 * file before the last rotation) while the sandbox runs, moved to
 * $RT/.gone/<id>.journal (.journal.1) when it ends, pruned with its
 * tombstone (HUTCH_GONE_KEEP_SECONDS, 7 days). Files are 0600. The
 * supervisor holds an exclusive flock() on the file it writes until its
 * last line (the end, after the last request's answer): a reader of an
 * ended sandbox's journal takes a shared one first, so it never reads a
 * journal whose end is still to come (`hutch rm` returns before that).
 */
#ifndef HUTCH_JOURNAL_FORMAT_H
#define HUTCH_JOURNAL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HUTCH_JOURNAL_FILE       "journal.jsonl"
#define HUTCH_JOURNAL_OLD_FILE   "journal.1.jsonl"
#define HUTCH_JOURNAL_SUFFIX     ".journal" /* in $RT/.gone/ */
#define HUTCH_JOURNAL_OLD_SUFFIX ".journal.1"
#define HUTCH_JOURNAL_HASH_LEN   64
/* The longest line a reader accepts (a writer cuts its texts to fit). */
#define HUTCH_JOURNAL_LINE_MAX (16u << 10)

/* hex SHA-256 of line[0..len) */
void hutch_journal_hash(const char *line, size_t len, char out[HUTCH_JOURNAL_HASH_LEN + 1]);

/* A reader's walk along the chain, one line at a time, oldest first. */
struct hutch_journal_check {
	uint64_t lines;                        /* checked so far */
	uint64_t next;                         /* the seq the next line must have */
	bool started;                          /* the first line was the start (not a rotation) */
	bool ended;                            /* the last line checked was the end */
	char last[HUTCH_JOURNAL_HASH_LEN + 1]; /* hash of the last line checked */
	char why[256];                         /* the first break, once one is found */
};

void hutch_journal_check_init(struct hutch_journal_check *c);
/* Check the next line (without its newline). 0 if it continues the chain,
 * else -EBADMSG with c->why saying what is wrong (line numbers from 1). */
int hutch_journal_check_line(struct hutch_journal_check *c, const char *line, size_t len);

/* A journal whose writer died (killed or crashed) before its end line,
 * at path (beside its tombstone): ended by its reaper with
 * {"journal":"end","reason":REASON,"by":BY} (the tombstone's reason:
 * "supervisor-died", "deleted"; by: "gc" or "rm", who wrote it: no
 * supervisor's end line has "by") continuing its chain, so that --verify
 * reads an end, not a cut. Nothing is written to a journal that ended,
 * whose chain is broken or cut mid-line (--verify says where), or that a
 * reader holds. 0 or -errno. */
#define HUTCH_JOURNAL_DEAD_MAX (64u << 20)
int hutch_journal_end_dead(const char *path, const char *reason, const char *by, int64_t now);

#endif
