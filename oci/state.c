/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A container's state directory (see oci-internal.h): its paths, and what
 * `state` reports. The status is the supervisor's (status.json), except
 * that a supervisor which no longer holds the lock has stopped, whatever
 * its last word was (killed, crashed).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "oci-internal.h"

bool hutch_oci_id_is_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > HUTCH_OCI_ID_MAX || id[0] == '.' || id[0] == '-' || id[0] == '+' ||
	    id[0] == '_')
		return false;
	return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-") ==
	       n;
}

int hutch_oci_paths_init(const char *root, const char *id, struct hutch_oci_paths *ret,
                         struct hutch_err *err)
{
	if (!hutch_oci_id_is_valid(id))
		return hutch_err_set(err, -EINVAL,
		                     "invalid container id '%.200s' (letters, digits, '_.+-', "
		                     "at most %d)",
		                     id, HUTCH_OCI_ID_MAX);
	if (strlen(root) + strlen(id) + 2 > sizeof(ret->dir))
		return hutch_err_set(err, -ENAMETOOLONG, "--root: too long");
	/* Checked above: it fits. */
	memcpy(ret->dir, root, strlen(root));
	ret->dir[strlen(root)] = '/';
	memcpy(ret->dir + strlen(root) + 1, id, strlen(id) + 1);
	snprintf(ret->state, sizeof(ret->state), "%s/state.json", ret->dir);
	snprintf(ret->status, sizeof(ret->status), "%s/status.json", ret->dir);
	snprintf(ret->fifo, sizeof(ret->fifo), "%s/exec.fifo", ret->dir);
	snprintf(ret->exec, sizeof(ret->exec), "%s/exec.sock", ret->dir);
	snprintf(ret->lock, sizeof(ret->lock), "%s/lock", ret->dir);
	return 0;
}

static cJSON *read_json(const char *path)
{
	_cleanup_free_ char *text = NULL;
	ssize_t n = hutch_read_file_alloc_at(AT_FDCWD, path, 1u << 20, &text);

	return n > 0 ? cJSON_ParseWithLength(text, (size_t)n) : NULL;
}

static pid_t num(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	return cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 4194305
	               ? (pid_t)v->valuedouble
	               : 0;
}

/* 1 if the supervisor holds the lock, 0 if not. */
static int lock_held(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0)
		return 0;
	return errno == EWOULDBLOCK ? 1 : -errno;
}

int hutch_oci_state_read(const struct hutch_oci_paths *p, const char *id,
                         struct hutch_oci_state *ret, struct hutch_err *err)
{
	_cleanup_cjson_ cJSON *status = NULL;
	const cJSON *v;

	memset(ret, 0, sizeof(*ret));
	ret->doc = read_json(p->state);
	if (!ret->doc)
		return hutch_err_set(err, -ENOENT, "container %s does not exist", id);
	ret->alive = lock_held(p->lock) == 1;
	status = read_json(p->status);
	v = cJSON_GetObjectItemCaseSensitive(status, "status");
	snprintf(ret->status, sizeof(ret->status), "%s",
	         cJSON_IsString(v) ? v->valuestring : "creating");
	if (!status && !ret->alive)
		snprintf(ret->status, sizeof(ret->status), "stopped");
	if (!ret->alive && strcmp(ret->status, "creating") != 0)
		snprintf(ret->status, sizeof(ret->status), "stopped");
	ret->pid = num(status, "pid");
	ret->process_pid = num(status, "process_pid");
	ret->init_pid = num(status, "init_pid");
	v = cJSON_GetObjectItemCaseSensitive(status, "process_start");
	if (cJSON_IsNumber(v) && v->valuedouble >= 0)
		ret->process_start = (unsigned long long)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(status, "sandbox");
	if (cJSON_IsString(v))
		snprintf(ret->sandbox, sizeof(ret->sandbox), "%s", v->valuestring);
	return 0;
}

void hutch_oci_state_done(struct hutch_oci_state *st)
{
	cJSON_Delete(st->doc);
	st->doc = NULL;
}

/*
 * The container's own process as the host sees it, in the container's
 * namespaces (as runtime-spec's state.pid is): hutch's init while created
 * (runc's is its runc init then), the process once running, 0 once
 * stopped. The process a subreaper waits for is another one, the
 * supervisor, whose pid --pid-file receives (docs/architecture.md).
 */
pid_t hutch_oci_state_pid(const struct hutch_oci_state *st)
{
	if ((!strcmp(st->status, "running") || !strcmp(st->status, "paused")) &&
	    st->process_pid > 0)
		return st->process_pid;
	if (!strcmp(st->status, "stopped"))
		return 0;
	return st->init_pid > 0 ? st->init_pid : st->pid;
}

cJSON *hutch_oci_state_json(const struct hutch_oci_state *st, const char *id)
{
	cJSON *j = cJSON_CreateObject();
	const cJSON *v;

	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "ociVersion", HUTCH_OCI_VERSION);
	cJSON_AddStringToObject(j, "id", id);
	cJSON_AddStringToObject(j, "status", st->status);
	cJSON_AddNumberToObject(j, "pid", hutch_oci_state_pid(st));
	v = cJSON_GetObjectItemCaseSensitive(st->doc, "bundle");
	cJSON_AddStringToObject(j, "bundle", cJSON_IsString(v) ? v->valuestring : "");
	v = cJSON_GetObjectItemCaseSensitive(st->doc, "created");
	if (cJSON_IsString(v))
		cJSON_AddStringToObject(j, "created", v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(st->doc, "annotations");
	if (cJSON_IsObject(v))
		cJSON_AddItemToObject(j, "annotations", cJSON_Duplicate(v, true));
	return j;
}
