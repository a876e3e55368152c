/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Change lists (docs/history.md, "Change lists per command"): what
 * each command created, modified and deleted in the sandbox's writable
 * tmpfs mounts (/workspace, /home/appuser, /tmp), kept by init. A fanotify
 * group with a filesystem mark on each says which names were touched (the
 * directory's file handle and the name); init keeps an index of those
 * trees (path -> inode, size, mode, owner, mtime) and, at each command's
 * start and end, compares the touched names with it: the differences go
 * to every command running then. A kernel without fanotify marks in a
 * user namespace (before 6.8) gives no lists at all.
 */
#ifndef HUTCH_INIT_CHANGES_H
#define HUTCH_INIT_CHANGES_H

#include <stddef.h>
#include <stdint.h>

struct hutch_changes;

/* After the root is built, before the seccomp filter (name_to_handle_at
 * and fanotify_init are not on it): the group, its marks and the first
 * index of the directories. disk_group: the supervisor's group, marked on
 * the sandbox's disk (taken; -1: a tmpfs, init makes its own). NULL when
 * the kernel or the root does not allow it. */
struct hutch_changes *hutch_changes_new(int disk_group);
/* The group init made itself (a tmpfs's), or -1 (the supervisor's, on the
 * disk; none): its fd, still init's (c may be NULL). */
int hutch_changes_own_group(const struct hutch_changes *c);
/* After READY, before init serves its first request (nothing in the
 * sandbox runs yet, so nothing changes meanwhile): the rest of the first
 * index, every entry that is not a directory (c may be NULL). A fork's
 * 1,000 files cost no time before it is ready. */
void hutch_changes_index(struct hutch_changes *c);
/* The group's fd for poll(), or -1 (c may be NULL; the lists stopped).
 * Read at most every 20 ms, so that the kernel merges queued events (a
 * command's start and end read everything): -1 meanwhile, with *timeout
 * lowered to the rest left. */
int hutch_changes_poll_fd(struct hutch_changes *c, int *timeout);
/* Read what the kernel queued (the fd is readable). */
void hutch_changes_read(struct hutch_changes *c);
/* Command id starts now: what was touched before is not its own. */
void hutch_changes_start(struct hutch_changes *c, uint64_t id);
/* Command id has exited (its whole tree): its list in the wire form of
 * changes-format.h after head bytes left for the caller, malloc'ed into
 * *ret_buf; returns the length with head. 0 and NULL when there is none
 * (nothing changed, no group, unknown id, out of memory). ret_buf NULL:
 * the list is dropped. */
size_t hutch_changes_end(struct hutch_changes *c, uint64_t id, size_t head, char **ret_buf);

/* hutch diff (changes-hist.c): generations are 2 * id at command id's
 * start and 2 * id + 1 after its end; raise c's to gen (c may be NULL). */
void hutch_changes_gen_at_least(struct hutch_changes *c, uint64_t gen);
/* The builtin "diff GEN" in the forked child of init (its copy of c, NULL
 * when the sandbox has no lists): every path changed since generation GEN
 * against its state now, in the wire form of changes-format.h on stdout.
 * Returns the exit status: 0, 2 bad arguments, 3 no lists here, 1 failed. */
int hutch_changes_diff_main(const struct hutch_changes *c, int argc, const char *const *argv);

#endif
