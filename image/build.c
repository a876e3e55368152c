/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch image build-default: an image built on this machine from a recipe
 * (recipe.c; the default image's, image/default.recipe, is built in):
 * mmdebstrap makes the recipe's Debian base with its packages, runs the
 * recipe's steps in that root (a chroot of mmdebstrap's, with the
 * network: they fetch from the npm registry) and writes it as one tar,
 * which is wrapped as a one-layer OCI image layout and imported like any
 * other (digests checked, unpacked in the store's user namespace).
 * mmdebstrap is Debian's tool for exactly this (what the Debian docker
 * images are made with), so nothing of debootstrap's or apt's work is
 * written here; the OCI wrapping is three small JSON documents.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "recipe.h"
#include "store-internal.h"

#if defined(__x86_64__)
#define ARCH "amd64"
#elif defined(__aarch64__)
#define ARCH "arm64"
#else
#define ARCH "unknown"
#endif

#define HOST_CA "/etc/ssl/certs/ca-certificates.crt"

/* The recipe's steps: its script and the host's CA bundle copied in, run
 * in the root, both removed whatever the outcome. */
#define STEPS_HOOK                                                                                 \
	"--customize-hook=cp \"$HUTCH_RECIPE_SCRIPT\" \"$1/tmp/hutch-recipe.sh\" && "              \
	"{ [ -z \"$HUTCH_BUILD_CA\" ] || cp \"$HUTCH_BUILD_CA\" \"$1/tmp/hutch-build-ca.crt\"; } " \
	"&& chroot \"$1\" /bin/sh /tmp/hutch-recipe.sh; rc=$?; "                                   \
	"rm -f \"$1/tmp/hutch-recipe.sh\" \"$1/tmp/hutch-build-ca.crt\"; exit $rc"

#define TAR_MEDIA    "application/vnd.oci.image.layer.v1.tar"
#define CONFIG_MEDIA "application/vnd.oci.image.config.v1+json"
#define MANIF_MEDIA  "application/vnd.oci.image.manifest.v1+json"

/* Run argv (the tool's progress on our stderr), with the recipe's script
 * at $HUTCH_RECIPE_SCRIPT; -ENOENT when the tool is missing, -EIO when it
 * failed. */
static int run_tool(const char *const *argv, const char *script, struct hutch_err *err)
{
	pid_t parent = getpid(), pid = fork();
	int status;

	if (pid < 0)
		return hutch_err_set_errno(err, -errno, "fork");
	if (pid == 0) {
		/* It writes into the store's tmp/ only while we hold the lock:
		 * it ends with us (SIGTERM: mmdebstrap removes its own temporary
		 * root then). */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
			_exit(126);
		(void)dup2(2, 1); /* lint-fds: ok: child stdio; its output is progress */
		/* The steps trust what this host trusts (a TLS proxy's CA on a
		 * CI runner): its bundle is copied in for the build only. */
		if (setenv("HUTCH_RECIPE_SCRIPT", script, 1) < 0 ||
		    setenv("HUTCH_BUILD_CA", access(HOST_CA, R_OK) ? "" : HOST_CA, 1) < 0)
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(errno == ENOENT ? 127 : 126);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return hutch_err_set_errno(err, -errno, "wait for %s", argv[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -ENOENT,
		                           "build-default needs %s (Debian: apt-get install %s)",
		                           argv[0], argv[0]);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return hutch_err_set(err, -EIO, "%s failed (its messages are above)", argv[0]);
	return 0;
}

/* Where the packages come from: HUTCH_DEBIAN_MIRROR (a mirror URL or an
 * apt sources file), else this host's own Debian sources file (its
 * mirror, proxy or snapshot), else NULL: mmdebstrap's deb.debian.org. */
static const char *mirror(const char *suite)
{
	const char *m = getenv("HUTCH_DEBIAN_MIRROR");
	static const char *const host[] = { "/etc/apt/sources.list.d/debian.sources",
		                            "/etc/apt/sources.list" };

	if (m && *m)
		return m;
	for (size_t i = 0; i < ELEMENTSOF(host); i++) {
		_cleanup_free_ char *text = NULL;
		if (hutch_read_file_alloc_at(AT_FDCWD, host[i], 1 << 20, &text) >= 0 &&
		    strstr(text, suite) && strstr(text, "debian"))
			return host[i];
	}
	return NULL;
}

/* sha256 of the file at dirfd/name and its size. */
static int digest_file(int dirfd, const char *name, char out[HUTCH_IMAGE_DIGEST_LEN + 1],
                       uint64_t *size, struct hutch_err *err)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	static char buf[1 << 20];
	struct hutch_sha256 h;
	ssize_t n;

	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "open %s", name);
	hutch_sha256_init(&h);
	*size = 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		hutch_sha256_update(&h, buf, (size_t)n);
		*size += (uint64_t)n;
	}
	if (n < 0)
		return hutch_err_set_errno(err, -errno, "read %s", name);
	hutch_sha256_final(&h, out);
	return 0;
}

/* Write j as the blob blobs/sha256/<digest> of the layout; fills its
 * digest and size. */
static int write_blob(int blobs, const cJSON *j, char digest[HUTCH_IMAGE_DIGEST_LEN + 1],
                      size_t *size, struct hutch_err *err)
{
	_cleanup_free_ char *text = cJSON_PrintUnformatted(j);
	struct hutch_sha256 h;
	int r;

	if (!text)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	*size = strlen(text);
	hutch_sha256_init(&h);
	hutch_sha256_update(&h, text, *size);
	hutch_sha256_final(&h, digest);
	r = hutch_write_file_at(blobs, digest + strlen("sha256:"), text, 0644);
	return r < 0 ? hutch_err_set_errno(err, r, "write a blob") : 0;
}

static cJSON *descriptor(const char *media, const char *digest, double size)
{
	cJSON *d = cJSON_CreateObject();

	cJSON_AddStringToObject(d, "mediaType", media);
	cJSON_AddStringToObject(d, "digest", digest);
	cJSON_AddNumberToObject(d, "size", size);
	return d;
}

/* The environment: PATH and LANG, then the recipe's (a later NAME wins). */
static void add_env(cJSON *env, const struct hutch_recipe *rc)
{
	const char *base[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		               "LANG=C.UTF-8" };
	cJSON *it, *next;

	for (size_t i = 0; i < ELEMENTSOF(base) + rc->nenv; i++) {
		const char *e = i < ELEMENTSOF(base) ? base[i] : rc->env[i - ELEMENTSOF(base)];
		size_t n = strcspn(e, "=") + 1;
		for (it = env->child; it; it = next) {
			next = it->next;
			if (!strncmp(it->valuestring, e, n))
				cJSON_Delete(cJSON_DetachItemViaPointer(env, it));
		}
		cJSON_AddItemToArray(env, cJSON_CreateString(e));
	}
}

static cJSON *image_config(const char *diff_id, const struct hutch_recipe *rc,
                           const char *recipe_digest)
{
	cJSON *c = cJSON_CreateObject(), *cfg, *fs, *labels;

	cJSON_AddStringToObject(c, "architecture", ARCH);
	cJSON_AddStringToObject(c, "os", "linux");
	cfg = cJSON_AddObjectToObject(c, "config");
	add_env(cJSON_AddArrayToObject(cfg, "Env"), rc);
	cJSON_AddStringToObject(cfg, "WorkingDir", "/workspace");
	labels = cJSON_AddObjectToObject(cfg, "Labels");
	cJSON_AddStringToObject(labels, "run.hutch.base", rc->suite);
	cJSON_AddStringToObject(labels, "run.hutch.packages", rc->packages);
	/* what it was built from: the recipe's sha256 */
	cJSON_AddStringToObject(labels, "run.hutch.recipe", recipe_digest);
	fs = cJSON_AddObjectToObject(c, "rootfs");
	cJSON_AddStringToObject(fs, "type", "layers");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(fs, "diff_ids"), cJSON_CreateString(diff_id));
	return c;
}

/* The layout around tmp/<dir>/blobs/sha256/rootfs.tar: the tar renamed to
 * its digest, a config, a manifest, index.json and oci-layout. */
static int wrap_layout(int dirfd, const struct hutch_recipe *rc, const char *recipe_digest,
                       struct hutch_err *err)
{
	_cleanup_close_ int blobs = -EBADF;
	_cleanup_cjson_ cJSON *config = NULL, *manifest = NULL, *index = NULL;
	char tar[HUTCH_IMAGE_DIGEST_LEN + 1], cfg[HUTCH_IMAGE_DIGEST_LEN + 1];
	char man[HUTCH_IMAGE_DIGEST_LEN + 1];
	size_t cfg_size, man_size;
	uint64_t tar_size = 0;
	cJSON *m;
	int r;

	blobs = openat(dirfd, "blobs/sha256", O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (blobs < 0)
		return hutch_err_set_errno(err, -errno, "open the layout's blobs");
	if ((r = digest_file(blobs, "rootfs.tar", tar, &tar_size, err)) < 0)
		return r;
	if (renameat(blobs, "rootfs.tar", blobs, tar + strlen("sha256:")) < 0)
		return hutch_err_set_errno(err, -errno, "rename the root tar");
	/* uncompressed: its diff_id is its digest */
	config = image_config(tar, rc, recipe_digest);
	if ((r = write_blob(blobs, config, cfg, &cfg_size, err)) < 0)
		return r;
	manifest = cJSON_CreateObject();
	cJSON_AddNumberToObject(manifest, "schemaVersion", 2);
	cJSON_AddStringToObject(manifest, "mediaType", MANIF_MEDIA);
	cJSON_AddItemToObject(manifest, "config", descriptor(CONFIG_MEDIA, cfg, (double)cfg_size));
	cJSON_AddItemToArray(cJSON_AddArrayToObject(manifest, "layers"),
	                     descriptor(TAR_MEDIA, tar, (double)tar_size));
	if ((r = write_blob(blobs, manifest, man, &man_size, err)) < 0)
		return r;
	index = cJSON_CreateObject();
	cJSON_AddNumberToObject(index, "schemaVersion", 2);
	m = descriptor(MANIF_MEDIA, man, (double)man_size);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(index, "manifests"), m);
	{
		_cleanup_free_ char *text = cJSON_PrintUnformatted(index);
		static const char layout[] = "{\"imageLayoutVersion\": \"1.0.0\"}";
		if (!text)
			return hutch_err_set(err, -ENOMEM, "out of memory");
		if ((r = hutch_write_file_at(dirfd, "index.json", text, 0644)) < 0 ||
		    (r = hutch_write_file_at(dirfd, "oci-layout", layout, 0644)) < 0)
			return hutch_err_set_errno(err, r, "write the layout");
	}
	return 0;
}

/* The recipe's text: the file at path, or the built-in default. */
static int recipe_text(const char *path, char **ret, struct hutch_err *err)
{
	int r;

	if (!path) {
		*ret = strdup(hutch_image_default_recipe);
		return *ret ? 0 : hutch_err_set(err, -ENOMEM, "out of memory");
	}
	r = hutch_read_file_alloc_at(AT_FDCWD, path, HUTCH_RECIPE_MAX + 1, ret);
	if (r < 0) {
		/* the caller's file: a missing or unreadable one is usage */
		hutch_err_set_errno(err, r, "read the recipe '%s'", path);
		err->cls = HUTCH_ERRC_USAGE;
		return r;
	}
	return 0;
}

/* mmdebstrap's command line: base and packages, the steps as one
 * customize hook (the script copied in, run in the root, removed). */
static int build_root(const struct hutch_recipe *rc, const char *dir, bool quiet,
                      struct hutch_err *err)
{
	_cleanup_free_ char *include = NULL, *tar = NULL, *script = NULL, *path = NULL;
	const char *argv[10];
	size_t n = 0;
	int r;

	script = hutch_recipe_script(rc);
	if (!script || asprintf(&include, "--include=%s", rc->packages) < 0 ||
	    asprintf(&tar, "%s/blobs/sha256/rootfs.tar", dir) < 0 ||
	    asprintf(&path, "%s/recipe.sh", dir) < 0)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	if ((r = hutch_write_file_at(AT_FDCWD, path, script, 0644)) < 0)
		return hutch_err_set_errno(err, r, "write the recipe's script");
	argv[n++] = "mmdebstrap";
	argv[n++] = "--variant=apt";
	argv[n++] = include;
	argv[n++] = STEPS_HOOK;
	argv[n++] = rc->suite;
	argv[n++] = tar;
	if (mirror(rc->suite))
		argv[n++] = mirror(rc->suite);
	if (quiet)
		argv[n++] = "--quiet";
	argv[n] = NULL;
	return run_tool(argv, path, err);
}

int hutch_image_build_default(struct hutch_image_store *s, const char *name,
                              const char *recipe_path, struct hutch_image_import_stats *stats,
                              struct hutch_err *err)
{
	_cleanup_free_ char *dir = NULL, *text = NULL;
	_cleanup_close_ int dirfd = -EBADF;
	struct hutch_recipe rc = { 0 };
	char digest[HUTCH_IMAGE_DIGEST_LEN + 1];
	struct hutch_sha256 h;
	int r;

	if (!hutch_image_name_is_valid(name))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid image name '%s'", name);
	if ((r = recipe_text(recipe_path, &text, err)) < 0)
		return r;
	if ((r = hutch_recipe_parse(text, strlen(text), &rc, err)) < 0)
		return hutch_err_prefix(err, "recipe '%s'",
		                        recipe_path ? recipe_path : "image/default.recipe");
	hutch_sha256_init(&h);
	hutch_sha256_update(&h, text, strlen(text));
	hutch_sha256_final(&h, digest);
	if ((r = store_lock(s, err)) < 0)
		goto out;
	if (asprintf(&dir, "%s/tmp/build-default-XXXXXX", s->path) < 0 || !mkdtemp(dir)) {
		r = hutch_err_set_errno(err, -errno, "make a directory in '%s/tmp'", s->path);
		free(dir);
		dir = NULL;
		goto out;
	}
	dirfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (dirfd < 0 || mkdirat(dirfd, "blobs", 0755) < 0 ||
	    mkdirat(dirfd, "blobs/sha256", 0755) < 0) {
		r = hutch_err_set_errno(err, -errno, "make the layout in '%s'", dir);
		goto out;
	}
	r = build_root(&rc, dir, stats && stats->quiet, err);
	if (r >= 0)
		(void)unlinkat(dirfd, "recipe.sh", 0);
	if (r >= 0)
		r = wrap_layout(dirfd, &rc, digest, err);
	if (r >= 0)
		r = hutch_image_import(s, dir, NULL, name, stats, err);
out:
	if (dir)
		(void)hutch_rm_rf_at(AT_FDCWD, dir);
	hutch_recipe_done(&rc);
	return r;
}
