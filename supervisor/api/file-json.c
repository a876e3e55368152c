/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON file endpoints (file-req.h): /write_file, /read_file,
 * /delete_file, /make_dir, /delete_dir, /list_dir. Small contents pass
 * through the built-in's captured stdin and stdout; a body is bounded by
 * HUTCH_MAX_BODY and a file read by FILE_JSON_MAX (PUT/GET /files stream
 * larger ones).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "cleanup.h"
#include "fields.h"
#include "file-json.h"
#include "file-req.h"
#include "fileops.h"
#include "proto.h"
#include "request.h"
#include "supervisor.h"

#define FILE_JSON_MAX     (8u << 20) /* read_file content bound (bytes of the file) */
#define FILE_JSON_MAX_STR "8388608"

static bool is_text(const char *data, size_t len)
{
	_cleanup_free_ char *clean = NULL;

	if (memchr(data, '\0', len))
		return false;
	clean = hutch_utf8_sanitize(data, len, NULL);
	return clean && strlen(clean) == len && memcmp(clean, data, len) == 0;
}

#define PATH                                                                 \
	{                                                                    \
		"path", HUTCH_FIELD_STRING, HUTCH_FIELD_REQUIRED, 0, 0, NULL \
	}
#define CONTENT                                                                 \
	{                                                                       \
		"content", HUTCH_FIELD_STRING, HUTCH_FIELD_REQUIRED, 0, 0, NULL \
	}
#define ENCODING                                              \
	{                                                     \
		"encoding", HUTCH_FIELD_STRING, 0, 0, 0, NULL \
	}
#define MODE                                              \
	{                                                 \
		"mode", HUTCH_FIELD_STRING, 0, 0, 0, NULL \
	}

static const struct hutch_field write_fields[] = { PATH, CONTENT, ENCODING, MODE };
static const struct hutch_field read_fields[] = { PATH, ENCODING };
static const struct hutch_field path_fields[] = { PATH };
static const struct hutch_field mkdir_fields[] = { PATH, MODE };
static const struct hutch_field list_fields[] = {
	{ "path", HUTCH_FIELD_STRING, 0, 0, 0, NULL }, /* default: /workspace */
};

static const struct {
	const struct hutch_field *spec;
	size_t n;
} bodies[] = {
	[HUTCH_FILE_WRITE_FILE] = { write_fields, ELEMENTSOF(write_fields) },
	[HUTCH_FILE_READ_FILE] = { read_fields, ELEMENTSOF(read_fields) },
	[HUTCH_FILE_DELETE_FILE] = { path_fields, ELEMENTSOF(path_fields) },
	[HUTCH_FILE_MAKE_DIR] = { mkdir_fields, ELEMENTSOF(mkdir_fields) },
	[HUTCH_FILE_DELETE_DIR] = { path_fields, ELEMENTSOF(path_fields) },
	[HUTCH_FILE_LIST_DIR] = { list_fields, ELEMENTSOF(list_fields) },
};

static const char *get_string(const cJSON *o, const char *key, const char *dflt)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));

	return v ? v : dflt;
}

/* The built-in's argv for a JSON operation. */
static void json_op_argv(enum hutch_file_op op, const char *path, const char *mode,
                         const char *size, const char *argv[static 5])
{
	static const char *const ops[] = {
		[HUTCH_FILE_WRITE_FILE] = HUTCH_FOP_WRITE, [HUTCH_FILE_READ_FILE] = HUTCH_FOP_READ,
		[HUTCH_FILE_DELETE_FILE] = HUTCH_FOP_RM,   [HUTCH_FILE_MAKE_DIR] = HUTCH_FOP_MKDIR,
		[HUTCH_FILE_DELETE_DIR] = HUTCH_FOP_RMDIR, [HUTCH_FILE_LIST_DIR] = HUTCH_FOP_LS,
	};

	argv[0] = ops[op];
	argv[1] = path;
	if (op == HUTCH_FILE_WRITE_FILE) {
		argv[2] = mode;
		argv[3] = size;
	} else if (op == HUTCH_FILE_READ_FILE) {
		argv[2] = FILE_JSON_MAX_STR;
	} else if (op == HUTCH_FILE_MAKE_DIR) {
		argv[2] = mode;
	}
}

enum MHD_Result hutch_file_json_start(struct hutch_file_req *fr)
{
	_cleanup_cjson_ cJSON *o = NULL;
	_cleanup_free_ char *data = NULL;
	const char *path = HUTCH_WORKSPACE, *content = NULL, *encoding = NULL, *mode = "";
	const char *argv[5] = { 0 };
	struct hutch_err err = { 0 };
	const char *endp = NULL;
	char sizebuf[32];
	size_t len = 0;

	if (hutch_fields_check_text(fr->body.data ? fr->body.data : "", fr->body.len, &err) < 0)
		return hutch_file_answer_error(fr, 400, "invalid_request", "%s", err.msg);
	o = cJSON_ParseWithLengthOpts(fr->body.data ? fr->body.data : "", fr->body.len, &endp,
	                              false);
	if (!o)
		return hutch_file_answer_error(
		        fr, 400, "invalid_request", "invalid JSON at byte %zu",
		        endp && fr->body.data ? (size_t)(endp - fr->body.data) : 0);
	if (!cJSON_IsObject(o))
		return hutch_file_answer_error(fr, 400, "invalid_request",
		                               "the body must be a JSON object");
	if (hutch_fields_check(o, bodies[fr->op].spec, bodies[fr->op].n, 0, &err) < 0)
		return hutch_file_answer_error(fr, 400, "invalid_request", "%s", err.msg);
	path = get_string(o, "path", HUTCH_WORKSPACE);
	content = get_string(o, "content", NULL);
	encoding = get_string(o, "encoding", NULL);
	mode = get_string(o, "mode", "");
	if (hutch_file_check_path(path, &err) < 0 ||
	    (cJSON_HasObjectItem(o, "mode") && hutch_file_check_mode(mode, &err) < 0))
		return hutch_file_answer_error(fr, 400, "invalid_request", "%s", err.msg);
	if (encoding && strcmp(encoding, "utf-8") && strcmp(encoding, "utf8") &&
	    strcmp(encoding, "base64"))
		return hutch_file_answer_error(
		        fr, 400, "invalid_request",
		        "invalid 'encoding' \"%.32s\": use \"utf-8\" or \"base64\"", encoding);
	fr->path = strdup(path);
	fr->want_base64 = encoding && !strcmp(encoding, "base64");
	if (fr->op == HUTCH_FILE_WRITE_FILE) {
		if (fr->want_base64) {
			if (hutch_base64_decode(content, &data, &len) < 0)
				return hutch_file_answer_error(fr, 400, "invalid_request",
				                               "'content' is not valid base64");
		} else {
			len = strlen(content);
		}
	}
	snprintf(sizebuf, sizeof(sizebuf), "%zu", len);
	json_op_argv(fr->op, path, mode, sizebuf, argv);
	if (!hutch_file_start_builtin(fr, argv, data ? data : content, len, FILE_JSON_MAX + 64, 0,
	                              &err))
		return hutch_file_answer_error(fr, 500, "spawn_failed", "%s", err.msg);
	hutch_api_suspend(fr->r);
	return MHD_YES;
}

static enum MHD_Result finish_read(struct hutch_file_req *fr, cJSON *o)
{
	struct cmd *c = fr->cmd;
	const char *data = c->out.data + 8;
	uint64_t size;
	size_t len;

	if (c->out.len < 8 || c->out.truncated)
		return hutch_file_answer_error(fr, 500, "file_error",
		                               "short answer from the sandbox");
	memcpy(&size, c->out.data, 8);
	len = c->out.len - 8;
	if (size != len)
		return hutch_file_answer_error(fr, 409, "busy", "'%s' changed while it was read",
		                               fr->path);
	cJSON_AddNumberToObject(o, "size", (double)len);
	if (!fr->want_base64 && is_text(data, len)) {
		_cleanup_free_ char *s = strndup(data, len);
		cJSON_AddStringToObject(o, "encoding", "utf-8");
		cJSON_AddStringToObject(o, "content", s ? s : "");
	} else {
		_cleanup_free_ char *s = hutch_base64_encode(data, len);
		cJSON_AddStringToObject(o, "encoding", "base64");
		cJSON_AddStringToObject(o, "content", s ? s : "");
	}
	return hutch_file_answer(fr, 200, o);
}

enum MHD_Result hutch_file_json_finish(struct hutch_file_req *fr)
{
	struct cmd *c = fr->cmd;
	cJSON *o;

	if (fr->s->state != SUP_RUNNING)
		return hutch_file_answer(fr, 410, hutch_api_ended_json(fr->s));
	if (!hutch_file_cmd_ok(c))
		return hutch_file_answer_failure(fr);
	o = cJSON_CreateObject();
	if (!o)
		return MHD_NO;
	cJSON_AddStringToObject(o, "path", fr->path);
	switch (fr->op) {
	case HUTCH_FILE_READ_FILE:
		return finish_read(fr, o);
	case HUTCH_FILE_WRITE_FILE:
		cJSON_AddNumberToObject(o, "size", (double)c->stdin_len);
		break;
	case HUTCH_FILE_LIST_DIR: {
		cJSON *entries =
		        c->out.truncated
		                ? NULL
		                : cJSON_ParseWithLength(c->out.data ? c->out.data : "", c->out.len);
		if (!cJSON_IsArray(entries)) {
			cJSON_Delete(entries);
			cJSON_Delete(o);
			return hutch_file_answer_error(
			        fr, 500, "file_error",
			        "directory listing of '%s' too large or malformed", fr->path);
		}
		cJSON_AddItemToObject(o, "entries", entries);
		break;
	}
	default:
		break;
	}
	return hutch_file_answer(fr, 200, o);
}
