/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A command's change list as it travels from init to the supervisor: the
 * tail of HUTCH_MSG_EXITED after struct hutch_msg_exited (proto.h), and
 * its JSON form in a command's result ("changes", docs/api.md). init
 * encodes (init/changes.c), the supervisor decodes it as hostile input:
 * every length checked, a malformed list dropped whole.
 */
#ifndef HUTCH_CHANGES_FORMAT_H
#define HUTCH_CHANGES_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include <sys/fanotify.h>

#include <cjson/cJSON.h>

#ifndef FAN_REPORT_TARGET_FID
#define FAN_REPORT_TARGET_FID 0x00001000
#endif

/* The fanotify group of the change lists (init/changes.c): init's own on
 * a tmpfs of its own; on the sandbox's disk, whose file system belongs to
 * the host's user namespace, made and marked by the supervisor
 * (runtime/disk.h) and handed to init. No FAN_MODIFY: an event per
 * write() cost a 1 GiB write 44% more (measured); CLOSE_WRITE marks the
 * name once and the comparison sees the content change by inode, size and
 * mtime (multigrain timestamps, Linux 6.13: a write after init's stat
 * always moves the mtime). */
#define HUTCH_CHANGES_FAN_INIT                                                             \
	(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_REPORT_FID | FAN_REPORT_TARGET_FID | \
	 FAN_CLOEXEC | FAN_NONBLOCK)
#define HUTCH_CHANGES_FAN_EVENTS                                                                  \
	(FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_ATTRIB | FAN_CLOSE_WRITE | \
	 FAN_ONDIR)

/* At most this many entries in one list, and this many bytes; what does
 * not fit is counted in "omitted". */
#define HUTCH_CHANGES_MAX_ENTRIES 1000
#define HUTCH_CHANGES_MAX_BYTES   (128u * 1024)

enum hutch_change_kind {
	HUTCH_CHANGE_CREATED = 1,
	HUTCH_CHANGE_MODIFIED,
	HUTCH_CHANGE_DELETED,
};

/* What a modification changed (bits of hutch_change_rec.what). */
#define HUTCH_CHANGED_CONTENT (1u << 0)
#define HUTCH_CHANGED_MODE    (1u << 1)
#define HUTCH_CHANGED_OWNER   (1u << 2)
#define HUTCH_CHANGED_TYPE    (1u << 3)

/* The list's flags (hutch_changes_hdr.flags): SHARED, another command ran
 * meanwhile (its changes are here too); INCOMPLETE, the kernel's event
 * queue overflowed. */
#define HUTCH_CHANGES_SHARED     (1u << 0)
#define HUTCH_CHANGES_INCOMPLETE (1u << 1)

struct hutch_changes_hdr {
	uint32_t flags;
	uint32_t n;       /* records that follow */
	uint64_t omitted; /* changes past the caps */
};

/* One record, followed by path_len bytes of its absolute path (no NUL). */
struct hutch_change_rec {
	uint8_t kind; /* enum hutch_change_kind */
	uint8_t what; /* HUTCH_CHANGED_*: modified only */
	uint16_t path_len;
	uint32_t mode; /* st_mode after (before, deleted) */
	uint64_t size; /* st_size after (before, deleted) */
};

/* The JSON object of a list of len bytes (the header and its records):
 * {"created": [...], "modified": [...], "deleted": [...], "omitted": N,
 * "shared": B, "complete": B}. NULL if malformed or out of memory. */
cJSON *hutch_changes_to_json(const void *buf, size_t len);

#endif
