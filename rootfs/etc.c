/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's /etc. It lives on the root tmpfs (read-only once setup is
 * done) and holds only what we write ourselves — passwd, group, hostname,
 * hosts, resolv.conf, nsswitch.conf — plus read-only binds of the few host
 * entries a shell, the dynamic loader, Python and TLS clients need. The
 * host list is an allow-list: nothing else of host /etc (shadow, ssh keys,
 * machine-id, sudoers, apt credentials) is ever visible.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdutil.h"
#include "rootfs-internal.h"

/* Fixed ids of the synthesized databases; appuser must not collide with them. */
#define ROOT_ID   0
#define TTY_GID   5 /* devpts is mounted with gid=5 */
#define NOBODY_ID 65534

/* Host /etc entries shared read-only, by exact name (in rows, not
 * pointers: no relocation at start, issue 31). */
static const char etc_shared[][24] = {
	"alternatives",   "bash.bashrc", "ca-certificates", "ca-certificates.conf",
	"debian_version", "inputrc",     "ld.so.cache",     "ld.so.conf",
	"ld.so.conf.d",   "localtime",   "mime.types",      "os-release",
	"profile",        "protocols",   "services",        "ssl",
	"terminfo",
};

const char rootfs_nsswitch_conf[] = "passwd:         files\n"
                                    "group:          files\n"
                                    "shadow:         files\n"
                                    "hosts:          files dns\n"
                                    "networks:       files\n"
                                    "protocols:      files\n"
                                    "services:       files\n"
                                    "ethers:         files\n"
                                    "rpc:            files\n";

bool rootfs_etc_is_shared(const char *name)
{
	/* Python's site configuration: /etc/python3, /etc/python3.11, ... */
	if (!strncmp(name, "python3", 7) && !strchr(name, '/'))
		return true;
	for (size_t i = 0; i < ELEMENTSOF(etc_shared); i++)
		if (!strcmp(name, etc_shared[i]))
			return true;
	return false;
}

bool rootfs_hostname_is_valid(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	/* What sethostname() takes, restricted to what /etc/hosts can carry. */
	if (len == 0 || len > 64 || name[0] == '-' || name[0] == '.')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.'))
			return false;
	}
	return true;
}

bool rootfs_app_id_is_valid(unsigned int id)
{
	return id != ROOT_ID && id != TTY_GID && id < NOBODY_ID;
}

char *rootfs_passwd_render(uid_t app_uid, gid_t app_gid, const char *shell)
{
	char *s = NULL;

	if (!rootfs_app_id_is_valid(app_uid) || !rootfs_app_id_is_valid(app_gid) || !shell ||
	    !*shell || strpbrk(shell, ":\n")) {
		errno = EINVAL;
		return NULL;
	}
	/* root has no login shell: nothing inside should ever log in as it. */
	if (asprintf(&s,
	             "root:x:0:0:root:/root:/usr/sbin/nologin\n"
	             "appuser:x:%u:%u:appuser:/home/appuser:%s\n"
	             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	             (unsigned int)app_uid, (unsigned int)app_gid, shell) < 0)
		return NULL;
	return s;
}

char *hutch_rootfs_passwd(uid_t app_uid, gid_t app_gid)
{
	return rootfs_passwd_render(app_uid, app_gid, "/bin/bash");
}

char *hutch_rootfs_group(gid_t app_gid)
{
	char *s = NULL;

	if (!rootfs_app_id_is_valid(app_gid)) {
		errno = EINVAL;
		return NULL;
	}
	if (asprintf(&s, "root:x:0:\ntty:x:5:\nappuser:x:%u:\nnogroup:x:65534:\n",
	             (unsigned int)app_gid) < 0)
		return NULL;
	return s;
}

char *rootfs_hosts_render(const char *hostname, const char *extra)
{
	size_t elen = extra ? strlen(extra) : 0;
	const char *nl = elen > 0 && extra[elen - 1] != '\n' ? "\n" : "";
	char *s = NULL;

	if (!rootfs_hostname_is_valid(hostname)) {
		errno = EINVAL;
		return NULL;
	}
	if (asprintf(&s,
	             "127.0.0.1\tlocalhost %s\n"
	             "::1\tlocalhost ip6-localhost ip6-loopback\n"
	             "%s%s",
	             hostname, extra ? extra : "", nl) < 0)
		return NULL;
	return s;
}

const char *rootfs_pick_shell(int root)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
	_cleanup_close_ int fd = sys_openat2(root, "bin/bash", &how, sizeof(how));

	return fd >= 0 ? "/bin/bash" : "/bin/sh";
}

/* Field n (0 = the name) of a passwd/group line, as its length; NULL if absent. */
static const char *field(const char *line, size_t len, unsigned n, size_t *ret_len)
{
	const char *p = line, *end = line + len, *colon;

	for (; n > 0; n--) {
		colon = memchr(p, ':', (size_t)(end - p));
		if (!colon)
			return NULL;
		p = colon + 1;
	}
	colon = memchr(p, ':', (size_t)(end - p));
	*ret_len = (size_t)((colon ? colon : end) - p);
	return p;
}

static bool field_is(const char *line, size_t len, unsigned n, const char *want)
{
	size_t flen;
	const char *f = field(line, len, n, &flen);

	return f && flen == strlen(want) && !memcmp(f, want, flen);
}

/*
 * image's lines, without those naming appuser or having id in field
 * id_field, then head (when the image has no root line) prepended and
 * tail appended.
 */
static char *merge(const char *image, unsigned id_field, unsigned id, const char *root_line,
                   const char *tail)
{
	size_t ilen = image ? strlen(image) : 0, n = 0;
	char idtext[16], *out;
	bool has_root = false;

	snprintf(idtext, sizeof(idtext), "%u", id);
	out = malloc(ilen + strlen(root_line) + strlen(tail) + 2);
	if (!out)
		return NULL;
	for (const char *p = image; p && *p;) {
		const char *nl = strchrnul(p, '\n');
		size_t len = (size_t)(nl - p);

		if (len && !field_is(p, len, 0, "appuser") && !field_is(p, len, id_field, idtext)) {
			has_root |= field_is(p, len, 0, "root");
			memcpy(out + n, p, len);
			n += len;
			out[n++] = '\n';
		}
		p = *nl ? nl + 1 : nl;
	}
	if (!has_root) {
		memmove(out + strlen(root_line), out, n);
		memcpy(out, root_line, strlen(root_line));
		n += strlen(root_line);
	}
	memcpy(out + n, tail, strlen(tail) + 1);
	return out;
}

char *rootfs_passwd_merge(const char *image, uid_t app_uid, gid_t app_gid, const char *shell)
{
	_cleanup_free_ char *line = NULL;

	if (!rootfs_app_id_is_valid(app_uid) || !rootfs_app_id_is_valid(app_gid) || !shell ||
	    !*shell || strpbrk(shell, ":\n")) {
		errno = EINVAL;
		return NULL;
	}
	if (asprintf(&line, "appuser:x:%u:%u:appuser:/home/appuser:%s\n", (unsigned int)app_uid,
	             (unsigned int)app_gid, shell) < 0)
		return NULL;
	return merge(image, 2, (unsigned int)app_uid, "root:x:0:0:root:/root:/bin/sh\n", line);
}

char *rootfs_group_merge(const char *image, gid_t app_gid)
{
	_cleanup_free_ char *line = NULL;

	if (!rootfs_app_id_is_valid(app_gid)) {
		errno = EINVAL;
		return NULL;
	}
	if (asprintf(&line, "appuser:x:%u:\n", (unsigned int)app_gid) < 0)
		return NULL;
	return merge(image, 2, (unsigned int)app_gid, "root:x:0:\n", line);
}

static int write_etc(int etc, const char *name, const char *content, struct hutch_err *err)
{
	int r = hutch_write_file_at(etc, name, content, 0644);

	if (r < 0)
		return hutch_err_set_errno(err, r, "write '/etc/%s'", name);
	return 0;
}

static int write_generated(struct rootfs_ctx *ctx, int etc, struct hutch_err *err)
{
	const struct hutch_rootfs_config *cfg = ctx->cfg;
	_cleanup_free_ char *passwd = NULL, *group = NULL, *hosts = NULL, *hostname = NULL;
	int r;

	passwd = rootfs_passwd_render(cfg->app_uid, cfg->app_gid, rootfs_pick_shell(ctx->root));
	group = hutch_rootfs_group(cfg->app_gid);
	if (!passwd || !group)
		return hutch_err_set_errno(err, -errno, "render /etc/passwd for uid %u gid %u",
		                           (unsigned int)cfg->app_uid, (unsigned int)cfg->app_gid);
	hosts = rootfs_hosts_render(cfg->hostname, cfg->extra_hosts);
	if (!hosts || asprintf(&hostname, "%s\n", cfg->hostname) < 0)
		return hutch_err_set(err, -ENOMEM, "render /etc/hosts");

	if ((r = write_etc(etc, "passwd", passwd, err)) < 0 ||
	    (r = write_etc(etc, "group", group, err)) < 0 ||
	    (r = write_etc(etc, "hostname", hostname, err)) < 0 ||
	    (r = write_etc(etc, "hosts", hosts, err)) < 0 ||
	    (r = write_etc(etc, "resolv.conf", cfg->resolv_conf ? cfg->resolv_conf : "", err)) <
	            0 ||
	    (r = write_etc(etc, "nsswitch.conf", rootfs_nsswitch_conf, err)) < 0)
		return r;
	/* df, mount and friends still look for it. */
	if (symlinkat("../proc/self/mounts", etc, "mtab") < 0)
		return hutch_err_set_errno(err, -errno, "create symlink '/etc/mtab'");
	return 0;
}

/* The flags of every shared entry: set once, on the clone of the host's
 * /etc they are bound from (share_host_etc()). */
#define ETC_ATTRS (ROOTFS_ATTR_HOST_RO | MOUNT_ATTR_NOEXEC)

static int share_one(struct rootfs_ctx *ctx, int host_etc, int etc, const char *name,
                     unsigned char type, struct hutch_err *err)
{
	char where[320];
	struct stat st;
	int r;

	snprintf(where, sizeof(where), "/etc/%s", name);
	if (type == DT_UNKNOWN) {
		if (fstatat(host_etc, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return hutch_err_set_errno(err, -errno, "stat host '%s'", where);
		type = S_ISLNK(st.st_mode)   ? DT_LNK
		       : S_ISDIR(st.st_mode) ? DT_DIR
		       : S_ISREG(st.st_mode) ? DT_REG
		                             : DT_UNKNOWN;
	}
	switch (type) {
	case DT_LNK:
		/* localtime, os-release: the targets are under /usr, which we share. */
		return rootfs_copy_symlink(host_etc, etc, name, where, err);
	case DT_DIR:
		r = rootfs_mkdir(etc, name, 0755, where, err);
		break;
	case DT_REG:
		r = rootfs_mkfile(etc, name, where, err);
		break;
	default:
		return 0; /* sockets, fifos, devices: never shared */
	}
	if (r < 0)
		return r;
	return rootfs_bind_new(host_etc, name, etc, name, 0, where, err); /* our own tmpfs */
}

/*
 * The host's /etc, cloned once with the entries' flags and attached over
 * itself in our private copy of the host tree (detached with it after
 * pivot_root): each entry bound from it inherits the flags, one
 * mount_setattr() in all instead of one per entry (17 on Debian 12).
 */
static int host_etc_readonly(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	_cleanup_close_ int src = -EBADF;

	src = rootfs_clone_new(ctx->host_root, "etc", ETC_ATTRS, "/etc", err);
	if (src == -ENOENT) {
		hutch_err_clear(err);
		return 0;
	}
	if (src < 0)
		return src;
	return rootfs_attach(src, ctx->host_root, "etc", "bind", "/etc", err);
}

static int share_host_etc(struct rootfs_ctx *ctx, int etc, struct hutch_err *err)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd, r;

	r = host_etc_readonly(ctx, err);
	if (r < 0)
		return r;
	fd = openat(ctx->host_root, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : hutch_err_set_errno(err, -errno, "open host '/etc'");
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		(void)close(fd);
		return hutch_err_set_errno(err, r, "open host '/etc'");
	}
	/* One pass over the directory gives existence and type of every entry. */
	for (errno = 0; (de = readdir(d)); errno = 0) {
		if (!rootfs_etc_is_shared(de->d_name))
			continue;
		r = share_one(ctx, dirfd(d), etc, de->d_name, de->d_type, err);
		if (r < 0)
			return r;
	}
	if (errno)
		return hutch_err_set_errno(err, -errno, "read host '/etc'");
	return 0;
}

#define HOST_BUNDLE "etc/ssl/certs/ca-certificates.crt"

int rootfs_replace_file(int dir, const char *name, const char *content, const char *where,
                        struct hutch_err *err)
{
	_cleanup_close_ int fd = -EBADF;
	int r;

	if (unlinkat(dir, name, 0) < 0 && errno != ENOENT)
		return hutch_err_set_errno(err, -errno, "replace '%s/%s'", where, name);
	fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return hutch_err_set_errno(err, -errno, "write '%s/%s'", where, name);
	r = hutch_write_all(fd, content, strlen(content));
	if (r < 0)
		return hutch_err_set_errno(err, r, "write '%s/%s'", where, name);
	return 0;
}

int rootfs_ca_files(int etc, const char *bundle, size_t n, const char *ca_pem, char **ret_all,
                    struct hutch_err *err)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		                .resolve = HUTCH_RESOLVE_HOST };
	_cleanup_free_ char *all = NULL;
	_cleanup_close_ int dir = sys_openat2(etc, "hutch", &how, sizeof(how));
	int r;

	if (dir < 0 && errno != ENOENT && unlinkat(etc, "hutch", 0) < 0 && errno != ENOENT)
		return hutch_err_set_errno(err, -errno, "replace '/etc/hutch'");
	if (dir < 0) {
		r = rootfs_mkdir(etc, "hutch", 0755, "/etc/hutch", err);
		if (r < 0)
			return r;
		dir = sys_openat2(etc, "hutch", &how, sizeof(how));
		if (dir < 0)
			return hutch_err_set_errno(err, -errno, "open '/etc/hutch'");
	}
	if (asprintf(&all, "%.*s%s%s", (int)n, n > 0 ? bundle : "",
	             n > 0 && bundle[n - 1] != '\n' ? "\n" : "", ca_pem) < 0)
		return hutch_err_set(err, -ENOMEM, "render the CA bundle");
	if ((r = rootfs_replace_file(dir, "sandbox-ca.crt", ca_pem, "/etc/hutch", err)) < 0 ||
	    (r = rootfs_replace_file(dir, "ca-certificates.crt", all, "/etc/hutch", err)) < 0)
		return r;
	if (ret_all)
		*ret_all = TAKE_PTR(all);
	return 0;
}

/*
 * Header bindings on the host-derived root: the sandbox's CA joins the
 * trust store (rootfs_ca_files() after the host's bundle), and
 * /etc/hutch/ca-certificates.crt is mounted read-only over
 * /etc/ssl/certs/ca-certificates.crt (the default bundle of OpenSSL,
 * GnuTLS, curl, git and Python on Debian) when the host has one.
 */
static int install_ca(struct rootfs_ctx *ctx, int etc, struct hutch_err *err)
{
	const unsigned int attrs = ROOTFS_ATTR_HOST_RO | MOUNT_ATTR_NOEXEC;
	_cleanup_free_ char *bundle = NULL;
	ssize_t n;
	int r;

	n = hutch_read_file_alloc_at(ctx->host_root, HOST_BUNDLE, ROOTFS_CA_BUNDLE_MAX, &bundle);
	if (n < 0 && n != -ENOENT)
		return hutch_err_set_errno(err, (int)n, "read host '/%s'", HOST_BUNDLE);
	r = rootfs_ca_files(etc, bundle, n > 0 ? (size_t)n : 0, ctx->cfg->ca_pem, NULL, err);
	if (r < 0 || n < 0)
		return r;
	return rootfs_bind(etc, "hutch/ca-certificates.crt", etc, "ssl/certs/ca-certificates.crt",
	                   attrs, "/etc/ssl/certs/ca-certificates.crt", err);
}

int rootfs_setup_etc(struct rootfs_ctx *ctx, struct hutch_err *err)
{
	_cleanup_close_ int etc = -EBADF;
	int r;

	r = rootfs_mkdir(ctx->root, "etc", 0755, "/etc", err);
	if (r < 0)
		return r;
	etc = openat(ctx->root, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return hutch_err_set_errno(err, -errno, "open '/etc'");
	r = write_generated(ctx, etc, err);
	if (r < 0)
		return r;
	r = share_host_etc(ctx, etc, err);
	if (r < 0 || !ctx->cfg->ca_pem)
		return r;
	return install_ca(ctx, etc, err);
}
