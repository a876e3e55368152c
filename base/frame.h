/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The framed byte stream of an upgraded exec connection (docs/api.md,
 * "POST /exec"), pure: both ends (the supervisor, the CLI) encode and
 * decode it with these functions. A frame is a 5-byte header, the type
 * (1 byte) and the payload length (4 bytes, big-endian), then the payload.
 * Data frames (stdin, stdout, stderr) carry raw bytes and are handed on in
 * pieces as they arrive, never buffered whole; a data frame of length 0
 * is its stream's end of file. Control frames (exit, error, resize,
 * signal) are at most HUTCH_FRAME_CTL_MAX bytes and come whole. The
 * decoder is fed hostile bytes: each side accepts only the types the
 * other may send, and a length beyond its bound is a protocol error.
 */
#ifndef HUTCH_FRAME_H
#define HUTCH_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HUTCH_FRAME_HDR      5
#define HUTCH_FRAME_DATA_MAX (1u << 20) /* payload of one data frame */
#define HUTCH_FRAME_CTL_MAX  4096       /* payload of one control frame */

enum hutch_frame_type {
	HUTCH_FRAME_STDIN = 0,  /* client -> server: bytes for the command's stdin */
	HUTCH_FRAME_STDOUT = 1, /* server -> client */
	HUTCH_FRAME_STDERR = 2, /* server -> client */
	HUTCH_FRAME_EXIT = 3,   /* server -> client: the result, JSON; last frame */
	HUTCH_FRAME_ERROR = 4,  /* server -> client: an error object, JSON; last frame */
	HUTCH_FRAME_RESIZE = 5, /* client -> server: rows, cols (2 x u16 BE) */
	HUTCH_FRAME_SIGNAL = 6, /* client -> server: a signal number (u32 BE) */
	/* server -> client, on a run's stream only (supervisor/sandbox.h,
	 * hutch_created_run()): the request refused, as /exec's answer would
	 * have been, {"status": N, "error": {...}}; the only frame */
	HUTCH_FRAME_REFUSED = 7,
	/* server -> client: the result in brief, binary (struct
	 * hutch_frame_result), instead of EXIT when the request asked for it
	 * ("exit_frame": "brief": hutch's own CLI, which then needs no JSON
	 * parser for a command's end); the last frame */
	HUTCH_FRAME_RESULT = 8,
	/* server -> client, on exec.sock only, to a warm run's claim (a
	 * request that brought its command's stream, cli/pool.h): the claim
	 * made, {"id", "created_at_unix", "expires_at_unix"}; the only
	 * frame, the connection then the run's hand-over */
	HUTCH_FRAME_CLAIMED = 9,
	HUTCH_FRAME_NTYPES
};

#define HUTCH_FRAME_BIT(t) (1u << (t))
#define HUTCH_FRAME_FROM_CLIENT                                                     \
	(HUTCH_FRAME_BIT(HUTCH_FRAME_STDIN) | HUTCH_FRAME_BIT(HUTCH_FRAME_RESIZE) | \
	 HUTCH_FRAME_BIT(HUTCH_FRAME_SIGNAL))
#define HUTCH_FRAME_FROM_SERVER                                                      \
	(HUTCH_FRAME_BIT(HUTCH_FRAME_STDOUT) | HUTCH_FRAME_BIT(HUTCH_FRAME_STDERR) | \
	 HUTCH_FRAME_BIT(HUTCH_FRAME_EXIT) | HUTCH_FRAME_BIT(HUTCH_FRAME_ERROR) |    \
	 HUTCH_FRAME_BIT(HUTCH_FRAME_RESULT))

enum hutch_frame_ev_kind {
	HUTCH_FRAME_EV_NONE, /* bytes consumed, nothing complete yet */
	HUTCH_FRAME_EV_DATA, /* a piece of a data frame: data points into the input */
	HUTCH_FRAME_EV_EOF,  /* a data frame of length 0 */
	HUTCH_FRAME_EV_CTL,  /* a whole control frame: data points into the decoder */
};

struct hutch_frame_ev {
	enum hutch_frame_ev_kind kind;
	enum hutch_frame_type type;
	const char *data;
	size_t len;
};

struct hutch_frame_dec {
	unsigned allowed; /* HUTCH_FRAME_BIT()s accepted */
	uint8_t hdr[HUTCH_FRAME_HDR];
	size_t hdr_len;
	uint8_t type;
	uint32_t left; /* payload bytes of the current frame still to come */
	size_t ctl_len;
	char ctl[HUTCH_FRAME_CTL_MAX];
	const char *error; /* static text once a protocol error was seen */
};

void hutch_frame_dec_init(struct hutch_frame_dec *d, unsigned allowed);
/* Consume a prefix of buf[0, n) (n > 0) and say what it made in *ev.
 * Returns the bytes consumed (> 0), or -EPROTO (d->error says why; every
 * later call fails too). */
ssize_t hutch_frame_decode(struct hutch_frame_dec *d, const char *buf, size_t n,
                           struct hutch_frame_ev *ev);
/* The last HUTCH_FRAME_EV_DATA's caller took only part of it: the last k
 * bytes of that piece are to be decoded again (fed again by the caller). */
void hutch_frame_dec_unread(struct hutch_frame_dec *d, size_t k);
/* The payload bytes of the current data frame still to come (0 when a
 * header or a control frame is next) and its type: a caller may move them
 * itself (splice) and then say so with hutch_frame_dec_skip(d, n), n at
 * most what this returned. */
size_t hutch_frame_dec_pending(const struct hutch_frame_dec *d, enum hutch_frame_type *type);
void hutch_frame_dec_skip(struct hutch_frame_dec *d, size_t n);
/* Write the header of a frame of len bytes of type t into hdr. */
void hutch_frame_header(uint8_t hdr[HUTCH_FRAME_HDR], enum hutch_frame_type t, uint32_t len);

/*
 * A RESULT frame's payload: flags (1 byte), the exit code (1 byte), the
 * signal (1 byte), 0 (1 byte), then the message (what the exit frame's
 * "message" says: a kill, a timeout; UTF-8, no NUL, may be empty) to the
 * payload's end. The fields of /exec's exit frame a CLI acts on, and
 * nothing else: its JSON fields stay the API's ("exit_frame" "json").
 */
#define HUTCH_FRAME_RESULT_HDR     4
#define HUTCH_FRAME_RESULT_EXITED  (1u << 0) /* exit_code is the command's exit status */
#define HUTCH_FRAME_RESULT_SIGNAL  (1u << 1) /* killed by signal */
#define HUTCH_FRAME_RESULT_TIMEOUT (1u << 2) /* timed_out */
#define HUTCH_FRAME_RESULT_OOM     (1u << 3) /* oom_killed */
#define HUTCH_FRAME_RESULT_FLAGS   0x0fu
struct hutch_frame_result {
	unsigned flags;
	uint8_t exit_code, signal;
	const char *message; /* not NUL-terminated */
	size_t message_len;
};
/* Write r's payload into buf (size bytes); the message is cut to what
 * fits (and to HUTCH_FRAME_CTL_MAX). Returns the payload's length. */
size_t hutch_frame_result_encode(const struct hutch_frame_result *r, char *buf, size_t size);
/* Read a RESULT frame's payload (hostile: any bytes, len at most
 * HUTCH_FRAME_CTL_MAX): 0 with *ret filled (its message points into
 * data), or -EPROTO (shorter than its header, unknown flags, a non-zero
 * reserved byte, a NUL in the message). */
int hutch_frame_result_decode(const char *data, size_t len, struct hutch_frame_result *ret);

/*
 * A command's request in a form that needs no JSON parser: what hutch's
 * CLI sends on its own sockets (hutch run's hand-over, exec.sock), whose
 * supervisor then never loads libcjson (issue 31: its dlopen() is
 * 1.4-1.8 ms of CPU). HUTCH_REQ_MAGIC (a NUL first: no JSON text starts
 * with one), then fields, each a tag byte and its value, a C string ended
 * by its NUL: the words of argv in order, env as NAME=VALUE, the other
 * tags at most once. It carries what POST /exec's JSON carries for the
 * CLI (docs/api.md) and is refused as that JSON would be
 * (supervisor/api/request.c, hutch_exec_req_parse_bin()).
 */
#define HUTCH_REQ_MAGIC     "\0hutch-req-1"
#define HUTCH_REQ_MAGIC_LEN (sizeof(HUTCH_REQ_MAGIC) - 1)
#define HUTCH_REQ_ARG       'a' /* a word of argv */
#define HUTCH_REQ_CWD       'c' /* "cwd" */
#define HUTCH_REQ_ENV       'e' /* an "env" member, NAME=VALUE */
#define HUTCH_REQ_TIMEOUT   't' /* "timeout", seconds as %.17g prints them */
#define HUTCH_REQ_TTY       'y' /* "tty": "" (no size) or "ROWS COLS" */
#define HUTCH_REQ_BRIEF     'b' /* "exit_frame": "brief"; the value "" */

#endif
