/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch image pull: a registry image into the store. No registry client of
 * our own: skopeo copies the image into the store's OCI layout oci/ (a
 * download cache whose blobs skopeo reuses, so a second pull fetches only
 * the manifest), picking this machine's platform from a manifest list and
 * checking every digest it downloads; then import.c reads that layout like
 * any other, checking every digest again while it unpacks.
 *
 * A reference reaches skopeo's argv only after a character check (no
 * leading '-', no spaces), as one argument, through execvp() without a
 * shell. Registries on loopback are spoken to without TLS verification,
 * as Docker does by default for 127.0.0.0/8: the tests' registry serves
 * plain HTTP there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "store-internal.h"

bool hutch_image_ref_is_valid(const char *ref)
{
	size_t len = ref ? strlen(ref) : 0;

	if (len == 0 || len > HUTCH_IMAGE_NAME_MAX ||
	    !strchr("abcdefghijklmnopqrstuvwxyz"
	            "0123456789",
	            ref[0]))
		return false;
	for (const char *c = ref; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || strchr("._:/@-", *c)))
			return false;
	return !strstr(ref, "..");
}

/* Docker's short names: "python:3.12" is docker.io/library/python:3.12. */
int hutch_image_ref_normalize(const char *ref, char *out, size_t outlen)
{
	const char *slash = strchr(ref, '/');
	size_t dlen = slash ? (size_t)(slash - ref) : 0;
	bool domain = slash && (memchr(ref, '.', dlen) || memchr(ref, ':', dlen) ||
	                        (dlen == 9 && !strncmp(ref, "localhost", 9)));
	int n;

	if (!hutch_image_ref_is_valid(ref))
		return -EINVAL;
	if (domain)
		n = snprintf(out, outlen, "%s", ref);
	else
		n = snprintf(out, outlen, "docker.io/%s%s", slash ? "" : "library/", ref);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

/* True when the registry (the first component) is on this machine's loopback. */
bool hutch_image_ref_is_loopback(const char *ref)
{
	size_t dlen = strcspn(ref, "/");
	size_t hlen = strcspn(ref, ":/");

	if (hlen > dlen)
		hlen = dlen;
	return (hlen == 9 && !strncmp(ref, "localhost", 9)) || !strncmp(ref, "127.", 4) ||
	       !strncmp(ref, "[::1]", 5);
}

/* The layout's tag for a reference: ref.name allows only a few characters. */
static void layout_tag(const char *ref, char out[40])
{
	struct hutch_sha256 h;
	char d[HUTCH_IMAGE_DIGEST_LEN + 1];

	hutch_sha256_init(&h);
	hutch_sha256_update(&h, ref, strlen(ref));
	hutch_sha256_final(&h, d);
	snprintf(out, 40, "pull-%.32s", d + 7);
}

static int run_skopeo(const char *const *argv, const char *src, char *out, size_t outlen,
                      struct hutch_err *err);

int hutch_image_skopeo_version(char *out, size_t outlen, struct hutch_err *err)
{
	static const char *const argv[] = { "skopeo", "--version", NULL };
	int r = run_skopeo(argv, "docker://skopeo", out, outlen, err);

	if (r >= 0)
		out[strcspn(out, "\n")] = '\0';
	return r;
}

/*
 * Run skopeo with argv, about src; its stdout into out (outlen bytes,
 * NUL-ended) when out is given, else onto our stderr with its progress.
 */
static int run_skopeo(const char *const *argv, const char *src, char *out, size_t outlen,
                      struct hutch_err *err)
{
	int pipefd[2] = { -EBADF, -EBADF }, status;
	pid_t pid, parent = getpid();
	ssize_t n;

	if (out && pipe2(pipefd, O_CLOEXEC) < 0)
		return hutch_err_set_errno(err, -errno, "pull: pipe");

	pid = fork();
	if (pid < 0) {
		hutch_close_many(pipefd, 2);
		return hutch_err_set_errno(err, -errno, "pull: fork");
	}
	if (pid == 0) {
		/* skopeo writes into the store only while we hold its lock: it
		 * dies with us (a killed pull leaves no writer behind). */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(126);
		(void)dup2(out ? pipefd[1] : 2, 1); /* lint-fds: ok: child stdio */
		execvp(argv[0], (char *const *)argv);
		_exit(errno == ENOENT ? 127 : 126);
	}
	if (out) {
		closep(&pipefd[1]);
		n = hutch_read_all(pipefd[0], out, outlen - 1);
		out[n > 0 ? n : 0] = '\0';
		closep(&pipefd[0]);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return hutch_err_set_errno(err, -errno, "pull: wait for skopeo");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return hutch_err_set_class(err, HUTCH_ERRC_NOT_CAPABLE, -ENOENT,
		                           "pull needs skopeo (Debian: apt-get install "
		                           "skopeo)");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return hutch_err_set(err, -EIO, "skopeo could not %s '%s' (its message is above)",
		                     argv[1], src + strlen("docker://"));
	return 0;
}

/*
 * The digest of the manifest a pull would fetch (this platform's, out of
 * a manifest list): skopeo inspect reads only manifests, no layer.
 */
static int remote_digest(const char *src, bool loopback, char digest[HUTCH_IMAGE_DIGEST_LEN + 1],
                         struct hutch_err *err)
{
	const char *argv[] = { "skopeo",
		               "inspect",
		               "--retry-times",
		               "2",
		               loopback ? "--tls-verify=false" : "--tls-verify=true",
		               "--format",
		               "{{.Digest}}",
		               src,
		               NULL };
	char out[128];
	int r;

	r = run_skopeo(argv, src, out, sizeof(out), err);
	if (r < 0)
		return r;
	out[strcspn(out, "\n")] = '\0';
	if (!hutch_image_digest_is_valid(out))
		return hutch_err_set(err, -EIO, "skopeo gave no digest for '%s'",
		                     src + strlen("docker://"));
	memcpy(digest, out, HUTCH_IMAGE_DIGEST_LEN + 1);
	return 0;
}

/* The repository part of a whole reference: no ":tag", no "@digest". */
static size_t repo_len(const char *full)
{
	size_t len = strcspn(full, "@");
	const char *slash = memrchr(full, '/', len);
	const char *colon = slash ? memchr(slash, ':', len - (size_t)(slash - full)) : NULL;

	return colon ? (size_t)(colon - full) : len;
}

/*
 * What a killed skopeo left in the download cache: the blob it was writing
 * (oci-put-blob*, in the layout's root until it is whole and renamed into
 * blobs/). Whole blobs stay, and the next copy reuses them: an interrupted
 * pull downloads again only what it had not finished. Called with the
 * store's lock held, so no skopeo of ours is writing.
 */
static void clean_partial(struct hutch_image_store *s)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd = openat(s->dirfd, "oci", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			(void)close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "oci-put-blob", 12))
			(void)unlinkat(dirfd(d), de->d_name, 0);
}

/* skopeo copy of src (by digest) into the store's layout as tag. */
static int copy(struct hutch_image_store *s, const char *src, const char *tag, bool loopback,
                bool quiet, struct hutch_err *err)
{
	_cleanup_free_ char *dst = NULL;
	const char *argv[] = { "skopeo",
		               "copy",
		               "--retry-times",
		               "2",
		               loopback ? "--src-tls-verify=false" : "--src-tls-verify=true",
		               src,
		               NULL,
		               quiet ? "--quiet" : NULL,
		               NULL };

	if (asprintf(&dst, "oci:%s/oci:%s", s->path, tag) < 0)
		return hutch_err_set(err, -ENOMEM, "pull");
	argv[6] = dst;
	clean_partial(s);
	return run_skopeo(argv, src, NULL, 0, err);
}

int hutch_image_pull(struct hutch_image_store *s, const char *ref, const char *name,
                     struct hutch_image_import_stats *stats, struct hutch_err *err)
{
	char full[HUTCH_IMAGE_NAME_MAX + 32], src[HUTCH_IMAGE_NAME_MAX + 128], tag[40];
	char digest[HUTCH_IMAGE_DIGEST_LEN + 1];
	_cleanup_free_ char *layout = NULL;
	bool loopback;
	int r;

	if (hutch_image_ref_normalize(ref, full, sizeof(full)) < 0)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid image reference '%.*s'", HUTCH_IMAGE_NAME_MAX,
		                           ref);
	loopback = hutch_image_ref_is_loopback(full);
	r = store_lock(s, err);
	if (r < 0)
		return r;
	snprintf(src, sizeof(src), "docker://%s", full);
	r = remote_digest(src, loopback, digest, err);
	if (r < 0)
		return r;
	/* A cache hit: an image of the store has this very manifest. */
	r = store_ref_copy_by_manifest(s, digest, name ? name : ref, err);
	if (r > 0 && stats)
		*stats = (struct hutch_image_import_stats){ .layers = (size_t)r,
			                                    .cached = (size_t)r };
	if (r != 0)
		return r < 0 ? r : 0;
	/* By digest: what skopeo copies is what was just looked up. */
	snprintf(src, sizeof(src), "docker://%.*s@%s", (int)repo_len(full), full, digest);
	layout_tag(full, tag);
	r = copy(s, src, tag, loopback, stats && stats->quiet, err);
	if (r < 0)
		return r;
	if (asprintf(&layout, "%s/oci", s->path) < 0)
		return hutch_err_set(err, -ENOMEM, "pull");
	r = hutch_image_import(s, layout, tag, name ? name : ref, stats, err);
	if (r == -EBADMSG) {
		/* A blob of the cache is not what its name says (skopeo reuses
		 * what it finds there): start the next pull afresh. */
		(void)hutch_rm_rf_at(s->dirfd, "oci");
		(void)hutch_err_prefix(err,
		                       "download cache removed (the next pull downloads anew)");
	}
	return r;
}
