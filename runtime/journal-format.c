/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The session journal's chain (journal.h): a line's hash and the check of
 * one line against the one before. SHA-256 is nettle's (already linked for
 * the image store's digests, statically where Debian ships the archive):
 * no OpenSSL in the CLI or the supervisor for it (netpolicy/ssl.c loads
 * libssl only for header bindings).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <nettle/sha2.h>

#include "cleanup.h"
#include "fdutil.h"
#include "journal-format.h"
#include "util.h"

void hutch_journal_hash(const char *line, size_t len, char out[HUTCH_JOURNAL_HASH_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	struct sha256_ctx ctx;
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_init(&ctx);
	sha256_update(&ctx, len, (const uint8_t *)line);
	sha256_digest(&ctx, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[HUTCH_JOURNAL_HASH_LEN] = '\0';
}

void hutch_journal_check_init(struct hutch_journal_check *c)
{
	memset(c, 0, sizeof(*c));
}

static int broken(struct hutch_journal_check *c, const char *what)
{
	snprintf(c->why, sizeof(c->why), "line %llu: %s", (unsigned long long)c->lines + 1, what);
	return -EBADMSG;
}

static const char *string_of(const cJSON *j, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int hutch_journal_check_line(struct hutch_journal_check *c, const char *line, size_t len)
{
	_cleanup_cjson_ cJSON *j = NULL;
	const char *prev, *kind;
	const cJSON *seq;
	char zeros[HUTCH_JOURNAL_HASH_LEN + 1];

	if (c->why[0])
		return -EBADMSG; /* the chain is broken already */
	if (c->ended)
		return broken(c, "a line after the journal's end");
	j = cJSON_ParseWithLength(line, len);
	if (!cJSON_IsObject(j))
		return broken(c, "not a JSON object (edited or cut)");
	seq = cJSON_GetObjectItemCaseSensitive(j, "seq");
	prev = string_of(j, "prev");
	kind = string_of(j, "journal");
	if (!cJSON_IsNumber(seq) || seq->valuedouble < 0 || !prev ||
	    strlen(prev) != HUTCH_JOURNAL_HASH_LEN)
		return broken(c, "no \"seq\" or \"prev\" (edited)");
	if (c->lines == 0) {
		/* The first line: the start, or a rotation's first line whose
		 * prev names a file no longer kept. */
		memset(zeros, '0', HUTCH_JOURNAL_HASH_LEN);
		zeros[HUTCH_JOURNAL_HASH_LEN] = '\0';
		if (kind && !strcmp(kind, "start")) {
			if (seq->valuedouble != 0 || strcmp(prev, zeros))
				return broken(c, "a start that is not line 0 (edited)");
			c->started = true;
		} else if (!kind || strcmp(kind, "rotated")) {
			return broken(c, "the journal's first lines are missing (cut)");
		}
	} else {
		if (seq->valuedouble != (double)c->next)
			return broken(c, seq->valuedouble > (double)c->next
			                         ? "lines before it are missing (cut)"
			                         : "out of sequence (edited or repeated)");
		if (strcmp(prev, c->last))
			return broken(c, "its \"prev\" is not the hash of the line before: one of "
			                 "the two was changed");
	}
	c->next = (uint64_t)seq->valuedouble + 1;
	c->ended = kind && !strcmp(kind, "end");
	hutch_journal_hash(line, len, c->last);
	c->lines++;
	return 0;
}

/* The chain of the journal in buf checked into c; -EBADMSG if broken or
 * cut mid-line. */
static int check_all(struct hutch_journal_check *c, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len, *nl;

	hutch_journal_check_init(c);
	for (; p < end; p = nl + 1) {
		if (!(nl = memchr(p, '\n', (size_t)(end - p))))
			return -EBADMSG;
		if (hutch_journal_check_line(c, p, (size_t)(nl - p)) < 0)
			return -EBADMSG;
	}
	return 0;
}

int hutch_journal_end_dead(const char *path, const char *reason, const char *by, int64_t now)
{
	_cleanup_close_ int fd = open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	struct hutch_journal_check c;
	char line[HUTCH_JOURNAL_HASH_LEN + 256], t[40];
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return -errno;
	/* a reader of it holds a shared lock for a moment; no waiting here */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size <= 0 || st.st_size > HUTCH_JOURNAL_DEAD_MAX)
		return -EFBIG;
	if (!(buf = malloc((size_t)st.st_size)))
		return -ENOMEM;
	n = pread(fd, buf, (size_t)st.st_size, 0);
	if (n != st.st_size)
		return n < 0 ? -errno : -EIO;
	if (check_all(&c, buf, (size_t)n) < 0)
		return -EBADMSG; /* --verify says where; nothing to end */
	if (c.ended)
		return 0;
	if (hutch_format_utc(now, t, sizeof(t)) < 0)
		return -EINVAL;
	n = snprintf(line, sizeof(line),
	             "{\"seq\":%" PRIu64 ",\"time\":\"%s.000Z\",\"journal\":\"end\","
	             "\"reason\":\"%.40s\",\"by\":\"%.8s\",\"prev\":\"%s\"}\n",
	             c.next, t, reason, by, c.last);
	return hutch_write_all(fd, line, (size_t)n);
}
