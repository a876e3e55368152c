/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One request of a file endpoint: JSON /write_file, /read_file,
 * /delete_file, /make_dir, /delete_dir, /list_dir (file-json.c) and raw
 * PUT/GET /files (file-stream.c); api-files.c serves them. Every operation
 * is a built-in command run by a child of init (fileops.h) through the
 * ordinary command engine: the child does the file operation as appuser,
 * so the supervisor only moves bytes and never resolves a sandbox path
 * (DESIGN §2, the docker cp CVE-2018-15664 class).
 */
#ifndef HUTCH_FILE_REQ_H
#define HUTCH_FILE_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "http.h"
#include "loop.h"
#include "util.h"

/* The file endpoints (a route's arg, routes.c). */
enum hutch_file_op {
	HUTCH_FILE_WRITE_FILE,
	HUTCH_FILE_READ_FILE,
	HUTCH_FILE_DELETE_FILE,
	HUTCH_FILE_MAKE_DIR,
	HUTCH_FILE_DELETE_DIR,
	HUTCH_FILE_LIST_DIR,
	HUTCH_FILE_PUT,
	HUTCH_FILE_GET,
};

struct hutch_file_req {
	struct sup *s;
	struct request *r;
	struct MHD_Connection *conn;
	enum hutch_file_op op;
	struct hutch_buf body; /* JSON request body */
	char *path;            /* as the client gave it, for answers */
	bool want_base64;      /* read_file: "encoding": "base64" */
	bool tar;              /* /files?format=tar */
	bool answered;
	bool body_done;          /* PUT: the whole body has been received */
	unsigned pending_status; /* PUT: an error answer waiting for the body's end */
	cJSON *pending;
	struct cmd *cmd;
	/* raw streams */
	int pipe_fd; /* PUT: stdin write end; GET: stdout read end */
	struct hutch_watch w_pipe;
	bool pipe_broken; /* PUT: the writer is gone, the rest is dropped */
	uint64_t moved;   /* bytes through the pipe (PUT) or to the client (GET) */
	unsigned char hdr[8];
	size_t nhdr;
	uint64_t size; /* GET: from the header */
};

/* Answer j (consumed); a PUT whose body is still arriving keeps it until
 * the body's end. */
enum MHD_Result hutch_file_answer(struct hutch_file_req *fr, unsigned status, cJSON *j);
/* Answer an error; it names fr->path when known. */
enum MHD_Result hutch_file_answer_error(struct hutch_file_req *fr, unsigned status,
                                        const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* The command failed: answer why (its "E<errno> message" line). */
enum MHD_Result hutch_file_answer_failure(struct hutch_file_req *fr);
/* The command exited 0. */
bool hutch_file_cmd_ok(const struct cmd *c);
/* Start the built-in argv as fr's command (fr->cmd); it resumes fr's
 * request when done. NULL with err filled on failure. */
struct cmd *hutch_file_start_builtin(struct hutch_file_req *fr, const char *const *argv,
                                     const char *stdin_data, size_t stdin_len, uint64_t max_output,
                                     bool stdin_open, struct hutch_err *err);
/* 'path' and 'mode' as given in a body or a query string. */
int hutch_file_check_path(const char *path, struct hutch_err *err);
int hutch_file_check_mode(const char *mode, struct hutch_err *err);

#endif
