/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a failed file operation's errno means to an API client: the HTTP
 * status and error code of the answer (pure, unit-tested; docs/api.md lists
 * the codes).
 */
#ifndef HUTCH_FILE_ERRNO_H
#define HUTCH_FILE_ERRNO_H

struct hutch_file_errno {
	int err; /* positive errno */
	unsigned status;
	char code[20]; /* in the row: no relocation at start (issue 31: CLI start) */
};

/* The row of err (positive), or NULL: then 500 file_error. ENOSPC, EDQUOT
 * and ENOMEM map to 507 no_space, whose message the caller words itself. */
const struct hutch_file_errno *hutch_file_errno_find(int err);

#endif
