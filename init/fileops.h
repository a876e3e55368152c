/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Built-in file operations, run by a child of init after it dropped to
 * appuser and loaded the seccomp filter (HUTCH_SPAWN_BUILTIN): paths resolve
 * inside the sandbox's mount namespace, as appuser, by construction. The
 * supervisor never resolves a sandbox path (DESIGN §2).
 *
 * Protocol, on the command's fds 0-2:
 *   argv[0] names the operation (HUTCH_FOP_*), the rest are its arguments;
 *   stdin carries the data of "write"/"tar-x";
 *   stdout carries data: "read" and "tar-c" first write an 8-byte
 *   little-endian size header (UINT64_MAX: unknown, read to EOF), "ls" a
 *   JSON array;
 *   on failure stderr holds one line "E<errno> <message>" and the exit
 *   status is 1 (tar's own messages, when tar fails, come as they are).
 */
#ifndef HUTCH_FILEOPS_H
#define HUTCH_FILEOPS_H

#include <stdint.h>

#define HUTCH_FOP_WRITE                                                                    \
	"write"                 /* PATH MODE|"" SIZE|-1 [noparents]: data on stdin, temp + \
	                         * rename; parents made unless "noparents" */
#define HUTCH_FOP_READ  "read"  /* PATH MAX|-1: header + data on stdout */
#define HUTCH_FOP_RM    "rm"    /* PATH: unlink a non-directory */
#define HUTCH_FOP_MKDIR "mkdir" /* PATH MODE|"": with parents; existing directory is fine */
#define HUTCH_FOP_RMDIR "rmdir" /* PATH: recursive */
/* The executor's semantics (Go's os.Remove, os.RemoveAll): */
#define HUTCH_FOP_REMOVE     "remove"     /* PATH: a file, or an empty directory */
#define HUTCH_FOP_REMOVE_ALL "remove-all" /* PATH: recursive; a file too; missing is fine */
#define HUTCH_FOP_LS         "ls"         /* PATH: JSON array on stdout */
#define HUTCH_FOP_TAR_C      "tar-c"      /* PATH: header (unknown size) + tar of PATH's contents */
#define HUTCH_FOP_TAR_X      "tar-x"      /* PATH: mkdir -p PATH, extract the tar on stdin there */

#define HUTCH_FOP_SIZE_UNKNOWN UINT64_MAX

/* In the forked child of init, privileges dropped: run argv[0]. Returns the
 * exit status (or does not return: tar-c/tar-x exec tar). */
int hutch_fileop_main(int argc, const char *const *argv);

#endif
