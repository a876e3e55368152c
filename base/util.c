/* SPDX-License-Identifier: Apache-2.0 */
/* Pure helpers; see util.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>

#include "util.h"

int hutch_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	unsigned long long v;
	char *end = NULL;

	if (!s || !*s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end != '\0')
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool hutch_id_prefix_is_valid(const char *s)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n]; n++)
		if (n >= HUTCH_ID_LEN || !is_lower_hex(s[n]))
			return false;
	return n > 0;
}

bool hutch_id_is_valid(const char *s)
{
	return hutch_id_prefix_is_valid(s) && strlen(s) == HUTCH_ID_LEN;
}

int hutch_id_new(char buf[static HUTCH_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[HUTCH_ID_LEN / 2];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -EIO;
	for (size_t i = 0; i < sizeof(raw); i++) {
		buf[2 * i] = hex[raw[i] >> 4];
		buf[2 * i + 1] = hex[raw[i] & 15];
	}
	buf[HUTCH_ID_LEN] = '\0';
	return 0;
}

/* Length of the valid UTF-8 sequence at p (n bytes left): >0 valid, 0 invalid, <0 incomplete. */
static int utf8_seq(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	int len;
	uint32_t cp;

	if (c >= 0x01 && c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (int i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return -1;
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

char *hutch_utf8_sanitize(const char *src, size_t len, size_t *carry)
{
	const unsigned char *p = (const unsigned char *)src;
	char *out, *o;
	size_t i = 0;

	/* Worst case: every byte becomes a 3-byte U+FFFD. */
	out = malloc(len * 3 + 1);
	if (!out)
		return NULL;
	o = out;
	if (carry)
		*carry = 0;
	while (i < len) {
		int s = utf8_seq(p + i, len - i);
		if (s > 0) {
			memcpy(o, p + i, (size_t)s);
			o += s;
			i += (size_t)s;
			continue;
		}
		if (s < 0 && carry) {
			*carry = len - i;
			break;
		}
		memcpy(o, "\xef\xbf\xbd", 3);
		o += 3;
		i++;
	}
	*o = '\0';
	return out;
}

void hutch_buf_init(struct hutch_buf *b, size_t cap)
{
	memset(b, 0, sizeof(*b));
	b->cap = cap;
}

int hutch_buf_append(struct hutch_buf *b, const void *p, size_t n)
{
	size_t keep = n;

	b->total += n;
	if (b->len + keep > b->cap) {
		keep = b->cap - b->len;
		b->truncated = true;
	}
	if (keep == 0)
		return 0;
	if (b->len + keep > b->alloc) {
		size_t want = b->alloc ? b->alloc * 2 : 4096;
		char *d;
		while (want < b->len + keep)
			want *= 2;
		if (want > b->cap)
			want = b->cap;
		d = realloc(b->data, want);
		if (!d)
			return -ENOMEM;
		b->data = d;
		b->alloc = want;
	}
	memcpy(b->data + b->len, p, keep);
	b->len += keep;
	return 0;
}

int hutch_buf_append_tail(struct hutch_buf *b, const void *p, size_t n)
{
	const char *src = p;

	if (n >= b->cap) {
		if (b->len || n > b->cap)
			b->truncated = true;
		b->total += n - b->cap; /* counted here, the rest below */
		src += n - b->cap;
		n = b->cap;
		b->len = 0;
	} else if (b->len + n > b->cap) {
		size_t drop = b->len + n - b->cap;
		memmove(b->data, b->data + drop, b->len - drop);
		b->len -= drop;
		b->truncated = true;
	}
	return hutch_buf_append(b, src, n);
}

int hutch_buf_append_json_str(struct hutch_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const char *run = s;
	int r = hutch_buf_append(b, "\"", 1);

	for (; r >= 0 && *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[6] = { '\\', 0 };
		size_t n = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		r = hutch_buf_append(b, run, (size_t)(s - run));
		run = s + 1;
		switch (c) {
		case '"':
		case '\\':
			esc[1] = (char)c;
			break;
		case '\b':
			esc[1] = 'b';
			break;
		case '\f':
			esc[1] = 'f';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			n = 6;
		}
		if (r >= 0)
			r = hutch_buf_append(b, esc, n);
	}
	if (r >= 0)
		r = hutch_buf_append(b, run, (size_t)(s - run));
	return r < 0 ? r : hutch_buf_append(b, "\"", 1);
}

void hutch_buf_done(struct hutch_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/*
 * The civil date of a day count since 1970-01-01 (the inverse of Howard
 * Hinnant's days_from_civil, proleptic Gregorian), computed here rather
 * than by gmtime_r() or strftime(): glibc's first call of either in a
 * process runs tzset(), which opens and parses /etc/localtime (seven
 * syscalls), and a supervisor's first event comes on its path to a run's
 * command.
 */
int hutch_format_utc(int64_t t, char *buf, size_t size)
{
	int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400, secs = t - days * 86400;
	int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;                                      /* [0, 146096] */
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* from March 1st */
	int64_t mp = (5 * doy + 2) / 153, day = doy - (153 * mp + 2) / 5 + 1;
	int64_t month = mp < 10 ? mp + 3 : mp - 9, year = yoe + era * 400 + (month <= 2);

	return snprintf(buf, size, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld", (long long)year,
	                (long long)month, (long long)day, (long long)(secs / 3600),
	                (long long)(secs / 60 % 60), (long long)(secs % 60));
}

void hutch_format_time(int64_t t, char *buf, size_t size)
{
	int n = hutch_format_utc(t, buf, size);

	if (n >= 0 && (size_t)n + 1 < size) {
		buf[n] = 'Z';
		buf[n + 1] = '\0';
	}
}

int64_t hutch_now_realtime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

int64_t hutch_now_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double hutch_now_mono_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *title_start HUTCH_START_DATA;
static size_t title_len HUTCH_START_DATA;

HUTCH_START_TEXT void hutch_proctitle_init(int argc, char **argv)
{
	if (argc < 1 || !argv[0])
		return;
	/* argv strings are contiguous on the initial stack. */
	title_start = argv[0];
	title_len = (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) - argv[0]);
}

void hutch_proctitle_set(const char *title)
{
	char comm[16];

	snprintf(comm, sizeof(comm), "%s", title);
	(void)prctl(PR_SET_NAME, comm);
	if (!title_start || title_len == 0)
		return;
	memset(title_start, 0, title_len + 1);
	memcpy(title_start, title, strnlen(title, title_len));
}

int hutch_overlay_lowerdir(size_t n, char *buf, size_t size)
{
	size_t len = 0;

	if (n == 0)
		return -EINVAL;
	if (size > HUTCH_OVERLAY_STRING_MAX + 1)
		size = HUTCH_OVERLAY_STRING_MAX + 1;
	for (size_t i = n; i-- > 0;) {
		int w = snprintf(buf + len, size - len, "%s%zu", i + 1 < n ? ":" : "", i);

		if (w < 0 || (size_t)w >= size - len)
			return -E2BIG;
		len += (size_t)w;
	}
	return (int)len;
}

int hutch_override_stat_format(unsigned int uid, unsigned int gid, unsigned int mode, char *buf,
                               size_t size)
{
	int n = snprintf(buf, size, "%u:%u:0%o", uid, gid, mode & 07777);

	return n < 0 || (size_t)n >= size ? -E2BIG : n;
}

/* A number of at most max in base at *p, up to the next ':' or the end. */
static int override_field(const char **p, const char *end, int base, unsigned int max,
                          unsigned int *ret)
{
	unsigned long v = 0;
	const char *c = *p;

	if (c == end || *c == ':')
		return -EINVAL;
	for (; c < end && *c != ':'; c++) {
		unsigned int d = (unsigned int)(*c - '0');

		if (d >= (unsigned int)base || (v = v * (unsigned long)base + d) > max)
			return -EINVAL;
	}
	*ret = (unsigned int)v;
	*p = c < end ? c + 1 : c;
	return c < end ? 1 : 0; /* 1: a ':' followed */
}

int hutch_override_stat_parse(const char *v, size_t len, unsigned int *uid, unsigned int *gid,
                              unsigned int *mode)
{
	const char *end = v + len;
	int r;

	if (len > HUTCH_OVERRIDE_STAT_MAX || override_field(&v, end, 10, 65535, uid) != 1 ||
	    override_field(&v, end, 10, 65535, gid) != 1 ||
	    (r = override_field(&v, end, 8, 07777, mode)) < 0)
		return -EINVAL;
	/* a type after the mode: letters, digits and '-' only */
	for (; r == 1 && v < end; v++)
		if (!((*v >= 'a' && *v <= 'z') || (*v >= '0' && *v <= '9') || *v == '-'))
			return -EINVAL;
	return 0;
}

double hutch_round(double v)
{
	const double no_fraction = 4503599627370496.0; /* 2^52 */
	double t;

	if (!(v > -no_fraction && v < no_fraction))
		return v;
	t = (double)(int64_t)v; /* toward zero, exact below 2^52 */
	if (v - t >= 0.5)
		t += 1.0;
	else if (t - v >= 0.5)
		t -= 1.0;
	return t;
}

bool hutch_kernel_at_least(const char *release, unsigned int major, unsigned int minor)
{
	unsigned int ma = 0, mi = 0;

	if (!release || sscanf(release, "%u.%u", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}
