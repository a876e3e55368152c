/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private interface of the image library: the OCI JSON parsers (oci.c,
 * pure, fuzzed), SHA-256 (digest.c), the hostile-safe layer unpacker
 * (unpack.c) and the importers (import.c), exposed here so the unit test
 * and the fuzzer can drive each alone.
 *
 * Functions return >= 0 on success and a negative errno on failure with
 * err filled; ret_* outputs are written only on success.
 */
#ifndef HUTCH_IMAGE_INTERNAL_H
#define HUTCH_IMAGE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "image.h"

#define HUTCH_IMAGE_JSON_MAX  (4 << 20) /* a manifest, index or config */
#define HUTCH_IMAGE_INDEX_MAX 256       /* manifests in one index */
#define HUTCH_IMAGE_ENV_MAX   1024      /* Env entries of a config */
#define HUTCH_IMAGE_PATH_MAX  256       /* a file name inside a docker archive */

/* ---- fullstore.c: a default name (pure) ---- */

/* "<stem>-<n>" into buf for the first n after *counter that taken(ud,
 * name) finds free (0: free; -EEXIST: taken, try the next; other: its
 * error, passed on), *counter advanced to it. -EEXIST (conflict) after
 * HUTCH_IMAGE_NAME_TRIES names taken. */
#define HUTCH_IMAGE_NAME_TRIES 1000
int hutch_image_name_pick(const char *stem, unsigned *counter,
                          int (*taken)(void *ud, const char *name, struct hutch_err *err), void *ud,
                          char *buf, size_t size, struct hutch_err *err);

/* ---- oci.c: the JSON documents (pure) ---- */

struct hutch_image_manifest {
	char config[HUTCH_IMAGE_DIGEST_LEN + 1];
	char layers[HUTCH_IMAGE_LAYERS_MAX][HUTCH_IMAGE_DIGEST_LEN + 1]; /* blob digests */
	size_t n_layers;
};

struct hutch_image_docker {
	char config[HUTCH_IMAGE_PATH_MAX];                         /* file in the archive */
	char layers[HUTCH_IMAGE_LAYERS_MAX][HUTCH_IMAGE_PATH_MAX]; /* files, in order */
	size_t n_layers;
};

/* The manifest of an index named tag, or (tag NULL) for os/arch; *ret_nested
 * when it is an index again. -ENOENT when none matches. */
int hutch_image_parse_index(const char *buf, size_t len, const char *tag, const char *os,
                            const char *arch, char ret_digest[HUTCH_IMAGE_DIGEST_LEN + 1],
                            bool *ret_nested, struct hutch_err *err);
int hutch_image_parse_manifest(const char *buf, size_t len, struct hutch_image_manifest *ret,
                               struct hutch_err *err);
/* Fills ret (release with hutch_image_config_done()). */
int hutch_image_parse_config(const char *buf, size_t len, struct hutch_image_config *ret,
                             struct hutch_err *err);
int hutch_image_parse_docker_manifest(const char *buf, size_t len, struct hutch_image_docker *ret,
                                      struct hutch_err *err);

/* ---- digest.c: SHA-256 (nettle) ---- */

struct hutch_sha256 {
	uint64_t opaque[16]; /* a struct sha256_ctx, kept out of this header */
};
void hutch_sha256_init(struct hutch_sha256 *h);
void hutch_sha256_update(struct hutch_sha256 *h, const void *buf, size_t len);
/* "sha256:<64 hex>" of everything updated so far. */
void hutch_sha256_final(struct hutch_sha256 *h, char out[HUTCH_IMAGE_DIGEST_LEN + 1]);

/* ---- unpack.c: one layer, hostile input ---- */

struct hutch_unpack_limits {
	uint64_t max_bytes;       /* uncompressed tar stream and file sizes, each */
	uint64_t max_image_bytes; /* the layers of one image, together (import.c) */
	uint64_t max_entries;     /* tar entries */
	bool chown;               /* give files the tar's owners (needs CAP_CHOWN) */
	/* Without chown (an ordinary user's store): keep what the files
	 * cannot have, the tar's owners and a directory's mode narrower than
	 * 0700, in HUTCH_OVERRIDE_STAT_XATTR of each regular file and
	 * directory that needs it, and append its path (relative, NUL-ended)
	 * to owners_fd: the layer's owners index (owners.c). */
	bool keep_owners;
	int owners_fd;
	/* Progress (may be NULL): the blob's bytes read so far, at most once
	 * per progress_ms (HUTCH_PROGRESS_INTERVAL_MS, default 100) and once
	 * when the blob is read whole. */
	void (*progress)(void *ud, uint64_t read);
	void *progress_ud;
	uint64_t progress_ms;
	/* A test hook (HUTCH_TEST_UNPACK_STOP_AFTER): after this many entries
	 * the unpacker stops itself (SIGSTOP), a known point to interrupt. */
	uint64_t stop_after;
	/* The caller has the stream's digest (a snapshot's writer hashed
	 * what it wrote into the pipe: hutch_image_commit()): none is
	 * computed here, the result's digests are left empty, and a
	 * compressed stream is refused (its diff_id would not be the
	 * digest of its bytes). */
	bool digest_given;
};

struct hutch_unpack_result {
	char blob_digest[HUTCH_IMAGE_DIGEST_LEN + 1]; /* of the bytes read from fd */
	char diff_id[HUTCH_IMAGE_DIGEST_LEN + 1];     /* of the uncompressed tar */
	uint64_t bytes;                               /* of the uncompressed tar */
	uint64_t entries, skipped;                    /* skipped: devices */
};

/*
 * The clean relative form of a tar entry's path into out: "./" and empty
 * components dropped. -EINVAL for an absolute path or a ".." component,
 * -ENAMETOOLONG, -ENOENT for the root itself ("./").
 */
int hutch_image_clean_path(const char *in, char *out, size_t outlen);

/* The limits from HUTCH_IMAGE_MAX_BYTES (one image's layers together,
 * default 16 GiB), HUTCH_IMAGE_MAX_LAYER_BYTES (each layer, default the
 * image's bound) and 1M entries. */
void hutch_unpack_limits_default(struct hutch_unpack_limits *l);

/*
 * Unpack the (optionally gzip/bzip2/xz/zstd-compressed) tar read from fd
 * into the empty directory dirfd, as an overlayfs layer: ".wh.NAME" becomes
 * a whiteout (character device 0/0), ".wh..wh..opq" marks its directory
 * opaque (user.overlay.opaque=y). Refused, with nothing outside dirfd
 * touched: an absolute path or one with "..", a path through a symlink, a
 * hard link to anything not already in this layer, a whiteout of "." or
 * "..", more than limits' bytes or entries. Device nodes are skipped;
 * set-uid, set-gid bits are dropped. Both digests are computed in the same
 * pass; the caller compares them. On failure dirfd holds a partial tree
 * for the caller to remove.
 */
int hutch_image_unpack(int fd, int dirfd, const struct hutch_unpack_limits *limits,
                       struct hutch_unpack_result *ret, struct hutch_err *err);

/* ---- import.c: what the unpacker child reports to its parent ---- */

struct hutch_unpack_report {
	int r;
	struct hutch_err err;
	struct hutch_unpack_result res;
};
#define HUTCH_UNPACK_MSG_PROGRESS 'p' /* then a uint64_t: the blob's bytes read */
#define HUTCH_UNPACK_MSG_RESULT   'r' /* then a struct hutch_unpack_report, last */

/*
 * Read the unpacker's messages from fd: each a type byte and a body of a
 * fixed size, so the amount read never comes from the child. Progress goes
 * to lim->progress (if set; the caller clamps what it is told); returns 0
 * with ret filled at the result, -EIO for anything else (an unknown type,
 * a short message, the pipe's end): a dead or confused unpacker.
 */
int hutch_image_read_reports(int fd, struct hutch_unpack_report *ret,
                             const struct hutch_unpack_limits *lim);

#endif
