/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cleanup attributes: every owned resource is declared with one, so every
 * early return is leak-free. Helpers accept NULL / negative fds, are
 * idempotent and preserve errno. Ownership moves only through TAKE_FD() and
 * TAKE_PTR().
 */
#ifndef HUTCH_CLEANUP_H
#define HUTCH_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>

static inline void freep(void *p)
{
	int saved = errno;
	free(*(void **)p);
	errno = saved;
}

static inline void closep(int *fd)
{
	int saved = errno;
	if (*fd >= 0)
		(void)close(*fd);
	*fd = -EBADF;
	errno = saved;
}

static inline void fclosep(FILE **f)
{
	int saved = errno;
	if (*f)
		(void)fclose(*f);
	errno = saved;
}

static inline void closedirp(DIR **d)
{
	int saved = errno;
	if (*d)
		(void)closedir(*d);
	errno = saved;
}

static inline void cjsonp(cJSON **j)
{
	if (*j)
		cJSON_Delete(*j);
}

#define _cleanup_(f)       __attribute__((cleanup(f)))
#define _cleanup_free_     _cleanup_(freep)
#define _cleanup_close_    _cleanup_(closep)
#define _cleanup_fclose_   _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)
#define _cleanup_cjson_    _cleanup_(cjsonp)

#define TAKE_FD(fd)              \
	({                       \
		int _fd_ = (fd); \
		(fd) = -EBADF;   \
		_fd_;            \
	})
#define TAKE_PTR(p)                      \
	({                               \
		__typeof__(p) _p_ = (p); \
		(p) = NULL;              \
		_p_;                     \
	})

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

#endif
