/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor <-> init protocol over a SOCK_SEQPACKET socketpair. One
 * datagram is one message: a fixed header and a bounded body. File
 * descriptors travel with SCM_RIGHTS from supervisor to init, and from init
 * to the supervisor: once during setup, the network listeners that init
 * makes inside the sandbox's network namespace (HUTCH_MSG_NET_FDS); a pty's
 * master (SPAWNED); a socket init connects to a published port inside the
 * sandbox (CONNECTED). The
 * supervisor parses init's messages as hostile input: fixed sizes, checked
 * types, unknown ids ignored, any fd received closed.
 */
#ifndef HUTCH_PROTO_H
#define HUTCH_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define HUTCH_PROTO_MAX      (1u << 20) /* largest message, header included */
#define HUTCH_SPAWN_MAX_ARGS 4096
#define HUTCH_SPAWN_MAX_ENV  1024
#define HUTCH_PROTO_FDS_MAX  64        /* fds in one message */
#define HUTCH_PROTO_SOCK_BUF (4 << 20) /* each end's buffers: the largest spawn fits */
/* In a header's type: the body is not in the datagram but in a sealed
 * memfd passed after the message's own fds (hdr.len its length). A socket
 * whose send buffer is too small for the message (SO_SNDBUF stops at
 * net.core.wmem_max without CAP_NET_ADMIN over the initial user
 * namespace: 212,992 bytes on Debian 12's 6.1, a datagram of ~416 KiB at
 * most, for a rootless supervisor and any init) gets it this way:
 * hutch_proto_send() falls back on EMSGSIZE, hutch_proto_recv() reads it
 * back, so a caller sees one message either way, up to HUTCH_PROTO_MAX. */
#define HUTCH_MSG_F_MEMFD (1u << 31)
/* A command's uid and gid inside the sandbox: appuser's unless the
 * supervisor says otherwise (an OCI bundle's process.user); only ids of
 * the sandbox's 65536-id range exist. */
#define HUTCH_SPAWN_DEFAULT_ID 1000
#define HUTCH_SPAWN_MAX_ID     65535
/* A container's process.user.additionalGids, at most. */
#define HUTCH_SPAWN_MAX_GROUPS 32

enum hutch_msg_type {
	/* supervisor -> init */
	HUTCH_MSG_SPAWN = 1, /* body: spawn; fds: stdin, stdout, stderr (none with a tty) */
	HUTCH_MSG_KILL,      /* body: kill */
	/* maps written, cgroups sent or entered: set up and report; id:
	 * HUTCH_GO_* (what init leaves out of what it got at its clone) */
	HUTCH_MSG_GO,
	HUTCH_MSG_CONNECT, /* body: connect; id: the supervisor's connection id */
	/* oci pause/resume -> a container's supervisor, on its exec socket
	 * (container.h): body: uint32_t 1 (freeze) or 0 (thaw); answer
	 * EXITED (status 0) or FAILED */
	HUTCH_MSG_FREEZE,
	/* oci update, likewise: body: struct hutch_limits (cgroup.h), each
	 * field 0 = unchanged; answer EXITED (status 0) or FAILED */
	HUTCH_MSG_UPDATE,
	/* body: uint32_t 1 or 0: init made dumpable (PR_SET_DUMPABLE) for a
	 * full snapshot's dump, then not again (supervisor/fullsnap.c); no
	 * answer: the supervisor sees it in /proc (the owner of /proc/PID) */
	HUTCH_MSG_DUMPABLE,
	/* The runtime dir's lxcfs ended (supervisor/procview.c): body:
	 * uint32_t which[n], view indexes (rootfs.h: HUTCH_ROOTFS_VIEWS);
	 * fds: the new views, one per index, or none: every view only
	 * detached (no lxcfs could run: the kernel's files). No answer. */
	HUTCH_MSG_VIEWS,
	/* setup only, before GO, cgroup v1 (made after init's clone): body:
	 * uint32_t n; fds: n hierarchies' "tasks" files, which init joins
	 * (writes "0": a self-migration), then the commands' freezer cgroup's
	 * "tasks" and "freezer.state" when it has one (init.h) */
	HUTCH_MSG_CGROUPS,
	/* init -> supervisor */
	HUTCH_MSG_READY = 100, /* rootfs and namespaces done: commands may run */
	HUTCH_MSG_FAILED,      /* body: struct hutch_err; setup failed */
	HUTCH_MSG_SPAWNED,     /* body: spawned; fd: the pty's master (HUTCH_SPAWN_TTY) */
	HUTCH_MSG_EXITED,      /* body: exited, then the change list if any (changes-format.h) */
	HUTCH_MSG_NET_FDS,     /* setup only, before READY: body: net_fd[n]; fds */
	HUTCH_MSG_CONNECTED,   /* body: connected; fd: the socket (error 0) */
	HUTCH_MSG_CONSOLE,     /* setup only, before READY: fd: the container's pty master */
	/* setup only, before READY, image roots: body: uint32_t which[n]
	 * (HUTCH_ROOTFS_WRITE_*); fds: the directories the sandbox writes,
	 * for filesystem snapshots (supervisor/snapshot.c) */
	HUTCH_MSG_WRITE_FDS,
	/* setup only, the last before READY: fd: the supervisor's end of a
	 * new socketpair made in the sandbox's network namespace, which
	 * replaces the first (made on the host) from now on: a full
	 * snapshot's CRIU dumps only sockets of the namespaces it dumps */
	HUTCH_MSG_SOCKET,
	/* setup only, after SOCKET, before READY: fd: the change lists'
	 * fanotify group init made on its tmpfs, a copy the supervisor keeps
	 * until its teardown's end (supervisor.h's disk_watch: the group's
	 * last close waits for an SRCU grace period, not in init's exit) */
	HUTCH_MSG_CHANGES_GROUP,
	/* setup only, before READY: body: struct hutch_err, a degradation the
	 * sandbox is made with all the same (its network: the NAT path's log
	 * that the kernel could not turn on), which the supervisor writes to
	 * its events log (hutch events ID) as "warning: MSG" */
	HUTCH_MSG_NOTE,
};

/* HUTCH_MSG_GO's id. */
enum hutch_go {
	HUTCH_GO_ALL = 0, /* everything init was given */
	/* lxcfs did not answer the supervisor's lookup of the views in time
	 * (supervisor/setup.c): init closes lxcfs's tree, binds no view */
	HUTCH_GO_NO_VIEWS = 1,
};

struct hutch_msg_hdr {
	uint32_t type;
	uint32_t len; /* body length */
	uint64_t id;  /* command id, chosen by the supervisor */
};

/* Body: fixed part, then argc NUL-terminated argv strings, envc env strings
 * ("K=V"), then the cwd string. */
struct hutch_msg_spawn {
	uint32_t argc;
	uint32_t envc;
	uint32_t flags;    /* HUTCH_SPAWN_* */
	uint32_t winsize;  /* HUTCH_SPAWN_TTY: rows << 16 | columns (0: the kernel's default) */
	uint32_t uid, gid; /* ids inside the sandbox (appuser's by default; below 65536) */
	/* A container's command (caps.h): its bounding, effective, permitted,
	 * inheritable and ambient sets, each within HUTCH_CAPS_CONTAINER_MAX;
	 * zero for every other command (and ignored outside a container). */
	uint64_t caps[5];
	/* A container's additional groups (setgroups), each below 65536;
	 * none for every other command. */
	uint32_t ngroups;
	uint32_t groups[HUTCH_SPAWN_MAX_GROUPS];
};

/* The child runs a built-in file operation (fileops.h; argv[0] names it)
 * instead of execvp(), after the same privilege drop and seccomp. */
#define HUTCH_SPAWN_BUILTIN (1u << 0)
/* The command runs on a new pseudo-terminal of the sandbox's own devpts,
 * opened by init: the slave is its controlling terminal and fds 0-2, the
 * master goes back to the supervisor with SPAWNED. */
#define HUTCH_SPAWN_TTY (1u << 1)
/* Load init's extra filter (a container's seccomp profile) in the child
 * too, on top of the sandbox's, right before execve; fail if there is none. */
#define HUTCH_SPAWN_EXTRA_FILTER (1u << 2)
/* With HUTCH_SPAWN_TTY: on the pty init opened during setup (a container's
 * terminal, whose master went to the supervisor with CONSOLE); nothing
 * comes back with SPAWNED. Once only. */
#define HUTCH_SPAWN_HELD_TTY (1u << 3)
/* More fds follow stdio's (or come alone with a tty): the command's 3, 4,
 * ... in their order (a container's --preserve-fds: socket activation). At
 * most HUTCH_SPAWN_MAX_EXTRA_FDS. */
#define HUTCH_SPAWN_EXTRA_FDS     (1u << 4)
#define HUTCH_SPAWN_MAX_EXTRA_FDS (HUTCH_PROTO_FDS_MAX - 3)
/* A container's main process: with a pid namespace of its own, init hands
 * it to the inner PID 1 it made at create (init/pidns.c), which runs it. */
#define HUTCH_SPAWN_MAIN (1u << 5)

struct hutch_msg_kill {
	int32_t signal;
	uint32_t flags; /* HUTCH_KILL_* */
};

/* Once the main process has exited, SIGKILL what is left of its tree (for
 * a SIGTERM that the main process obeys but its children ignore). */
#define HUTCH_KILL_REST_ON_EXIT (1u << 0)

struct hutch_msg_spawned {
	int32_t pid;   /* pid inside the sandbox, or 0 */
	int32_t error; /* 0, or negative errno if fork failed */
};

/* One network listener (netpolicy.h: enum hutch_net_listener_kind). */
struct hutch_msg_net_fd {
	uint32_t kind;
	uint32_t port;
};

/* Connect a TCP socket to loopback:port in the sandbox's network namespace
 * (non-blocking: the connection may still be in progress when it comes
 * back), for a port published on the host (supervisor/ports.c). */
struct hutch_msg_connect {
	uint32_t port;
	uint32_t ipv6; /* 1: ::1, 0: 127.0.0.1 */
};

struct hutch_msg_connected {
	int32_t error; /* 0 (the socket comes with it), or negative errno */
	uint32_t pad;
};

struct hutch_msg_exited {
	int32_t status; /* wait status */
	uint32_t pad;
};

/* A decoded spawn request; pointers point into the message buffer. */
struct hutch_spawn_req {
	uint32_t argc, envc, flags, winsize, uid, gid;
	uint64_t caps[5];
	uint32_t ngroups;
	gid_t groups[HUTCH_SPAWN_MAX_GROUPS];
	const char *argv[HUTCH_SPAWN_MAX_ARGS + 1];
	const char *envp[HUTCH_SPAWN_MAX_ENV + 1];
	const char *cwd;
};

/* Encode a spawn body into buf (malloc'ed); returns its length or -errno. */
ssize_t hutch_proto_spawn_encode(const char *const *argv, const char *const *envp, const char *cwd,
                                 char **ret_buf);
/* Decode and validate a spawn body. */
int hutch_proto_spawn_decode(const char *body, size_t len, struct hutch_spawn_req *ret);

/* Send one message with optional fds (at most HUTCH_PROTO_FDS_MAX), its
 * body in a memfd when the socket's buffer cannot hold it. -EINVAL: too
 * many fds or a message over HUTCH_PROTO_MAX. */
int hutch_proto_send(int sock, uint32_t type, uint64_t id, const void *body, size_t len,
                     const int *fds, size_t nfds);
/* Receive one message into buf (cap bytes); fds received go to fds (up to
 * *nfds, which is updated; extras are closed). Returns the body length,
 * 0 on EOF with hdr->type == 0, or -errno (-EAGAIN when nonblocking). */
ssize_t hutch_proto_recv(int sock, struct hutch_msg_hdr *hdr, void *buf, size_t cap, int *fds,
                         size_t *nfds);

#endif
