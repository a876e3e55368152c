/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A call that may block in the kernel for ever (a request to a FUSE server
 * that does not answer: a stopped or hung lxcfs), bounded: run in a child
 * that shares our memory (CLONE_VM: no copy of our page tables), waited
 * for in poll() on its pidfd, killed at the bound (a FUSE request not yet
 * read ends with SIGKILL; one read ends when it is answered, and the kill
 * takes the child before it runs another instruction of ours).
 */
#ifndef HUTCH_BOUNDED_H
#define HUTCH_BOUNDED_H

/* fn(arg) in such a child, one at a time per process (its stack is ours,
 * static). fn may write nothing its caller reads while it runs but its
 * own stack and errno (the child shares our TLS: no malloc, no FILE).
 * Returns fn's value (its exit status, 0-255), or -ETIMEDOUT when it did
 * not return within timeout_ms (killed), -ECHILD when a signal ended it.
 * Without the child (clone() refused) fn runs here, unbounded. */
int hutch_bounded_call(int (*fn)(void *), void *arg, int timeout_ms);

#endif
