/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch image build-default: the default image, built on this machine from
 * Debian packages (no registry): mmdebstrap writes a root file system as
 * one tar, which is wrapped as a one-layer OCI image layout and imported
 * like any other (digests checked, unpacked in the store's user
 * namespace). mmdebstrap is Debian's tool for exactly this (what the
 * Debian docker images are made with), so nothing of debootstrap's or
 * apt's work is written here; the OCI wrapping is three small JSON
 * documents.
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
#include "store-internal.h"

#if defined(__x86_64__)
#define ARCH "amd64"
#elif defined(__aarch64__)
#define ARCH "arm64"
#else
#define ARCH "unknown"
#endif

#define TAR_MEDIA    "application/vnd.oci.image.layer.v1.tar"
#define CONFIG_MEDIA "application/vnd.oci.image.config.v1+json"
#define MANIF_MEDIA  "application/vnd.oci.image.manifest.v1+json"

/* Run argv (the tool's progress on our stderr); -ENOENT when the tool is
 * missing, -EIO when it failed. */
static int run_tool(const char *const *argv, struct hutch_err *err)
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
static const char *mirror(void)
{
	const char *m = getenv("HUTCH_DEBIAN_MIRROR");
	static const char *const host[] = { "/etc/apt/sources.list.d/debian.sources",
		                            "/etc/apt/sources.list" };

	if (m && *m)
		return m;
	for (size_t i = 0; i < ELEMENTSOF(host); i++) {
		_cleanup_free_ char *text = NULL;
		if (hutch_read_file_alloc_at(AT_FDCWD, host[i], 1 << 20, &text) >= 0 &&
		    strstr(text, HUTCH_IMAGE_DEFAULT_SUITE) && strstr(text, "debian"))
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

static cJSON *image_config(const char *diff_id)
{
	cJSON *c = cJSON_CreateObject(), *cfg, *env, *fs;

	cJSON_AddStringToObject(c, "architecture", ARCH);
	cJSON_AddStringToObject(c, "os", "linux");
	cfg = cJSON_AddObjectToObject(c, "config");
	env = cJSON_AddArrayToObject(cfg, "Env");
	cJSON_AddItemToArray(env, cJSON_CreateString("PATH=/usr/local/sbin:/usr/local/bin:"
	                                             "/usr/sbin:/usr/bin:/sbin:/bin"));
	cJSON_AddItemToArray(env, cJSON_CreateString("LANG=C.UTF-8"));
	cJSON_AddStringToObject(cfg, "WorkingDir", "/workspace");
	cJSON_AddItemToObject(cfg, "Labels", cJSON_CreateObject());
	cJSON_AddStringToObject(cJSON_GetObjectItem(cfg, "Labels"), "run.hutch.packages",
	                        HUTCH_IMAGE_DEFAULT_PACKAGES);
	fs = cJSON_AddObjectToObject(c, "rootfs");
	cJSON_AddStringToObject(fs, "type", "layers");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(fs, "diff_ids"), cJSON_CreateString(diff_id));
	return c;
}

/* The layout around tmp/<dir>/blobs/sha256/rootfs.tar: the tar renamed to
 * its digest, a config, a manifest, index.json and oci-layout. */
static int wrap_layout(int dirfd, struct hutch_err *err)
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
	config = image_config(tar); /* uncompressed: its diff_id is its digest */
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

int hutch_image_build_default(struct hutch_image_store *s, const char *name,
                              struct hutch_image_import_stats *stats, struct hutch_err *err)
{
	_cleanup_free_ char *dir = NULL, *tar = NULL;
	_cleanup_close_ int dirfd = -EBADF;
	const char *argv[] = { "mmdebstrap", "--variant=apt",
		               "--include=" HUTCH_IMAGE_DEFAULT_PACKAGES,
		               /* pip and venv for appuser as in the cloud's image:
		                * no PEP 668 "externally-managed-environment". */
		               "--customize-hook=rm -f \"$1\"/usr/lib/python3*/EXTERNALLY-MANAGED",
		               "--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/* "
		               "\"$1\"/var/cache/apt/*.bin",
		               HUTCH_IMAGE_DEFAULT_SUITE, NULL, mirror(), NULL, NULL };
	int r;

	if (!hutch_image_name_is_valid(name))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid image name '%s'", name);
	if ((r = store_lock(s, err)) < 0)
		return r;
	if (asprintf(&dir, "%s/tmp/build-default-XXXXXX", s->path) < 0 || !mkdtemp(dir))
		return hutch_err_set_errno(err, -errno, "make a directory in '%s/tmp'", s->path);
	dirfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (dirfd < 0 || mkdirat(dirfd, "blobs", 0755) < 0 ||
	    mkdirat(dirfd, "blobs/sha256", 0755) < 0) {
		r = hutch_err_set_errno(err, -errno, "make the layout in '%s'", dir);
		goto out;
	}
	if (asprintf(&tar, "%s/blobs/sha256/rootfs.tar", dir) < 0) {
		r = hutch_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	argv[6] = tar;
	if (stats && stats->quiet) /* after the mirror, or in its place */
		argv[argv[7] ? 8 : 7] = "--quiet";
	r = run_tool(argv, err);
	if (r >= 0)
		r = wrap_layout(dirfd, err);
	if (r >= 0)
		r = hutch_image_import(s, dir, NULL, name, stats, err);
out:
	(void)hutch_rm_rf_at(AT_FDCWD, dir);
	return r;
}
