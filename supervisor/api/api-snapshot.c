/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /snapshot (docs/api.md): the sandbox's filesystem as an image of
 * its store (supervisor/snapshot.c). Body {"name": "NAME", "type":
 * "filesystem", "env": ["NAME=VALUE"]}; all optional (env: the snapshot's
 * Env over its image's, hutch build's). {"type": "full"}: processes and memory
 * too, CRIU's dump into the store (supervisor/fullsnap.c; docs/snapshots.md). POST /rollback
 * {"snapshot": "NAME"}: the sandbox's filesystem returned to that snapshot in place
 * (supervisor/rollback.c). POST /fork {"count": N, "disk_bytes": B, "copy":
 * false}: hutch fork's disks, clones or copies of the sandbox's
 * (supervisor/fork.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "events.h"
#include "fields.h"
#include "fork.h"
#include "fullsnap.h"
#include "http.h"
#include "image.h"
#include "mhd.h"
#include "rollback.h"
#include "routes.h"
#include "snapshot.h"
#include "supervisor.h"
#include "syscalls.h"

static const struct hutch_field snapshot_fields[] = {
	{ "name", HUTCH_FIELD_STRING, HUTCH_FIELD_NULLABLE | HUTCH_FIELD_NONEMPTY, 0, 0,
	  "'name' must be a snapshot name (a string, or null for snap-<id>-<n>)" },
	{ "type", HUTCH_FIELD_STRING, HUTCH_FIELD_NULLABLE, 0, 0,
	  "'type' must be \"filesystem\" or \"full\"" },
	{ "env", HUTCH_FIELD_ARRAY, HUTCH_FIELD_NULLABLE, 0, 0,
	  "'env' must be an array of \"NAME=VALUE\" strings" },
};

/* The body's env: NULL-terminated, or NULL when none; -EINVAL when an
 * entry is no NAME=VALUE (or too many). The strings stay the body's. */
static int env_of(const cJSON *body, const char ***ret)
{
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(body, "env"), *e;
	const char **v;
	size_t n = 0;

	*ret = NULL;
	if (!cJSON_IsArray(env) || !cJSON_GetArraySize(env))
		return 0;
	if (cJSON_GetArraySize(env) > HUTCH_IMAGE_SNAPSHOT_ENV_MAX)
		return -EINVAL;
	if (!(v = calloc((size_t)cJSON_GetArraySize(env) + 1, sizeof(*v))))
		return -ENOMEM;
	cJSON_ArrayForEach(e, env) {
		if (!cJSON_IsString(e) || !hutch_image_env_is_valid(e->valuestring)) {
			free(v);
			return -EINVAL;
		}
		v[n++] = e->valuestring;
	}
	*ret = v;
	return 0;
}

/* The body (none: {}) checked against fields: NULL once answered. */
static cJSON *parse_body(struct request *r, const struct hutch_field *fields, size_t n,
                         const char *shape, enum MHD_Result *ret)
{
	const char *text = r->body.data && r->body.len ? r->body.data : "{}";
	size_t len = r->body.data && r->body.len ? r->body.len : 2;
	struct hutch_err err = { 0 };
	cJSON *body;

	if (hutch_fields_check_text(text, len, &err) < 0) {
		*ret = hutch_api_respond_err(r->conn, &err, "invalid_request");
		return NULL;
	}
	body = cJSON_ParseWithLength(text, len);
	if (!cJSON_IsObject(body)) {
		cJSON_Delete(body);
		*ret = hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_json",
		                        "the body must be a JSON object: %s", shape);
		return NULL;
	}
	if (hutch_fields_check(body, fields, n, HUTCH_FIELDS_LIST_KNOWN, &err) < 0) {
		cJSON_Delete(body);
		*ret = hutch_api_respond_err(r->conn, &err, "invalid_request");
		return NULL;
	}
	return body;
}

enum MHD_Result hutch_api_serve_snapshot(struct request *r, const char *upload, size_t *size)
{
	_cleanup_cjson_ cJSON *body = NULL;
	_cleanup_free_ const char **env = NULL;
	struct hutch_err err = { 0 };
	const cJSON *name, *type;
	enum MHD_Result answered;
	cJSON *out = NULL;

	(void)upload;
	(void)size;
	body = parse_body(r, snapshot_fields, ELEMENTSOF(snapshot_fields), "{\"name\": \"NAME\"}",
	                  &answered);
	if (!body)
		return answered;
	name = cJSON_GetObjectItemCaseSensitive(body, "name");
	type = cJSON_GetObjectItemCaseSensitive(body, "type");
	if (cJSON_IsString(type) && !strcmp(type->valuestring, "full")) {
		if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(body, "env")) > 0)
			return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
			                        "'env' is for filesystem snapshots");
		if (hutch_sup_snapshot_full(r->s, cJSON_IsString(name) ? name->valuestring : NULL,
		                            &out, &err) < 0) {
			hutch_event(r->s, "full snapshot refused: %s", err.msg);
			return hutch_api_respond_err(r->conn, &err, NULL);
		}
		return hutch_api_respond_json(r->conn, MHD_HTTP_CREATED, out);
	}
	if (cJSON_IsString(type) && strcmp(type->valuestring, "filesystem"))
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		                        "'type' must be \"filesystem\" or \"full\"");
	if (env_of(body, &env) < 0)
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		                        "'env' must be at most %d \"NAME=VALUE\" strings (NAME: "
		                        "letters, digits and _, not a digit first; no newline)",
		                        HUTCH_IMAGE_SNAPSHOT_ENV_MAX);
	if (hutch_sup_snapshot(r->s, cJSON_IsString(name) ? name->valuestring : NULL,
	                       (const char *const *)env, &out, &err) < 0) {
		hutch_event(r->s, "snapshot refused: %s", err.msg);
		return hutch_api_respond_err(r->conn, &err, NULL);
	}
	return hutch_api_respond_json(r->conn, MHD_HTTP_CREATED, out);
}

static const struct hutch_field rollback_fields[] = {
	{ "snapshot", HUTCH_FIELD_STRING, HUTCH_FIELD_REQUIRED | HUTCH_FIELD_NONEMPTY, 0, 0,
	  "'snapshot' must name a snapshot of the sandbox's store" },
};

enum MHD_Result hutch_api_serve_rollback(struct request *r, const char *upload, size_t *size)
{
	_cleanup_cjson_ cJSON *body = NULL;
	struct hutch_err err = { 0 };
	enum MHD_Result answered;
	const cJSON *name;
	cJSON *out = NULL;

	(void)upload;
	(void)size;
	body = parse_body(r, rollback_fields, ELEMENTSOF(rollback_fields),
	                  "{\"snapshot\": \"NAME\"}", &answered);
	if (!body)
		return answered;
	name = cJSON_GetObjectItemCaseSensitive(body, "snapshot");
	if (!hutch_image_name_is_valid(name->valuestring))
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		                        "invalid snapshot name '%.64s'", name->valuestring);
	if (hutch_sup_rollback(r->s, name->valuestring, &out, &err) < 0) {
		hutch_event(r->s, "rollback refused: %s", err.msg);
		return hutch_api_respond_err(r->conn, &err, NULL);
	}
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, out);
}

static const struct hutch_field fork_fields[] = {
	{ "count", HUTCH_FIELD_INTEGER, HUTCH_FIELD_REQUIRED, 1, 100,
	  "'count' must be a number of forks from 1 to 100" },
	{ "disk_bytes", HUTCH_FIELD_INTEGER, HUTCH_FIELD_NULLABLE, 1 << 20, 1ull << 50,
	  "'disk_bytes' must be the forks' disk size in bytes" },
	{ "copy", HUTCH_FIELD_BOOL, HUTCH_FIELD_NULLABLE, 0, 0, "'copy' must be true or false" },
	{ "names", HUTCH_FIELD_ARRAY, HUTCH_FIELD_NULLABLE, 0, 0,
	  "'names' must be an array of the disks' socket names" },
	{ "full", HUTCH_FIELD_BOOL, HUTCH_FIELD_NULLABLE, 0, 0, "'full' must be true or false" },
	{ "name", HUTCH_FIELD_STRING, HUTCH_FIELD_NULLABLE | HUTCH_FIELD_NONEMPTY, 0, 0,
	  "'name' must be the full fork's snapshot name (a string, or null for "
	  "snap-<id>-<n>)" },
};

/* {"full": true}: the one dump of a full fork, as POST /snapshot {"type":
 * "full"} makes it (the source runs on), answered with what the caller's
 * creates restore ("snapshot") and how many it said it makes. */
static enum MHD_Result serve_fork_full(struct request *r, const cJSON *body, size_t count)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(body, "name");
	struct hutch_err err = { 0 };
	cJSON *out = NULL;

	if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(body, "names")) ||
	    cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(body, "copy")))
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		                        "'names' and 'copy' are for a fork of the disk: a full "
		                        "fork makes no disk (its creates restore 'snapshot')");
	if (hutch_sup_snapshot_full(r->s, cJSON_IsString(name) ? name->valuestring : NULL, &out,
	                            &err) < 0) {
		hutch_event(r->s, "full fork refused: %s", err.msg);
		return hutch_api_respond_err(r->conn, &err, NULL);
	}
	if (!cJSON_AddStringToObject(
	            out, "snapshot",
	            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(out, "name"))) ||
	    !cJSON_AddStringToObject(out, "method", "full") ||
	    !cJSON_AddNumberToObject(out, "count", (double)count)) {
		cJSON_Delete(out);
		return hutch_api_refuse(r->conn, HUTCH_ERRC_INTERNAL, "internal", "out of memory");
	}
	return hutch_api_respond_json(r->conn, MHD_HTTP_CREATED, out);
}

/* A pidfd of the request's client, whose end ends the forkers whose
 * disks no fork took (runtime/disk.h): SO_PEERPIDFD (Linux 6.5), else
 * SO_PEERCRED's pid. -EBADF: none known (the TCP listener, a client of
 * another pid namespace); -ESRCH: it ended already. */
static int client_pidfd(const struct request *r)
{
	const union MHD_ConnectionInfo *ci =
	        hutch_mhd.get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct pollfd p = { .events = POLLIN };
	struct ucred cred = { 0 };
	socklen_t len = sizeof(p.fd);

	if (r->tcp || !ci || ci->connect_fd < 0)
		return -EBADF;
	if (getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERPIDFD, &p.fd, &len) < 0) {
		if (errno == ESRCH)
			return -ESRCH;
		len = sizeof(cred);
		if (getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
		    cred.pid <= 0)
			return -EBADF;
		if ((p.fd = sys_pidfd_open(cred.pid, 0)) < 0)
			return errno == ESRCH ? -ESRCH : -EBADF;
	}
	(void)fcntl(p.fd, F_SETFD, FD_CLOEXEC);
	if (poll(&p, 1, 0) == 1) { /* readable: it exited */
		close(p.fd);
		return -ESRCH;
	}
	return p.fd;
}

enum MHD_Result hutch_api_serve_fork(struct request *r, const char *upload, size_t *size)
{
	_cleanup_close_ int client = -EBADF;
	_cleanup_cjson_ cJSON *body = NULL;
	struct hutch_err err = { 0 };
	enum MHD_Result answered;
	const cJSON *copy, *names, *disk;
	cJSON *out = NULL;
	uint64_t bytes;
	size_t count;

	(void)upload;
	(void)size;
	body = parse_body(r, fork_fields, ELEMENTSOF(fork_fields),
	                  "{\"count\": N, \"disk_bytes\": B}", &answered);
	if (!body)
		return answered;
	copy = cJSON_GetObjectItemCaseSensitive(body, "copy");
	count = (size_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(body, "count"));
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "full")))
		return serve_fork_full(r, body, count);
	if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(body, "name")))
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		                        "'name' is a full fork's (\"full\": true)");
	disk = cJSON_GetObjectItemCaseSensitive(body, "disk_bytes");
	if (!cJSON_IsNumber(disk))
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request",
		                        "missing 'disk_bytes': the forks' disk size in bytes");
	bytes = (uint64_t)cJSON_GetNumberValue(disk);
	names = cJSON_GetObjectItemCaseSensitive(body, "names");
	if ((client = client_pidfd(r)) == -ESRCH) {
		hutch_event(r->s, "fork refused: its client ended before it began");
		return hutch_api_refuse(r->conn, HUTCH_ERRC_GONE, "client_gone",
		                        "its client ended before the fork began: nothing was made");
	}
	if (hutch_sup_fork(r->s, count, bytes, !cJSON_IsFalse(copy),
	                   cJSON_IsArray(names) ? names : NULL, client, &out, &err) < 0) {
		hutch_event(r->s, "fork refused: %s", err.msg);
		return hutch_api_respond_err(r->conn, &err, NULL);
	}
	return hutch_api_respond_json(r->conn, MHD_HTTP_CREATED, out);
}
