/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the image library: digests, names, the clean form of tar
 * paths, the OCI JSON parsers, and the unpacker itself on tars written
 * here with libarchive (in process, without the user namespace the store
 * adds, so the path checks alone are what keeps each attack inside). The
 * CLI-level import and the full set of crafted layers are in
 * tests/integration/test_image.py.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <cmocka.h>

#include "buildspec.h"
#include "cleanup.h"
#include "fdutil.h"
#include "image-internal.h"
#include "image.h"
#include "recipe.h"

#define H1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define H2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"

static void test_sha256(void **state)
{
	struct hutch_sha256 h;
	char out[HUTCH_IMAGE_DIGEST_LEN + 1];

	hutch_sha256_init(&h);
	hutch_sha256_update(&h, "abc", 3);
	hutch_sha256_final(&h, out);
	assert_string_equal(
	        out, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_true(hutch_image_digest_is_valid(out));
	assert_false(hutch_image_digest_is_valid("sha256:ABC"));
	assert_false(hutch_image_digest_is_valid(
	        "sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
	assert_false(hutch_image_digest_is_valid(
	        "sha256:BA7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
	assert_false(hutch_image_digest_is_valid(NULL));
}

static void test_names(void **state)
{
	assert_true(hutch_image_name_is_valid("docker.io/library/python:3.12-bookworm"));
	assert_true(hutch_image_name_is_valid("localhost:5000/x@sha256:abc"));
	assert_false(hutch_image_name_is_valid(""));
	assert_false(hutch_image_name_is_valid("../x"));
	assert_false(hutch_image_name_is_valid("a/../b"));
	assert_false(hutch_image_name_is_valid(".x"));
	assert_false(hutch_image_name_is_valid("/x"));
	assert_false(hutch_image_name_is_valid("a b"));
	assert_false(hutch_image_name_is_valid("a%b"));
}

static void test_refs(void **state)
{
	char out[256];

	assert_true(hutch_image_ref_is_valid("docker.io/library/python:3.12-bookworm"));
	assert_false(hutch_image_ref_is_valid("-x"));
	assert_false(hutch_image_ref_is_valid("--src-creds=a:b"));
	assert_false(hutch_image_ref_is_valid("a b"));
	assert_false(hutch_image_ref_is_valid("a/../b"));
	assert_int_equal(hutch_image_ref_normalize("python:3.12", out, sizeof(out)), 0);
	assert_string_equal(out, "docker.io/library/python:3.12");
	assert_int_equal(hutch_image_ref_normalize("me/tool", out, sizeof(out)), 0);
	assert_string_equal(out, "docker.io/me/tool");
	assert_int_equal(hutch_image_ref_normalize("localhost/x:1", out, sizeof(out)), 0);
	assert_string_equal(out, "localhost/x:1");
	assert_int_equal(hutch_image_ref_normalize("127.0.0.1:5000/x", out, sizeof(out)), 0);
	assert_string_equal(out, "127.0.0.1:5000/x");
	assert_int_equal(hutch_image_ref_normalize("-x", out, sizeof(out)), -EINVAL);
	assert_true(hutch_image_ref_is_loopback("127.0.0.1:5000/x"));
	assert_true(hutch_image_ref_is_loopback("localhost:5000/x"));
	assert_false(hutch_image_ref_is_loopback("localhost.example.com/x"));
	assert_false(hutch_image_ref_is_loopback("docker.io/library/127.0.0.1"));
}

static void test_clean_path(void **state)
{
	char out[64];

	assert_int_equal(hutch_image_clean_path("./usr//bin/./sh", out, sizeof(out)), 0);
	assert_string_equal(out, "usr/bin/sh");
	assert_int_equal(hutch_image_clean_path("etc/", out, sizeof(out)), 0);
	assert_string_equal(out, "etc");
	assert_int_equal(hutch_image_clean_path("a..b/..c", out, sizeof(out)), 0);
	assert_int_equal(hutch_image_clean_path("./", out, sizeof(out)), -ENOENT);
	assert_int_equal(hutch_image_clean_path("/etc/passwd", out, sizeof(out)), -EINVAL);
	assert_int_equal(hutch_image_clean_path("../x", out, sizeof(out)), -EINVAL);
	assert_int_equal(hutch_image_clean_path("a/../../x", out, sizeof(out)), -EINVAL);
	assert_int_equal(hutch_image_clean_path("a/..", out, sizeof(out)), -EINVAL);
	assert_int_equal(
	        hutch_image_clean_path("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/"
	                               "bbbbbbbbbbbbbbbbbbbbbbb",
	                               out, sizeof(out)),
	        -ENAMETOOLONG);
}

static void test_index(void **state)
{
	static const char idx[] =
	        "{\"manifests\":["
	        "{\"digest\":\"" H1
	        "\",\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
	        "{\"digest\":\"" H2 "\",\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"},"
	        "\"annotations\":{\"org.opencontainers.image.ref.name\":\"v1\"}}]}";
	struct hutch_err err = { 0 };
	char d[HUTCH_IMAGE_DIGEST_LEN + 1];
	bool nested = true;

	assert_int_equal(
	        hutch_image_parse_index(idx, strlen(idx), NULL, "linux", "amd64", d, &nested, &err),
	        0);
	assert_string_equal(d, H2);
	assert_false(nested);
	assert_int_equal(
	        hutch_image_parse_index(idx, strlen(idx), "v1", "linux", "x", d, &nested, &err), 0);
	assert_string_equal(d, H2);
	assert_int_equal(hutch_image_parse_index(idx, strlen(idx), NULL, "linux", "riscv64", d,
	                                         &nested, &err),
	                 -ENOENT);
	assert_non_null(strstr(err.msg, "linux/riscv64"));
	assert_int_equal(hutch_image_parse_index("{", 1, NULL, "linux", "amd64", d, &nested, &err),
	                 -EINVAL);
}

static void test_manifest_and_config(void **state)
{
	static const char man[] = "{\"config\":{\"digest\":\"" H1 "\"},\"layers\":["
	                          "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
	                          "\"digest\":\"" H2 "\"}]}";
	static const char foreign[] =
	        "{\"config\":{\"digest\":\"" H1 "\"},\"layers\":[{\"mediaType\":"
	        "\"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip\",\"digest\":\"" H2
	        "\"}]}";
	static const char cfg[] = "{\"os\":\"linux\",\"architecture\":\"amd64\",\"config\":"
	                          "{\"Env\":[\"PATH=/x\",\"A=\"],\"WorkingDir\":\"/w\"},"
	                          "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" H1 "\"]}}";
	static const char badenv[] = "{\"config\":{\"Env\":[\"NOEQUALS\"]},"
	                             "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";
	struct hutch_image_manifest *m = calloc(1, sizeof(*m));
	struct hutch_image_config c = { 0 };
	struct hutch_err err = { 0 };

	assert_non_null(m);
	assert_int_equal(hutch_image_parse_manifest(man, strlen(man), m, &err), 0);
	assert_string_equal(m->config, H1);
	assert_int_equal(m->n_layers, 1);
	assert_string_equal(m->layers[0], H2);
	assert_int_equal(hutch_image_parse_manifest(foreign, strlen(foreign), m, &err),
	                 -EMEDIUMTYPE);
	free(m);
	assert_int_equal(hutch_image_parse_config(cfg, strlen(cfg), &c, &err), 0);
	assert_string_equal(c.env[0], "PATH=/x");
	assert_string_equal(c.env[1], "A=");
	assert_null(c.env[2]);
	assert_string_equal(c.workdir, "/w");
	assert_int_equal(c.n_diff_ids, 1);
	hutch_image_config_done(&c);
	assert_int_equal(hutch_image_parse_config(badenv, strlen(badenv), &c, &err), -EINVAL);
}

/* ---- the unpacker on tars written here ---- */

struct member {
	const char *path;
	mode_t type, mode;
	const char *data;     /* regular file content, under 512 bytes */
	const char *link;     /* symlink target */
	const char *hardlink; /* hard link target */
};

/* One ustar header block (names under 100 bytes). */
static void ustar_header(char h[512], const struct member *m, size_t size)
{
	unsigned sum = 0;

	memset(h, 0, 512);
	snprintf(h, 100, "%s", m->path);
	snprintf(h + 100, 8, "%07o", (unsigned)m->mode);
	snprintf(h + 108, 8, "%07o", 0u);
	snprintf(h + 116, 8, "%07o", 0u);
	snprintf(h + 124, 12, "%011o", (unsigned)size);
	snprintf(h + 136, 12, "%011o", 1700000000u);
	h[156] = m->hardlink           ? '1'
	         : m->type == AE_IFLNK ? '2'
	         : m->type == AE_IFCHR ? '3'
	         : m->type == AE_IFDIR ? '5'
	                               : '0';
	snprintf(h + 157, 100, "%s", m->hardlink ? m->hardlink : m->link ? m->link : "");
	memcpy(h + 257,
	       "ustar\0"
	       "00",
	       8);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
}

/* A tar of members in a memfd, rewound: written here, byte by byte, so a
 * member can say what no well-behaved writer would. */
static int make_tar(const struct member *ms, size_t n)
{
	int fd = memfd_create("layer", MFD_CLOEXEC);
	char block[512];

	assert_true(fd >= 0);
	for (size_t i = 0; i < n; i++) {
		size_t len = ms[i].data ? strlen(ms[i].data) : 0;

		ustar_header(block, &ms[i], len);
		assert_int_equal(hutch_write_all(fd, block, 512), 0);
		memset(block, 0, sizeof(block));
		memcpy(block, ms[i].data ? ms[i].data : "", len);
		if (len)
			assert_int_equal(hutch_write_all(fd, block, 512), 0);
	}
	memset(block, 0, sizeof(block));
	assert_int_equal(hutch_write_all(fd, block, 512), 0);
	assert_int_equal(hutch_write_all(fd, block, 512), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

struct dirs {
	char base[64];
	int layer, outside;
};

static void dirs_make(struct dirs *d)
{
	strcpy(d->base, "/tmp/hutch-test-image-XXXXXX");
	assert_non_null(mkdtemp(d->base));
	d->layer = open(d->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(mkdirat(d->layer, "layer", 0755), 0);
	assert_int_equal(mkdirat(d->layer, "outside", 0777), 0);
	d->outside = openat(d->layer, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(hutch_write_file_at(d->outside, "secret", "host\n", 0644), 0);
	closep(&d->layer);
	d->layer = openat(d->outside, "../layer", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(d->layer >= 0);
}

static void dirs_done(struct dirs *d)
{
	char buf[16] = "";

	/* The host file is unchanged and nothing was added beside it. */
	assert_int_equal(hutch_read_file_at(d->outside, "secret", buf, sizeof(buf)), 5);
	assert_string_equal(buf, "host\n");
	assert_int_equal(faccessat(d->outside, "pwned", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	closep(&d->layer);
	closep(&d->outside);
	assert_int_equal(hutch_rm_rf_at(AT_FDCWD, d->base), 0);
}

static int unpack(const struct member *ms, size_t n, struct dirs *d, struct hutch_err *err)
{
	struct hutch_unpack_limits lim = { .max_bytes = 1 << 20, .max_entries = 100 };
	struct hutch_unpack_result res;
	_cleanup_close_ int fd = make_tar(ms, n);

	return hutch_image_unpack(fd, d->layer, &lim, &res, err);
}

static void test_unpack_plain(void **state)
{
	const struct member ms[] = {
		{ .path = "etc", .type = AE_IFDIR, .mode = 0755 },
		{ .path = "etc/hosts", .type = AE_IFREG, .mode = 04755, .data = "127.0.0.1\n" },
		{ .path = "bin", .type = AE_IFLNK, .mode = 0777, .link = "/usr/bin" },
		{ .path = "etc/h2", .type = AE_IFREG, .mode = 0644, .hardlink = "etc/hosts" },
		{ .path = "dev/null", .type = AE_IFCHR, .mode = 0666 },
		{ .path = "etc/.wh.gone", .type = AE_IFREG, .mode = 0644 },
	};
	struct hutch_err err = { 0 };
	struct dirs d;
	struct stat st;

	dirs_make(&d);
	assert_int_equal(unpack(ms, ELEMENTSOF(ms), &d, &err), 0);
	assert_int_equal(fstatat(d.layer, "etc/hosts", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0755); /* set-uid dropped */
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(fstatat(d.layer, "bin", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(fstatat(d.layer, "dev/null", &st, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(fstatat(d.layer, "etc/gone", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISCHR(st.st_mode) && st.st_rdev == 0);
	dirs_done(&d);
}

static void expect_refused(const struct member *ms, size_t n, int code, const char *msg)
{
	struct hutch_err err = { 0 };
	struct dirs d;

	dirs_make(&d);
	assert_int_equal(unpack(ms, n, &d, &err), code);
	assert_non_null(strstr(err.msg, msg));
	dirs_done(&d);
}

static void test_unpack_attacks(void **state)
{
	const struct member dotdot[] = {
		{ .path = "../outside/pwned", .type = AE_IFREG, .mode = 0644, .data = "x" }
	};
	const struct member sym[] = {
		{ .path = "s", .type = AE_IFLNK, .mode = 0777, .link = "../outside" },
		{ .path = "s/pwned", .type = AE_IFREG, .mode = 0644, .data = "x" }
	};
	const struct member hard[] = {
		{ .path = "h", .type = AE_IFREG, .mode = 0644, .hardlink = "../outside/secret" }
	};
	const struct member hardsym[] = {
		{ .path = "s", .type = AE_IFLNK, .mode = 0777, .link = "../outside" },
		{ .path = "h", .type = AE_IFREG, .mode = 0644, .hardlink = "s/secret" }
	};
	/* A directory kept open between files of it (unpack.c's parent_of()),
	 * then replaced by a symlink: the next file of it goes through that. */
	const struct member kept[] = {
		{ .path = "d", .type = AE_IFDIR, .mode = 0755 },
		{ .path = "d/f1", .type = AE_IFREG, .mode = 0644, .data = "1" },
		{ .path = "d", .type = AE_IFLNK, .mode = 0777, .link = "../outside" },
		{ .path = "d/pwned", .type = AE_IFREG, .mode = 0644, .data = "x" }
	};
	/* ... or by a regular file, made in the parent's own parent. */
	const struct member kept_file[] = {
		{ .path = "d/f1", .type = AE_IFREG, .mode = 0644, .data = "1" },
		{ .path = "d", .type = AE_IFREG, .mode = 0644, .data = "2" },
		{ .path = "d/f2", .type = AE_IFREG, .mode = 0644, .data = "x" }
	};
	const struct member wh[] = { { .path = ".wh..", .type = AE_IFREG, .mode = 0644 } };
	const struct member big[] = {
		{ .path = "big", .type = AE_IFREG, .mode = 0644, .data = "0123456789" }
	};
	struct hutch_unpack_limits lim = { .max_bytes = 4, .max_entries = 100 };
	struct hutch_unpack_result res;
	struct hutch_err err = { 0 };
	struct dirs d;
	int fd;

	expect_refused(dotdot, ELEMENTSOF(dotdot), -EINVAL, "leaves the layer");
	expect_refused(sym, ELEMENTSOF(sym), -ELOOP, "through a symlink");
	expect_refused(hard, ELEMENTSOF(hard), -EXDEV, "not a file of this layer");
	expect_refused(hardsym, ELEMENTSOF(hardsym), -ELOOP, "through a symlink");
	expect_refused(wh, ELEMENTSOF(wh), -EINVAL, "whiteout of no name");
	expect_refused(kept, ELEMENTSOF(kept), -ELOOP, "through a symlink");
	expect_refused(kept_file, ELEMENTSOF(kept_file), -ENOTDIR, "d/f2");
	dirs_make(&d);
	fd = make_tar(big, ELEMENTSOF(big));
	assert_int_equal(hutch_image_unpack(fd, d.layer, &lim, &res, &err), -EFBIG);
	(void)close(fd);
	dirs_done(&d);
}

/* A snapshot's stream: the writer's digest is the sha256 of every byte it
 * wrote; the unpacker given that digest computes none and refuses a
 * compressed stream (its digest would not be its diff_id). */
static void test_tar_digest(void **state)
{
	struct hutch_unpack_limits lim = { .max_bytes = 1 << 20,
		                           .max_entries = 100,
		                           .digest_given = true };
	struct hutch_image_tar_src src;
	struct hutch_image_tar_stats st;
	struct hutch_unpack_result res;
	char buf[4096], want[HUTCH_IMAGE_DIGEST_LEN + 1];
	struct hutch_err err = { 0 };
	struct hutch_sha256 h;
	struct archive *a;
	struct archive_entry *e;
	struct dirs d;
	ssize_t n;
	int fd;

	(void)state;
	dirs_make(&d);
	src = (struct hutch_image_tar_src){ .dirfd = d.outside, .prefix = "workspace" };
	fd = memfd_create("layer", MFD_CLOEXEC);
	assert_int_equal(hutch_image_tar_dirs(fd, &src, 1, 0, &st, &err), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	hutch_sha256_init(&h);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		hutch_sha256_update(&h, buf, (size_t)n);
	hutch_sha256_final(&h, want);
	assert_string_equal(st.digest, want);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(hutch_image_unpack(fd, d.layer, &lim, &res, &err), 0);
	assert_string_equal(res.diff_id, "");
	assert_int_equal(hutch_read_file_at(d.layer, "workspace/secret", buf, sizeof(buf)), 5);
	(void)close(fd);
	/* The same with gzip on top: refused. */
	fd = memfd_create("layer", MFD_CLOEXEC);
	a = archive_write_new();
	e = archive_entry_new();
	assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	assert_int_equal(archive_write_set_format_ustar(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	archive_entry_set_pathname(e, "f");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_entry_free(e);
	archive_write_free(a);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(hutch_image_unpack(fd, d.layer, &lim, &res, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "compressed (gzip)"));
	(void)close(fd);
	dirs_done(&d);
}

struct seen {
	uint64_t last, calls;
	bool backwards;
};

static void on_read(void *ud, uint64_t read)
{
	struct seen *s = ud;

	s->backwards |= read < s->last;
	s->last = read;
	s->calls++;
}

/* Progress: every read reported with progress_ms 0, never backwards, the
 * last one the blob's whole size. */
static void test_unpack_progress(void **state)
{
	static char paths[300][8];
	struct member ms[300];
	struct seen seen = { 0 };
	struct hutch_unpack_limits lim = {
		.max_bytes = 1 << 20, .max_entries = 1000, .progress = on_read, .progress_ud = &seen
	};
	struct hutch_unpack_result res;
	struct hutch_err err = { 0 };
	struct dirs d;
	struct stat st;
	int fd;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(ms); i++) {
		snprintf(paths[i], sizeof(paths[i]), "f%zu", i);
		ms[i] = (struct member){
			.path = paths[i], .type = AE_IFREG, .mode = 0644, .data = "some bytes"
		};
	}
	dirs_make(&d);
	fd = make_tar(ms, ELEMENTSOF(ms));
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(hutch_image_unpack(fd, d.layer, &lim, &res, &err), 0);
	assert_true(seen.calls >= (uint64_t)st.st_size / (64 * 1024));
	assert_false(seen.backwards);
	assert_int_equal(seen.last, st.st_size);
	(void)close(fd);
	dirs_done(&d);
}

/* The parent's reading of the unpacker's messages: a bounded amount per
 * message, -EIO for anything but progress and then a result. */
static void test_read_reports(void **state)
{
	static const struct {
		const char *bytes;
		size_t len;
		int want;
	} cases[] = {
		{ "", 0, -EIO },                                     /* died at once */
		{ "x", 1, -EIO },                                    /* unknown type */
		{ "p\1\0\0", 4, -EIO },                              /* short progress */
		{ "p\1\0\0\0\0\0\0\0p\2\0\0\0\0\0\0\0r", 19, -EIO }, /* short result */
		{ "p\1\0\0\0\0\0\0\0u", 10, -EIO },                  /* late 'u' */
	};
	struct hutch_unpack_report out = { .r = 7 }, sent = { .r = 0 };
	struct seen seen = { 0 };
	struct hutch_unpack_limits lim = { .progress = on_read, .progress_ud = &seen };
	uint64_t v = 5;
	int p[2];

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
		assert_int_equal(hutch_write_all(p[1], cases[i].bytes, cases[i].len), 0);
		closep(&p[1]);
		assert_int_equal(hutch_image_read_reports(p[0], &out, &lim), cases[i].want);
		closep(&p[0]);
	}
	/* Progress, then the result, whatever follows it. */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(hutch_write_all(p[1], "p", 1), 0);
	assert_int_equal(hutch_write_all(p[1], &v, sizeof(v)), 0);
	assert_int_equal(hutch_write_all(p[1], "r", 1), 0);
	strcpy(sent.res.diff_id, "sha256:x");
	assert_int_equal(hutch_write_all(p[1], &sent, sizeof(sent)), 0);
	assert_int_equal(hutch_write_all(p[1], "garbage", 7), 0);
	seen = (struct seen){ 0 };
	assert_int_equal(hutch_image_read_reports(p[0], &out, &lim), 0);
	assert_int_equal(out.r, 0);
	assert_string_equal(out.res.diff_id, "sha256:x");
	assert_int_equal(seen.last, 5);
	closep(&p[0]);
	closep(&p[1]);
}

static int parse(const char *text, struct hutch_recipe *r, struct hutch_err *err)
{
	*err = (struct hutch_err){ 0 };
	return hutch_recipe_parse(text, strlen(text), r, err);
}

static void test_recipe(void **state)
{
	struct hutch_recipe r;
	struct hutch_err err;
	char *script;

	(void)state;
	assert_int_equal(parse("# c\nbase bookworm\n\npackages a b\n  packages c++ d.e\t\n"
	                       "run echo 1; \\\n  echo 2\nrun true\nenv A=1\nenv A=x=y\n",
	                       &r, &err),
	                 0);
	assert_string_equal(r.suite, "bookworm");
	assert_string_equal(r.packages, "a,b,c++,d.e");
	assert_int_equal(r.nruns, 2);
	assert_string_equal(r.runs[0], "echo 1; \\\n  echo 2");
	assert_string_equal(r.runs[1], "true");
	assert_int_equal(r.nenv, 2);
	assert_string_equal(r.env[1], "A=x=y");
	script = hutch_recipe_script(&r);
	assert_non_null(script);
	assert_non_null(strstr(script, "hutch: recipe step 1/2: echo 1; \\ ...'"));
	assert_non_null(strstr(script, "(set -eu\necho 1; \\\n  echo 2\n)\n[ $? -eq 0 ] ||"));
	assert_non_null(strstr(script, "recipe step 2/2 failed"));
	free(script);
	hutch_recipe_done(&r);

	/* the built-in one parses */
	assert_int_equal(parse(hutch_image_default_recipe, &r, &err), 0);
	assert_string_equal(r.suite, "bookworm");
	assert_true(r.nruns > 0 && r.nenv > 0);
	hutch_recipe_done(&r);

	/* each error names its line */
	assert_int_equal(parse("base bookworm\npackages a\nfrom x\n", &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 3: unknown 'from'"));
	assert_int_equal(parse("base bookworm\npackages Bad\n", &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 2: 'Bad' is not a Debian package name"));
	assert_int_equal(parse("base bookworm\nbase sid\npackages a\n", &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 2: a second 'base'"));
	assert_int_equal(parse("base ../x\npackages a\n", &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 1: 'base' takes a Debian release"));
	assert_int_equal(parse("base b\npackages a\nenv 1A=2\n", &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 3: 'env' takes NAME=VALUE"));
	assert_int_equal(parse("base b\npackages a\nrun\n", &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 3: 'run' needs a value"));
	assert_int_equal(parse("packages a\n", &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "needs a 'base' and 'packages'"));
	assert_int_equal(hutch_recipe_parse("base b\0", 7, &r, &err), -EINVAL);
}

static int bspec(const char *text, struct hutch_buildspec *b, struct hutch_err *err)
{
	*err = (struct hutch_err){ 0 };
	return hutch_buildspec_parse(text, strlen(text), b, err);
}

/* hutch build's file: every key, and each refusal naming its key. */
static void test_buildspec(void **state)
{
	struct hutch_buildspec b;
	struct hutch_err err;

	(void)state;
	assert_int_equal(bspec("{\"name\": \"n\", \"image\": \"i\", \"workdir\": \"/w\", "
	                       "\"env\": {\"A\": \"1\", \"B_2\": \"x=y\"}, "
	                       "\"files\": {\"/f\": \"text\"}, "
	                       "\"copy\": [{\"src\": \"s\", \"dst\": \"/d\"}], "
	                       "\"run\": [\"true\", {\"command\": \"make\", \"cwd\": \"/c\", "
	                       "\"timeout\": 5}]}",
	                       &b, &err),
	                 0);
	assert_string_equal(b.name, "n");
	assert_string_equal(b.image, "i");
	assert_string_equal(b.workdir, "/w");
	assert_int_equal(b.nenv, 2);
	assert_string_equal(b.env[1], "B_2=x=y");
	assert_null(b.env[2]);
	assert_string_equal(b.files[0].content, "text");
	assert_string_equal(b.copies[0].dst, "/d");
	assert_int_equal(b.nruns, 2);
	assert_null(b.runs[0].cwd);
	assert_string_equal(b.runs[1].cwd, "/c");
	assert_true(b.runs[1].timeout == 5);
	hutch_buildspec_done(&b);
	assert_int_equal(bspec("{}", &b, &err), 0);
	assert_non_null(b.env);
	hutch_buildspec_done(&b);

	assert_int_equal(bspec("{\"imgae\": \"x\"}", &b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "unknown key 'imgae'"));
	assert_int_equal(bspec("{\"env\": {\"A=B\": \"c\"}}", &b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'env' name 'A=B'"));
	assert_int_equal(bspec("{\"run\": [{\"command\": \"x\", \"timeout\": -1}]}", &b, &err),
	                 -EINVAL);
	assert_non_null(strstr(err.msg, "'run' entry 1"));
	assert_int_equal(bspec("{\"name\": \"a\", \"name\": \"b\"}", &b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'name' is given twice"));
	assert_int_equal(
	        bspec("{\"copy\": [{\"src\": \"a\", \"dst\": \"b\", \"x\": 1}]}", &b, &err),
	        -EINVAL);
	assert_int_equal(bspec("{\"files\": []}", &b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'files' must be an object"));
	assert_int_equal(bspec("{\"run\": [\"a\"", &b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not JSON"));
	assert_int_equal(hutch_buildspec_parse("{}", HUTCH_BUILDSPEC_MAX + 1, &b, &err), -EFBIG);
	assert_true(hutch_image_env_is_valid("_A1=x"));
	assert_false(hutch_image_env_is_valid("1A=x"));
	assert_false(hutch_image_env_is_valid("A"));
	assert_false(hutch_image_env_is_valid("A=x\ny"));
}

/* A store of names: those listed are taken; "fail" makes the look-up fail. */
static int names_taken(void *ud, const char *name, struct hutch_err *err)
{
	const char *const *taken = ud;

	for (size_t i = 0; taken[i]; i++) {
		if (!strcmp(taken[i], "fail"))
			return hutch_err_set(err, -EIO, "look for '%s'", name);
		if (!strcmp(taken[i], name))
			return hutch_err_set_class(err, HUTCH_ERRC_CONFLICT, -EEXIST, "'%s'", name);
	}
	return 0;
}

/* Default snapshot names: unique however fast they come (two full
 * snapshots in one second were snap-<id>-<seconds> both), names taken
 * skipped, the count kept. */
static void test_name_pick(void **state)
{
	const char *none[] = { NULL };
	const char *some[] = { "snap-abc-1", "snap-abc-2", "snap-abc-4", NULL };
	const char *fail[] = { "fail", NULL };
	struct hutch_err err = { 0 };
	unsigned n = 0;
	char buf[64], first[64];

	(void)state;
	assert_int_equal(
	        hutch_image_name_pick("snap-abc", &n, names_taken, none, buf, sizeof(buf), &err),
	        0);
	assert_string_equal(buf, "snap-abc-1");
	snprintf(first, sizeof(first), "%s", buf);
	assert_int_equal(
	        hutch_image_name_pick("snap-abc", &n, names_taken, none, buf, sizeof(buf), &err),
	        0);
	assert_string_equal(buf, "snap-abc-2");
	assert_string_not_equal(buf, first);
	n = 0;
	assert_int_equal(
	        hutch_image_name_pick("snap-abc", &n, names_taken, some, buf, sizeof(buf), &err),
	        0);
	assert_string_equal(buf, "snap-abc-3");
	assert_int_equal(n, 3);
	assert_int_equal(
	        hutch_image_name_pick("snap-abc", &n, names_taken, some, buf, sizeof(buf), &err),
	        0);
	assert_string_equal(buf, "snap-abc-5");
	assert_int_equal(err.code, 0); /* the taken names' errors are not left behind */
	n = 7;
	assert_int_equal(
	        hutch_image_name_pick("snap-abc", &n, names_taken, fail, buf, sizeof(buf), &err),
	        -EIO);
	assert_int_equal(n, 7);
	assert_int_equal(hutch_image_name_pick("snap-abc", &n, names_taken, none, buf, 8, &err),
	                 -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unpack_progress),
		cmocka_unit_test(test_tar_digest),
		cmocka_unit_test(test_read_reports),
		cmocka_unit_test(test_sha256),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_refs),
		cmocka_unit_test(test_clean_path),
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_manifest_and_config),
		cmocka_unit_test(test_unpack_plain),
		cmocka_unit_test(test_unpack_attacks),
		cmocka_unit_test(test_recipe),
		cmocka_unit_test(test_buildspec),
		cmocka_unit_test(test_name_pick),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
