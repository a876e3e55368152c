/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pure helpers (no syscalls beyond getrandom/clock): number parsing, UTF-8
 * repair for JSON output, sandbox ids, a bounded byte buffer, time format.
 */
#ifndef HUTCH_UTIL_H
#define HUTCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HUTCH_ID_LEN 12 /* lowercase hex characters */

/* What every hutch process runs and writes at its start, before its verb
 * (issue 31: CLI start; docs/performance.md). A first touch of a page is a
 * fault, ~12-20 us on this kind of guest (the read fault maps a 64 KiB
 * window). HUTCH_START_TEXT puts a function in .text.hot, which the
 * default linker script places beside main() (.text.startup) and _start,
 * in the window the start faults in anyway; HUTCH_START_DATA puts a
 * variable in .data, whose pages the dynamic loader writes at every start
 * (relocations), not on a page of .bss that only it would touch. */
#define HUTCH_START_TEXT __attribute__((section(".text.hot.hutch_start")))
#define HUTCH_START_DATA __attribute__((section(".data.hutch_start")))

/* A pool of strings laid out by the compiler, for tables without pointers
 * (issue 31: CLI start): a pointer in a row of a PIE is a relative
 * relocation the dynamic loader writes at every start, and the table a
 * page of RELRO (.data.rel.ro) each start faults in; a row that holds an
 * offset into a pool instead stays read-only data (.rodata). LIST(X) calls
 * X(id, "text") once a string; HUTCH_STRPOOL(tag, var, LIST) defines var,
 * a struct tag with one char array a string (sized by the literal, so
 * every string keeps its NUL), HUTCH_STRPOOL_AT(tag, id) is the offset
 * of id's string, a constant (offsetof), and HUTCH_STRPOOL_STR(var, off)
 * the string. Offset 0 is the pool's first member, an empty string: a
 * row's "none". */
#define HUTCH_STRPOOL_FIELD(id, s) char id[sizeof(s)];
#define HUTCH_STRPOOL_TEXT(id, s)  s,
/* The pool's type and initializer, for a pool that is not static
 * (cli/args.h's HUTCH_CLI_POOL). */
#define HUTCH_STRPOOL_TYPE(tag, LIST)     \
	struct tag {                      \
		char none_[1];            \
		LIST(HUTCH_STRPOOL_FIELD) \
	}
#define HUTCH_STRPOOL_INIT(LIST)             \
	{                                    \
		"", LIST(HUTCH_STRPOOL_TEXT) \
	}
#define HUTCH_STRPOOL(tag, var, LIST)                                                 \
	static const HUTCH_STRPOOL_TYPE(tag, LIST) var = HUTCH_STRPOOL_INIT(LIST);    \
	_Static_assert(sizeof(struct tag) <= UINT16_MAX, #tag ": more than uint16_t " \
	                                                      "offsets reach")
#define HUTCH_STRPOOL_AT(tag, id)   ((uint16_t)offsetof(struct tag, id))
#define HUTCH_STRPOOL_STR(var, off) ((const char *)&(var) + (off))

/* Parse a base-10 unsigned integer in [min, max]; whole string must match. */
int hutch_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret);
/* True if s is a well-formed sandbox id (HUTCH_ID_LEN lowercase hex chars). */
bool hutch_id_is_valid(const char *s);
/* True if s could be a unique prefix of an id (1..HUTCH_ID_LEN hex chars). */
bool hutch_id_prefix_is_valid(const char *s);
/* Fill buf (HUTCH_ID_LEN + 1 bytes) with a new random id. */
int hutch_id_new(char buf[static HUTCH_ID_LEN + 1]);

/*
 * Copy len bytes of possibly invalid UTF-8 from src into a new NUL-terminated
 * string, replacing each invalid sequence (and NUL bytes) with U+FFFD.
 * If carry is not NULL, an incomplete sequence at the end is not replaced but
 * its length returned in *carry so the caller can prepend it to the next
 * chunk. Returns NULL on allocation failure.
 */
char *hutch_utf8_sanitize(const char *src, size_t len, size_t *carry);

/* A byte buffer that keeps at most cap bytes and remembers what it dropped. */
struct hutch_buf {
	char *data;
	size_t len;
	size_t alloc;
	size_t cap;     /* keep at most this many bytes */
	uint64_t total; /* bytes offered, kept or not */
	bool truncated;
};
void hutch_buf_init(struct hutch_buf *b, size_t cap);
/* Append; past cap the bytes are counted but dropped. -ENOMEM on failure. */
int hutch_buf_append(struct hutch_buf *b, const void *p, size_t n);
/* Append keeping the last cap bytes instead of the first (an output's
 * tail); total and truncated as above. -ENOMEM on failure. */
int hutch_buf_append_tail(struct hutch_buf *b, const void *p, size_t n);
/* Append s as a JSON string, quoted and escaped as cJSON_Print() escapes
 * it (\" \\ \b \f \n \r \t, other bytes below 0x20 as \u00XX, the
 * rest as they are): a request body written without loading libcjson
 * (base/cjson-dl.c). -ENOMEM on failure. */
int hutch_buf_append_json_str(struct hutch_buf *b, const char *s);
void hutch_buf_done(struct hutch_buf *b);

/*
 * overlayfs before Linux 6.13 takes its lower layers only as one "lowerdir"
 * string of paths, and fsconfig(FSCONFIG_SET_STRING) takes at most 255
 * bytes. hutch names the layers' mount points 0..n-1 in one directory of
 * its own tmpfs and passes "n-1:...:1:0" (top first) relative to it:
 * decimal names need none of overlayfs's escaping (':' separates layers,
 * ',' options, a backslash escapes), and 88 layers fit (HUTCH_OVERLAY_PATH_LAYERS).
 * Writes the string into buf; returns its length, -EINVAL for no layers,
 * -E2BIG when it does not fit in size bytes (or in 255).
 */
#define HUTCH_OVERLAY_STRING_MAX  255 /* fsconfig's string limit, without the NUL */
#define HUTCH_OVERLAY_PATH_LAYERS 88  /* layers whose names fit in that */
int hutch_overlay_lowerdir(size_t n, char *buf, size_t size);
/*
 * An ordinary user's image store keeps the owners (and directory modes) it
 * cannot give its files in this extended attribute, as containers/storage
 * and fuse-overlayfs do: "UID:GID:0MODE" (decimal ids, octal permission
 * bits; a fourth ":TYPE" field, which containers/storage may add, is
 * ignored). image/unpack.c writes it, rootfs/overlay.c applies it.
 */
#define HUTCH_OVERRIDE_STAT_XATTR "user.containers.override_stat"
#define HUTCH_OVERRIDE_STAT_MAX   48 /* the value's bytes, at most */
/* Writes the value into buf (HUTCH_OVERRIDE_STAT_MAX + 1); its length. */
int hutch_override_stat_format(unsigned int uid, unsigned int gid, unsigned int mode, char *buf,
                               size_t size);
/* Parses len bytes of a value (not NUL-terminated); -EINVAL if it is not
 * one: ids above 65535 or a mode above 07777 included. */
int hutch_override_stat_parse(const char *v, size_t len, unsigned int *uid, unsigned int *gid,
                              unsigned int *mode);
/* True if the kernel release (uname -r, "6.1.0-18-amd64") is at least
 * major.minor; false if it does not start with "N.N". */
bool hutch_kernel_at_least(const char *release, unsigned int major, unsigned int minor);

/* round(): to the nearest integer, halves away from zero; NaN and values
 * too large to have a fraction come back as they are. Here rather than
 * libm's: it was the only function hutch took from libm, a library every
 * CLI start then loaded and relocated (with its ifunc resolvers). */
double hutch_round(double v);

/* Format a unix time (seconds) as RFC 3339 UTC into buf (at least 32 bytes). */
void hutch_format_time(int64_t t, char *buf, size_t size);
/* The same without the "Z" ("%Y-%m-%dT%H:%M:%S"), and without the time
 * zone's file that gmtime_r() loads once per process; snprintf()'s result. */
int hutch_format_utc(int64_t t, char *buf, size_t size);
/* CLOCK_REALTIME / CLOCK_MONOTONIC in milliseconds or seconds. */
int64_t hutch_now_realtime(void);
int64_t hutch_now_mono_ms(void);
double hutch_now_mono_sec(void);

/* Remember the argv area (call once from main) so that forked processes can
 * overwrite what /proc/<pid>/cmdline shows: the supervisor and init must not
 * show the host path or arguments the CLI was started with. */
void hutch_proctitle_init(int argc, char **argv);
/* Overwrite the argv area with title (truncated to fit) and set comm. */
void hutch_proctitle_set(const char *title);

#endif
