/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The change list's wire form decoded into a command result's "changes"
 * object (changes-format.h). Pure: no syscalls. Paths are bytes on the
 * file system and become UTF-8 with invalid bytes replaced, like output.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "changes-format.h"
#include "cleanup.h"
#include "util.h"

static const char *type_name(uint32_t mode)
{
	if (S_ISREG(mode))
		return "file";
	if (S_ISDIR(mode))
		return "dir";
	if (S_ISLNK(mode))
		return "symlink";
	return "other";
}

static bool add_what(cJSON *e, unsigned what)
{
	static const char *const names[] = { "content", "mode", "owner", "type" };
	cJSON *a = cJSON_AddArrayToObject(e, "what");

	if (!a)
		return false;
	for (unsigned i = 0; i < 4; i++)
		if ((what & (1u << i)) && !cJSON_AddItemToArray(a, cJSON_CreateString(names[i])))
			return false;
	return true;
}

static bool add_entry(cJSON *list, const struct hutch_change_rec *r, const char *path)
{
	_cleanup_free_ char *clean = hutch_utf8_sanitize(path, r->path_len, NULL);
	cJSON *e = cJSON_CreateObject();

	if (!e || !clean || !cJSON_AddItemToArray(list, e))
		return cJSON_Delete(e), false;
	if (!cJSON_AddStringToObject(e, "path", clean) ||
	    !cJSON_AddStringToObject(e, "type", type_name(r->mode)) ||
	    !cJSON_AddNumberToObject(e, "size", (double)r->size) ||
	    !cJSON_AddNumberToObject(e, "mode", r->mode & 07777))
		return false;
	return r->kind != HUTCH_CHANGE_MODIFIED || add_what(e, r->what);
}

cJSON *hutch_changes_to_json(const void *buf, size_t len)
{
	static const char *const lists[] = { "created", "modified", "deleted" };
	struct hutch_changes_hdr h;
	_cleanup_cjson_ cJSON *o = cJSON_CreateObject();
	cJSON *l[3];
	const char *p = buf;
	size_t off = sizeof(h);

	if (!o || len < sizeof(h))
		return NULL;
	memcpy(&h, p, sizeof(h));
	if (h.n > HUTCH_CHANGES_MAX_ENTRIES || (h.flags & ~3u))
		return NULL;
	for (int i = 0; i < 3; i++)
		if (!(l[i] = cJSON_AddArrayToObject(o, lists[i])))
			return NULL;
	for (uint32_t i = 0; i < h.n; i++) {
		struct hutch_change_rec r;

		if (len - off < sizeof(r))
			return NULL;
		memcpy(&r, p + off, sizeof(r));
		off += sizeof(r);
		if (r.kind < HUTCH_CHANGE_CREATED || r.kind > HUTCH_CHANGE_DELETED ||
		    r.path_len == 0 || len - off < r.path_len || p[off] != '/' ||
		    memchr(p + off, '\0', r.path_len))
			return NULL;
		if (!add_entry(l[r.kind - 1], &r, p + off))
			return NULL;
		off += r.path_len;
	}
	if (off != len || !cJSON_AddNumberToObject(o, "omitted", (double)h.omitted) ||
	    !cJSON_AddBoolToObject(o, "shared", h.flags & HUTCH_CHANGES_SHARED) ||
	    !cJSON_AddBoolToObject(o, "complete", !(h.flags & HUTCH_CHANGES_INCOMPLETE)))
		return NULL;
	return TAKE_PTR(o);
}
