/* SPDX-License-Identifier: Apache-2.0 */
/*
 * image: the content-addressed store of OCI images (docs/history.md,
 * "Images"). Imports an OCI image layout directory or a docker-save
 * archive, verifies every digest, unpacks each layer once (hostile-safe,
 * in a user namespace that owns only the store's ids) and names images by
 * a reference. Host side only; nothing here runs inside a sandbox.
 *
 * Store layout (default /var/lib/hutch, HUTCH_IMAGE_STORE moves it):
 *   layers/<hex>/       one unpacked layer, named by its diff_id's hex
 *   blobs/sha256/<hex>  verified manifests and configs
 *   images/<name>       a reference: JSON naming the config and the layers
 *   tmp/                half-made layers and archives (removed on failure)
 *   oci/                skopeo's OCI layout of pulled images (a download cache)
 *   lock                flock()ed by every writer
 *
 * Functions return >= 0 on success and a negative errno with err filled.
 */
#ifndef HUTCH_IMAGE_H
#define HUTCH_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "error.h"

#define HUTCH_IMAGE_DIGEST_LEN 71  /* "sha256:" + 64 hex digits */
#define HUTCH_IMAGE_LAYERS_MAX 128 /* layers of one image */
#define HUTCH_IMAGE_NAME_MAX   200 /* a reference's length */
/* The host ids that own unpacked layers: 65536 ids just below the
 * sandboxes' (runtime/state.h HUTCH_UID_BASE); store id 0 is image root. */
#define HUTCH_IMAGE_STORE_IDS 0x0FFF0000u

/* What a sandbox needs of an image's config (image/oci.c). */
struct hutch_image_config {
	char os[16], arch[16];
	char diff_ids[HUTCH_IMAGE_LAYERS_MAX][HUTCH_IMAGE_DIGEST_LEN + 1];
	size_t n_diff_ids;
	char **env;    /* NULL-terminated NAME=VALUE, or NULL */
	char *workdir; /* or NULL */
};
void hutch_image_config_done(struct hutch_image_config *c);

/* True for "sha256:" and 64 lower-case hex digits. */
bool hutch_image_digest_is_valid(const char *d);
/* True for a reference name hutch can store: [A-Za-z0-9._:/@+-], no "..". */
bool hutch_image_name_is_valid(const char *name);

/* HUTCH_IMAGE_STORE, else root's /var/lib/hutch, else an ordinary user's
 * $XDG_DATA_HOME/hutch or $HOME/.local/share/hutch, written into buf (of
 * size bytes); NULL when an ordinary user has neither variable (absolute). */
const char *hutch_image_store_path(char *buf, size_t size);

struct hutch_image_store;
/* Open (creating it if needed) the store at path; caller frees. An
 * ordinary user's store must be theirs and not writable by others
 * (-EPERM); another user's unreadable store is -EACCES. */
int hutch_image_store_open(const char *path, struct hutch_image_store **ret, struct hutch_err *err);
struct hutch_image_store *hutch_image_store_free(struct hutch_image_store *s);
void hutch_image_store_freep(struct hutch_image_store **s);
/* A store this open made, removed again when nothing went into it (a
 * first import, pull or build that failed): 1 removed, 0 kept (not made
 * by this open, or not empty), -errno. A writer that waited for its lock
 * meanwhile is refused (conflict) and asked to run again. The parents
 * made with it stay. */
int hutch_image_store_unmake(struct hutch_image_store *s);

/* Where the unpacking of one layer is (on_progress). */
struct hutch_image_progress {
	size_t layer, layers; /* this layer (from 1) of the image's; 0 of 0: an archive */
	const char *diff_id;  /* the layer's, or NULL for an archive */
	uint64_t read, size;  /* bytes read of this layer's (compressed) blob, its size */
	uint64_t total_read, total_size; /* the same over every blob this import unpacks */
};

struct hutch_image_import_stats {
	size_t layers, cached; /* cached: already in the store */
	uint64_t bytes;        /* uncompressed bytes unpacked now */
	/* Progress (may be NULL): after each layer, its index (from 1), the
	 * image's number of layers, its diff_id, the bytes unpacked (0 when
	 * it was cached) and whether it was. */
	void (*on_layer)(void *ud, size_t i, size_t n, const char *diff_id, uint64_t bytes,
	                 bool cached);
	/* (may be NULL) As a layer or archive starts to unpack (read 0), then
	 * at most every HUTCH_PROGRESS_INTERVAL_MS (default 100) while it does. */
	void (*on_progress)(void *ud, const struct hutch_image_progress *p);
	void *ud;
	bool quiet; /* pull and build-default: skopeo and mmdebstrap quiet too */
};
/*
 * Import src (an OCI image layout directory, or a docker-save / OCI
 * archive file) as name. tag picks the manifest of a layout by its
 * org.opencontainers.image.ref.name annotation, or NULL for the only (or
 * this platform's) one. Layers already in the store are not unpacked again.
 * Returns 0 and fills stats (may be NULL).
 */
int hutch_image_import(struct hutch_image_store *s, const char *src, const char *tag,
                       const char *name, struct hutch_image_import_stats *stats,
                       struct hutch_err *err);

/* A registry reference hutch passes to skopeo: [a-z0-9] first, then
 * [A-Za-z0-9._:/@-], no "..", at most HUTCH_IMAGE_NAME_MAX. */
bool hutch_image_ref_is_valid(const char *ref);
/* Docker's short names made whole ("python:3" -> docker.io/library/python:3);
 * -EINVAL for an invalid reference, -ENAMETOOLONG. */
int hutch_image_ref_normalize(const char *ref, char *out, size_t outlen);
/* True when ref's registry is localhost, 127.x or [::1]. */
bool hutch_image_ref_is_loopback(const char *ref);
/*
 * Pull ref from its registry with skopeo (its progress lines on stderr)
 * into the store's OCI layout oci/, then import it as name (NULL: ref).
 * -ENOENT when skopeo is missing, -EIO when it failed.
 */
int hutch_image_pull(struct hutch_image_store *s, const char *ref, const char *name,
                     struct hutch_image_import_stats *stats, struct hutch_err *err);

/*
 * An image from a recipe (recipe.h): recipe_path, or NULL for the default
 * image's (image/default.recipe, built in). mmdebstrap makes the base with
 * the packages (from HUTCH_DEBIAN_MIRROR, else this host's Debian sources,
 * else deb.debian.org; its progress on stderr) and runs the recipe's steps
 * in it with the network; the root is wrapped as a one-layer OCI layout
 * and imported as name, its Labels naming the base, the packages and the
 * recipe's sha256 (run.hutch.recipe). -ENOENT when mmdebstrap is missing
 * or the recipe file is; -EINVAL for a bad recipe (err names the line);
 * -EIO when the build failed.
 */
#define HUTCH_IMAGE_DEFAULT_NAME "hutch-default"
int hutch_image_build_default(struct hutch_image_store *s, const char *name,
                              const char *recipe_path, struct hutch_image_import_stats *stats,
                              struct hutch_err *err);

/* skopeo's "skopeo version X" line (doctor); -ENOENT when it is missing. */
int hutch_image_skopeo_version(char *out, size_t outlen, struct hutch_err *err);

/* Every image as a JSON array of {name, config, manifest, layers, size}. */
int hutch_image_list(struct hutch_image_store *s, cJSON **ret, struct hutch_err *err);
/* One image: the list's object plus env and workdir. -ENOENT if unknown. */
int hutch_image_inspect(struct hutch_image_store *s, const char *name, cJSON **ret,
                        struct hutch_err *err);
/* Forget the name; its layers stay until prune. -ENOENT if unknown. */
int hutch_image_remove(struct hutch_image_store *s, const char *name, struct hutch_err *err);
/* Remove layers and blobs no image names, and the download cache oci/;
 * ret_removed counts layers. */
int hutch_image_prune(struct hutch_image_store *s, size_t *ret_removed, struct hutch_err *err);

/* ---- layers.c: what a sandbox mounts (supervisor, before clone3) ---- */

/* The image of one sandbox: its layers as detached mounts, its config. */
struct hutch_image_use {
	char manifest[HUTCH_IMAGE_DIGEST_LEN + 1];
	char config_digest[HUTCH_IMAGE_DIGEST_LEN + 1];
	bool snapshot; /* the image is a filesystem snapshot (commit.c) */
	size_t n_layers;
	int layer_fds[HUTCH_IMAGE_LAYERS_MAX]; /* bottom first; -1 once handed on */
	struct hutch_image_config config;      /* Env, WorkingDir */
	int use_fd;                            /* users/<id>, flock()ed shared while alive */
	int users_dir;                         /* the store's users/ */
	pid_t helper_pid;                      /* the user namespace's process, killed, to reap */
	char *layer_dir; /* rootless: the store's layers/ (layer_fds are O_PATH dirs in it) */
	/* Rootless: the layers' owners indexes (image/owners.c), NUL-ended
	 * paths whose files keep owners in HUTCH_OVERRIDE_STAT_XATTR; NULL
	 * if none. */
	char *owners;
	size_t owners_len;
	char *use_path; /* <store>/users/<id>: in the sandbox's state, for gc and rm */
	char id[32];
};
void hutch_image_use_done(struct hutch_image_use *u);
/* Reap the killed process of the idmapping's user namespace (later than
 * hutch_image_use(), so that its exit is not waited for). */
void hutch_image_use_reap(struct hutch_image_use *u);

/* The manifest digest of the image called name (for the pool key). */
int hutch_image_resolve(struct hutch_image_store *s, const char *name,
                        char ret_manifest[HUTCH_IMAGE_DIGEST_LEN + 1], struct hutch_err *err);

/*
 * For sandbox id with host ids uid_base..+65535: record the use in the
 * store's users/<id> (flock()ed shared until the use is done or the
 * process exits, so that prune keeps its layers), then open each layer of
 * image name as a detached, read-only, nosuid, nodev clone idmapped from
 * the store's ids onto the sandbox's (image root is sandbox root), through
 * a throw-away user namespace (idmap, root only). Without idmap (an
 * ordinary user, whose store's files are the sandbox root's already) each
 * layer is an O_PATH fd of its directory and layer_dir the directory
 * holding them. want_manifest, if not NULL or empty, must be the image's
 * manifest (what the CLI resolved).
 */
int hutch_image_use(struct hutch_image_store *s, const char *name, const char *want_manifest,
                    const char *id, uid_t uid_base, bool idmap, struct hutch_image_use *ret,
                    struct hutch_err *err);
/* Can the file system of path (a directory) give idmapped mounts, and
 * overlayfs take them as layers (doctor)? Root only. Returns which way
 * overlayfs takes them on this kernel: by fd (lowerdir+, Linux 6.13+) or
 * by path (one lowerdir string, Linux 5.19-6.12: at most
 * HUTCH_OVERLAY_PATH_LAYERS layers), or a negative errno. */
enum {
	HUTCH_IMAGE_LAYERS_BY_FD = 0,
	HUTCH_IMAGE_LAYERS_BY_PATH = 1,
};
int hutch_image_probe(const char *path, struct hutch_err *err);
/* Forget the use record (at the sandbox's end; prune also drops stale ones). */
void hutch_image_use_release(struct hutch_image_use *u);
/* Only the use record (its file and lock), once nothing of the sandbox
 * runs: snapshot rm, image rm and prune no longer see the sandbox. */
void hutch_image_use_let_go(struct hutch_image_use *u);

/* ---- snapshots (tarwrite.c, commit.c; docs/snapshots.md) ---- */

/* A directory to put in a layer: the overlay's upper directory (prefix "")
 * or a separate writable mount at prefix ("workspace"), as an open fd. */
struct hutch_image_tar_src {
	int dirfd;
	const char *prefix;
};
struct hutch_image_tar_stats {
	uint64_t entries, bytes; /* tar entries; bytes of file data */
	/* "sha256:<hex>" of every byte written to out: the layer's diff_id
	 * (an uncompressed tar), hashed here so that the unpacker on the
	 * other end of the pipe need not (hutch_image_commit()'s digest). */
	char digest[HUTCH_IMAGE_DIGEST_LEN + 1];
};
/*
 * Write srcs as one uncompressed OCI layer (tar) to out: overlayfs
 * whiteouts and opaque directories in the OCI form, a separate mount's
 * root opaque, host ids id_base..+65535 as 0..65535 (others nobody). The
 * trees must not change meanwhile (the sandbox frozen). ret->digest is set
 * only when the whole stream was written.
 */
int hutch_image_tar_dirs(int out, const struct hutch_image_tar_src *srcs, size_t n, uid_t id_base,
                         struct hutch_image_tar_stats *ret, struct hutch_err *err);

/* Can name be given to a new image? -EEXIST (conflict) if the store has
 * one, -EINVAL (usage) if it is no valid name. */
int hutch_image_name_free(struct hutch_image_store *s, const char *name, struct hutch_err *err);
/* A default name no image or snapshot of the store has: "<stem>-<n>" for
 * the first n after *counter (advanced to it), names taken skipped (the
 * writers' lock held, so it stays free). */
int hutch_image_name_next(struct hutch_image_store *s, const char *stem, unsigned *counter,
                          char *buf, size_t size, struct hutch_err *err);

struct hutch_image_commit_result {
	char diff_id[HUTCH_IMAGE_DIGEST_LEN + 1]; /* the new top layer's */
	uint64_t bytes;                           /* of its tar */
	size_t layers;                            /* of the new image */
	bool cached;                              /* the same layer was in the store */
};
/*
 * A new image name = the layers and config of base (what a live sandbox
 * has: its image's name may since name another) plus the layer read (a
 * tar) from tar_fd on top, unpacked as any imported layer (hostile input; store_unpack()). The
 * reference carries "snapshot": meta (copied) and base_name. Takes
 * the store's lock (take it before, with hutch_image_store_lock(), to
 * hold it across a freeze).
 *
 * digest (may be NULL: the unpacker hashes the stream itself) gives the
 * layer's diff_id once the unpacker has read the stream to its end: that
 * of an uncompressed tar its writer hashed as it wrote it (a snapshot's
 * writer, a process as trusted as this one: hutch_image_tar_stats's
 * digest), so the hash runs beside the unpacker, not in it.
 */
typedef int (*hutch_image_digest_fn)(void *ud, char out[HUTCH_IMAGE_DIGEST_LEN + 1],
                                     struct hutch_err *err);
int hutch_image_commit(struct hutch_image_store *s, const struct hutch_image_use *base,
                       const char *base_name, const char *name, int tar_fd,
                       hutch_image_digest_fn digest, void *digest_ud, const cJSON *meta,
                       const char *const *env, struct hutch_image_commit_result *ret,
                       struct hutch_err *err);
/* env (NULL-terminated "NAME=VALUE", or NULL): set in the new config's Env
 * over the base's, a later entry of a name replacing the earlier (hutch
 * build's env). At most HUTCH_IMAGE_SNAPSHOT_ENV_MAX entries, each
 * hutch_image_env_is_valid(). */
#define HUTCH_IMAGE_SNAPSHOT_ENV_MAX 128
/* NAME=VALUE with a shell's NAME ([A-Za-z_][A-Za-z0-9_]*), no newline, at
 * most 32 KiB. */
bool hutch_image_env_is_valid(const char *entry);
/* The writers' lock of the store, held until it is freed. */
int hutch_image_store_lock(struct hutch_image_store *s, struct hutch_err *err);
/* Is the reference (an element of hutch_image_list()) a snapshot's? */
bool hutch_image_is_snapshot(const cJSON *ref);
/*
 * Full snapshots (fullstore.c): full/NAME of the store, 0700, its files
 * 0600 (they hold memory). _new() checks that name is free (images and
 * full snapshots: -EEXIST, conflict) and makes a private directory in
 * tmp/: its fd, its name in ret_tmp; _publish() makes its contents
 * private and renames it full/NAME (the store locked throughout).
 * _exists(): 1, 0, -errno. _remove(): -ENOENT (not found) if none.
 */
int hutch_image_full_new(struct hutch_image_store *s, const char *name, char ret_tmp[64],
                         struct hutch_err *err);
int hutch_image_full_publish(struct hutch_image_store *s, const char *tmp, const char *name,
                             struct hutch_err *err);
int hutch_image_full_exists(struct hutch_image_store *s, const char *name);
/* full/NAME opened (O_RDONLY directory fd, the caller closes it) with its
 * snapshot.json whole, CRIU's arguments too, in *ret_meta (the caller
 * deletes it); -ENOENT (not found) when there is none. */
int hutch_image_full_open(struct hutch_image_store *s, const char *name, cJSON **ret_meta,
                          struct hutch_err *err);
/* A failed dump's directory of tmp/ removed at once. */
void hutch_image_full_abandon(struct hutch_image_store *s, const char *tmp);
int hutch_image_full_remove(struct hutch_image_store *s, const char *name, struct hutch_err *err);
/* Their snapshot.json (type, source, created, criu, ...; "name"), CRIU's
 * arguments left out: an array of all, or one (-ENOENT, not found). */
int hutch_image_full_list(struct hutch_image_store *s, cJSON **ret, struct hutch_err *err);
int hutch_image_full_inspect(struct hutch_image_store *s, const char *name, cJSON **ret,
                             struct hutch_err *err);
/* Forget snapshot name: -EBUSY (conflict) while a live sandbox's root has
 * its top layer, naming the sandbox; -EINVAL when name is no snapshot. */
int hutch_image_snapshot_remove(struct hutch_image_store *s, const char *name,
                                struct hutch_err *err);

/* ---- rollback in place (rollback.c; docs/snapshots.md) ---- */

/* The upper directory and the layers beyond the shared ones, both sides. */
#define HUTCH_IMAGE_ROLLBACK_GUIDES_MAX (2 * HUTCH_IMAGE_LAYERS_MAX + 2)
#define HUTCH_IMAGE_ROLLBACK_MOUNTS     4

/* What a rollback reads: the snapshot's layers, and where it differs. */
struct hutch_image_rollback_src {
	int target[HUTCH_IMAGE_LAYERS_MAX]; /* the snapshot's layers, top first */
	size_t n_target;
	int guides[HUTCH_IMAGE_ROLLBACK_GUIDES_MAX]; /* layers beyond the shared ones */
	size_t n_guides;
};
/*
 * Open snapshot name's layers for a rollback of a sandbox whose image
 * (cur_name) has the layers of cur: refused (usage) unless one's layers
 * start with all of the other's (a snapshot of this sandbox or of its
 * image's lineage); not found when the store has no such snapshot.
 */
int hutch_image_rollback_open(struct hutch_image_store *s, const char *name,
                              const struct hutch_image_use *cur, const char *cur_name,
                              struct hutch_image_rollback_src *ret, struct hutch_err *err);
void hutch_image_rollback_src_done(struct hutch_image_rollback_src *src);

struct hutch_image_rollback {
	int live;                                      /* the sandbox's root directory */
	uint64_t mnt_ids[HUTCH_IMAGE_ROLLBACK_MOUNTS]; /* the mounts written: root, writable */
	size_t n_mnt;
	const int *target; /* the snapshot's layers, top first */
	size_t n_target;
	const int *guides; /* where the trees can differ: upper dir, layers beyond the shared */
	size_t n_guides;
	const char *const *extra; /* paths visited whatever the guides say ("workspace") */
	size_t n_extra;
	uid_t id_base;       /* store id STORE_IDS+n is the sandbox's host id id_base+n */
	bool keep_owners;    /* an ordinary user's store (no owners): each path keeps the live
	                      * owner, one made takes its directory's */
	uint64_t stop_after; /* test hook: SIGSTOP after this many changes (0: never) */
};
struct hutch_image_rollback_stats {
	uint64_t changes; /* entries made, removed, replaced or given other metadata */
	uint64_t bytes;   /* of file data written */
};
/*
 * Make the live tree rb->live (the sandbox frozen; its writes through its
 * own overlay) the snapshot's at every path that can differ. *ret is set on
 * failure too: changes > 0 then means the tree is part way.
 */
int hutch_image_rollback_tree(const struct hutch_image_rollback *rb,
                              struct hutch_image_rollback_stats *ret, struct hutch_err *err);

#endif
