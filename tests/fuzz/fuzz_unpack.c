/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the layer unpacker (image/unpack.c), a parser of
 * hostile input: the input is a layer's bytes (a tar, maybe compressed),
 * unpacked into a fresh directory beside one that stands for the host.
 * Whatever the input, the unpack ends, and nothing appears outside the
 * layer's directory (the host's directory keeps its one file).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdutil.h"
#include "image-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t entries(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	size_t n = 0;

	if (!d)
		abort();
	while (readdir(d))
		n++;
	(void)closedir(d);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hutch_unpack_limits lim = { .max_bytes = 1 << 20,
		                           .max_entries = 200,
		                           .owners_fd = -EBADF };
	struct hutch_unpack_result res;
	struct hutch_err err = { 0 };
	char base[] = "/tmp/hutch-fuzz-unpack-XXXXXX";
	int in, top, layer, host;

	lim.digest_given = size > 0 && (data[0] & 1);
	if (!mkdtemp(base))
		abort();
	top = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0 || mkdirat(top, "layer", 0755) < 0 || mkdirat(top, "host", 0755) < 0)
		abort();
	host = openat(top, "host", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	layer = openat(top, "layer", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	in = memfd_create("layer", MFD_CLOEXEC);
	if (host < 0 || layer < 0 || in < 0 || hutch_write_file_at(host, "secret", "x", 0644) < 0 ||
	    hutch_write_all(in, data, size) < 0 || lseek(in, 0, SEEK_SET) != 0)
		abort();
	(void)hutch_image_unpack(in, layer, &lim, &res, &err);
	/* the host's directory: ".", ".." and its one file, nothing else */
	if (entries(host) != 3 || entries(top) != 4)
		abort();
	(void)close(in);
	(void)close(layer);
	(void)close(host);
	(void)close(top);
	if (hutch_rm_rf_at(AT_FDCWD, base) < 0)
		abort();
	return 0;
}
