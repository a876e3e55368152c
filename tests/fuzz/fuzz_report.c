/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the parent's reading of the unpacker child's
 * messages (image/report.c): the input is what the child wrote on its
 * pipe. The result must be 0 (a result read whole) or -EIO, and the
 * reading must end at the pipe's end whatever the input.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fdutil.h"
#include "image-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_read(void *ud, uint64_t read)
{
	(void)read;
	++*(size_t *)ud;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hutch_unpack_report out;
	size_t calls = 0;
	struct hutch_unpack_limits lim = { .progress = on_read, .progress_ud = &calls };
	int p[2], r;

	if (size > 60000 || pipe2(p, O_CLOEXEC) < 0) /* within a pipe's 64 KiB */
		return 0;
	if (hutch_write_all(p[1], data, size) < 0)
		abort();
	(void)close(p[1]);
	r = hutch_image_read_reports(p[0], &out, &lim);
	(void)close(p[0]);
	if ((r != 0 && r != -EIO) || calls > size / 9)
		abort();
	return 0;
}
