/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parent's side of what the unpacker child says on its result pipe
 * (import.c writes it, image-internal.h describes it): hostile input, as
 * the child parses hostile layers, so it is read in bounded pieces, each a
 * type byte and a body of a size the type fixes, and fuzzed
 * (tests/fuzz/fuzz_report.c). Apart from import.c for that reason.
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "fdutil.h"
#include "image-internal.h"

int hutch_image_read_reports(int fd, struct hutch_unpack_report *out,
                             const struct hutch_unpack_limits *lim)
{
	uint64_t read;
	char type;

	for (;;) {
		if (hutch_read_all(fd, &type, 1) != 1)
			return -EIO;
		if (type == HUTCH_UNPACK_MSG_RESULT)
			return hutch_read_all(fd, out, sizeof(*out)) == (ssize_t)sizeof(*out)
			               ? 0
			               : -EIO;
		if (type != HUTCH_UNPACK_MSG_PROGRESS ||
		    hutch_read_all(fd, &read, sizeof(read)) != (ssize_t)sizeof(read))
			return -EIO;
		if (lim->progress)
			lim->progress(lim->progress_ud, read); /* the caller clamps it */
	}
}
