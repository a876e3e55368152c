/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A call that may block in the kernel for ever (a request to a FUSE server
 * that does not answer: a stopped or hung lxcfs), bounded: run in a child
 * that shares our memory (CLONE_VM: no copy of our page tables), waited
 * for in poll() on its pidfd, killed at the bound (a FUSE request not yet
 * read ends with SIGKILL; one read ends when it is answered, and the kill
 * takes the child before it runs another instruction of ours).
 *
 * The child may run beside us (hutch_bounded_start(), then our own work,
 * then hutch_bounded_wait()): it shares our TLS (errno, glibc's caches)
 * and heap, and has a copy of our fd table made at the start. So fn may
 * call nothing but sys_raw() (base/syscalls.h: no errno written), read
 * only what its caller leaves unchanged until the wait, and write nothing
 * but its own stack: no glibc wrapper (statx(), access(), statfs() write
 * errno on failure), no malloc, no stdio (snprintf too), no log; mark it
 * HUTCH_BOUNDED_FN (no sanitizer state of ours written either).
 * tests/unit/test_base.c checks errno across a failing child.
 */
#ifndef HUTCH_BOUNDED_H
#define HUTCH_BOUNDED_H

#include <errno.h>
#include <stdint.h>
#include <sys/types.h>

#define HUTCH_BOUNDED_FN __attribute__((no_sanitize("address", "undefined"), noinline))

/* One bounded call; zero it with HUTCH_BOUNDED_INIT before its start. */
struct hutch_bounded {
	pid_t pid; /* the child, 0: none (done, or fn ran here) */
	int pidfd;
	int result;          /* fn's value once known */
	int64_t deadline_ms; /* hutch_now_mono_ms() */
};
#define HUTCH_BOUNDED_INIT                                               \
	{                                                                \
		.pid = 0, .pidfd = -EBADF, .result = 0, .deadline_ms = 0 \
	}

/*
 * fn(arg) started in such a child, bounded to timeout_ms from now; one at
 * a time per process (its stack is ours, static): a start while another
 * runs gives -EBUSY as its result, fn not called. Without the child
 * (clone() refused) or without raw syscalls on this architecture
 * (HUTCH_RAW_SYSCALLS 0), fn has run when this returns (unbounded in the
 * first case). A hutch_bounded_wait() or _cancel() must follow.
 */
void hutch_bounded_start(struct hutch_bounded *b, int (*fn)(void *), void *arg, int timeout_ms);
/* fn's value (its exit status, 0-255), or -ETIMEDOUT when it did not
 * return by the deadline (killed then), -ECHILD when a signal ended it;
 * again the same value once known. */
int hutch_bounded_wait(struct hutch_bounded *b);
/* No wait for its value (a failure meanwhile): the child killed and
 * reaped if it runs. Idempotent. */
void hutch_bounded_cancel(struct hutch_bounded *b);

/* Start and wait: the call as one. */
int hutch_bounded_call(int (*fn)(void *), void *arg, int timeout_ms);

#endif
