/* SPDX-License-Identifier: Apache-2.0 */
/* errno -> HTTP status and error code of a file operation; see file-errno.h. */
#include <errno.h>
#include <stddef.h>

#include "cleanup.h"
#include "file-errno.h"

static const struct hutch_file_errno errmap[] = {
	{ ENOENT, 404, "not_found" },
	{ EISDIR, 400, "is_a_directory" },
	{ ENOTDIR, 400, "not_a_directory" },
	{ EACCES, 403, "permission_denied" },
	{ EPERM, 403, "permission_denied" },
	{ EROFS, 403, "permission_denied" },
	{ ENOSPC, 507, "no_space" },
	{ EDQUOT, 507, "no_space" },
	{ ENOMEM, 507, "no_space" },
	{ EFBIG, 413, "too_large" },
	{ EEXIST, 409, "exists" },
	{ ENOTEMPTY, 409, "exists" },
	{ EBUSY, 409, "busy" },
	{ ELOOP, 400, "invalid_path" },
	{ ENAMETOOLONG, 400, "invalid_path" },
	{ EINVAL, 400, "invalid_path" },
	{ EPIPE, 400, "incomplete_upload" },
	{ ETXTBSY, 409, "busy" },
};

const struct hutch_file_errno *hutch_file_errno_find(int err)
{
	for (size_t i = 0; i < ELEMENTSOF(errmap); i++)
		if (errmap[i].err == err)
			return &errmap[i];
	return NULL;
}
