/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch cp: copy files and directories between the host and a sandbox over
 * the raw PUT/GET /files endpoints (docs/api.md). Bytes stream through a
 * fixed buffer, never whole files in memory. Directories travel as a tar
 * stream: on the host side GNU tar runs as the invoking user; inside the
 * sandbox tar runs as appuser (format=tar). Extraction on the host uses
 * GNU tar's defaults against hostile archives (no absolute or ".." member
 * names, symlinks created last as placeholders first) plus
 * --no-same-owner --no-same-permissions and no CAP_MKNOD, because the
 * archive comes from inside the sandbox.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "caps.h"
#include "cleanup.h"
#include "cli.h"
#include "fdutil.h"
#include "log.h"
#include "state.h"
#include "util.h"
#include "verbs.h"

#define CP_EXIT_FILE 1 /* the copy itself failed (missing file, no space...) */
#define IO_CHUNK     (1u << 20)
#define HEAD_MAX     16384

static const char about[] =
        "Copy a file or a directory into or out of a sandbox. LOCAL '-' is standard input\n"
        "(a file's bytes) or standard output (a file's bytes, or a tar stream for a\n"
        "directory). Relative sandbox paths are relative to /workspace. A directory is\n"
        "copied as a tar stream: its contents end up in the destination, which is created.\n"
        "Copying a file onto an existing directory puts it inside, under its own name.\n"
        "Write 'PATH' with './' in front for a local path that contains ':'.\n"
        "--max-bytes N stops a copy out of a sandbox that sends more than N bytes (a\n"
        "hostile sandbox can send a directory stream without end, or a sparse file of\n"
        "any size); what a stopped directory copy extracted stays in LOCAL.\n"
        "A file copied out replaces LOCAL only once it is complete: a failed or\n"
        "interrupted copy leaves an existing LOCAL as it was.\n"
        "Exit codes: 0 copied, 1 the copy failed (missing file, no space, ...), 64 usage,\n"
        "65 no such sandbox, 66 sandbox expired or deleted, 69 a directory copy out as root\n"
        "without CAP_SETPCAP (its tar could not lose CAP_MKNOD) or a directory copy with\n"
        "no tar on the host, 70 other failure.\n";

/* --max-bytes: what a copy out of a sandbox may receive; 0 = no bound. */
static uint64_t max_bytes;

/* "ID:PATH" -> id and path; false if arg is a local path. */
static bool split_remote(const char *arg, char *id, size_t size, const char **path)
{
	const char *colon = strchr(arg, ':');

	if (!colon || (size_t)(colon - arg) >= size)
		return false;
	snprintf(id, size, "%.*s", (int)(colon - arg), arg);
	if (!hutch_id_prefix_is_valid(id))
		return false;
	*path = colon + 1;
	return true;
}

/* ---- a minimal HTTP/1.1 exchange on the unix socket ---- */

static int connect_sock(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	if (fd < 0)
		return -errno;
	if ((r = hutch_unix_connect(fd, path)) < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* Percent-encode a query value. */
static void encode_query(const char *in, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *in && n + 4 < size; in++) {
		unsigned char c = (unsigned char)*in;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    strchr("-_.~/", c)) {
			out[n++] = (char)c;
		} else {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
}

struct http_resp {
	long status;
	int64_t length; /* -1: until EOF */
	char head[HEAD_MAX + 1];
	size_t nhead, body_off; /* bytes read; where the body starts */
};

static int read_head(int fd, struct http_resp *h)
{
	char *end = NULL;
	const char *cl;

	h->length = -1;
	while (!end) {
		ssize_t n;
		if (h->nhead >= HEAD_MAX)
			return -EBADMSG;
		n = read(fd, h->head + h->nhead, HEAD_MAX - h->nhead);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		h->nhead += (size_t)n;
		h->head[h->nhead] = '\0';
		end = strstr(h->head, "\r\n\r\n");
	}
	h->body_off = (size_t)(end + 4 - h->head);
	if (sscanf(h->head, "HTTP/1.%*d %ld", &h->status) != 1)
		return -EBADMSG;
	*end = '\0';
	cl = strcasestr(h->head, "\r\ncontent-length:");
	if (cl)
		h->length = strtoll(cl + 17, NULL, 10);
	return 0;
}

/* Read the rest of a (JSON) body and print its error message. */
static int api_failure(int fd, struct http_resp *h, const char *what)
{
	struct hutch_buf b;
	_cleanup_cjson_ cJSON *j = NULL;
	const cJSON *e, *m;
	char buf[4096];
	ssize_t n;

	hutch_buf_init(&b, 1u << 20);
	(void)hutch_buf_append(&b, h->head + h->body_off, h->nhead - h->body_off);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		(void)hutch_buf_append(&b, buf, (size_t)n);
	j = cJSON_ParseWithLength(b.data ? b.data : "", b.len);
	hutch_buf_done(&b);
	e = cJSON_GetObjectItemCaseSensitive(j, "error");
	m = cJSON_GetObjectItemCaseSensitive(e, "message");
	hutch_cli_fail(0, "%s: %s", what, cJSON_IsString(m) ? m->valuestring : "unexpected answer");
	if (h->status == 410)
		return HUTCH_EXIT_GONE;
	return h->status >= 500 && h->status != 507 ? HUTCH_EXIT_FAILURE : CP_EXIT_FILE;
}

static bool error_code_is(int fd, struct http_resp *h, const char *code)
{
	char needle[64];

	snprintf(needle, sizeof(needle), "\"code\":\"%s\"", code);
	/* Error bodies are small: they are in the head buffer already, or
	 * close behind it. */
	while (h->length > 0 && h->nhead - h->body_off < (size_t)h->length && h->nhead < HEAD_MAX) {
		ssize_t n = read(fd, h->head + h->nhead, HEAD_MAX - h->nhead);
		if (n <= 0)
			break;
		h->nhead += (size_t)n;
	}
	h->head[h->nhead] = '\0';
	return strstr(h->head + h->body_off, needle) != NULL;
}

static int send_head(int fd, const char *method, const char *remote, bool tar, const char *mode,
                     int64_t length, bool http10)
{
	char q[PATH_MAX * 3 + 1], head[PATH_MAX * 3 + 512], len[64] = "";
	int n;

	encode_query(remote, q, sizeof(q));
	if (length >= 0)
		snprintf(len, sizeof(len), "Content-Length: %lld\r\n", (long long)length);
	else if (!strcmp(method, "PUT"))
		snprintf(len, sizeof(len), "Transfer-Encoding: chunked\r\n");
	n = snprintf(
	        head, sizeof(head),
	        "%s /files?path=%s%s%s%s HTTP/1.%d\r\nHost: sandbox\r\nConnection: close\r\n%s\r\n",
	        method, q, tar ? "&format=tar" : "", mode ? "&mode=" : "", mode ? mode : "",
	        http10 ? 0 : 1, len);
	if (n < 0 || n >= (int)sizeof(head))
		return -ENAMETOOLONG;
	return hutch_write_all(fd, head, (size_t)n);
}

/* ---- upload ---- */

/* Send everything from in (chunked when length < 0); stops early if the
 * server answered already (it refused the upload). */
static int send_body(int sock, int in, int64_t length)
{
	_cleanup_free_ char *buf = malloc(IO_CHUNK + 32);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(in, buf + 16, IO_CHUNK);
		int r;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (length >= 0) {
			if (n == 0)
				return 0;
			r = hutch_write_all(sock, buf + 16, (size_t)n);
		} else {
			char pre[16];
			int k = snprintf(pre, sizeof(pre), "%zx\r\n", (size_t)n);
			memcpy(buf + 16 - k, pre, (size_t)k);
			memcpy(buf + 16 + n, n ? "\r\n" : "\r\n\r\n", n ? 2 : 4);
			r = hutch_write_all(sock, buf + 16 - k, (size_t)(k + n + (n ? 2 : 4)));
			if (n == 0)
				return r;
		}
		if (r < 0)
			return r; /* EPIPE: the server answered early; read it */
	}
}

/* The sandbox did not answer: 66 naming why when its supervisor is gone
 * (deleted, expired, killed: its socket refused, reset or removed), else
 * 70 (hutch_cli_lost()). */
static int lost(const struct hutch_paths *p, const char *what, int r)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "%s sandbox %s: %s", what, p->id, strerror(-r));
	return hutch_cli_lost(p->sock, r == -ENOENT ? -ECONNREFUSED : r, msg);
}

static int put_stream(const struct hutch_paths *p, const char *remote, int in, int64_t length,
                      bool tar, const char *mode, bool *is_dir)
{
	_cleanup_close_ int sock = connect_sock(p->sock);
	struct http_resp h = { 0 };
	int r;

	if (sock < 0)
		return lost(p, "cannot connect to", sock);
	r = send_head(sock, "PUT", remote, tar, mode, length, false);
	if (r >= 0)
		r = send_body(sock, in, length);
	if (r < 0 && r != -EPIPE && r != -ECONNRESET)
		return lost(p, "send to", r);
	r = read_head(sock, &h);
	if (r < 0)
		return lost(p, "no answer from", r);
	if (h.status == 200)
		return 0;
	if (is_dir && h.status == 400 && error_code_is(sock, &h, "is_a_directory")) {
		*is_dir = true;
		return 0;
	}
	return api_failure(sock, &h, remote);
}

/* tar started on fd_in/fd_out; -1 with errno when it could not run (its
 * exec's errno comes back on a close-on-exec pipe: nothing streamed yet). */
static pid_t spawn_tar(char *const *argv, int fd_in, int fd_out)
{
	int ep[2], e = 0;
	ssize_t n = 0;
	pid_t pid;

	if (pipe2(ep, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		if (fd_in >= 0 && dup2(fd_in, 0) < 0) /* lint-fds: ok: child stdio */
			_exit(127);
		if (fd_out >= 0 && dup2(fd_out, 1) < 0) /* lint-fds: ok: child stdio */
			_exit(127);
		execvp("tar", argv);
		e = errno;
		(void)!write(ep[1], &e, sizeof(e));
		_exit(127);
	}
	e = errno;
	close(ep[1]);
	while (pid > 0 && (n = read(ep[0], &e, sizeof(e))) < 0 && errno == EINTR)
		;
	close(ep[0]);
	if (pid > 0 && n == (ssize_t)sizeof(e)) {
		(void)waitpid(pid, NULL, 0);
		pid = -1;
	}
	errno = e;
	return pid;
}

/* Why tar could not run: a host without tar is not capable (69), named. */
static int tar_refused(void)
{
	int e = errno;

	return hutch_cli_fail(e == ENOENT || e == EACCES ? HUTCH_EXIT_NOT_CAPABLE
	                                                 : HUTCH_EXIT_FAILURE,
	                      "cannot run tar: %s: a directory's copy runs this host's tar; "
	                      "install it or put it in PATH: nothing copied",
	                      strerror(e));
}

static int wait_tar(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int upload_dir(const struct hutch_paths *p, const char *local, const char *remote)
{
	char *argv[] = { "tar", "-C", (char *)local, "-cf", "-", ".", NULL };
	int fds[2];
	pid_t pid;
	int r, t;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "pipe: %s", strerror(errno));
	pid = spawn_tar(argv, -1, fds[1]);
	if (pid < 0) {
		r = tar_refused();
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	close(fds[1]);
	r = put_stream(p, remote, fds[0], -1, true, NULL, NULL);
	close(fds[0]);
	t = wait_tar(pid);
	if (r == 0 && t != 0)
		return hutch_cli_fail(CP_EXIT_FILE, "tar of '%s' failed (exit %d)", local, t);
	return r;
}

static int upload(const struct hutch_paths *p, const char *local, const char *remote)
{
	_cleanup_close_ int fd = -EBADF;
	char mode[8], into[PATH_MAX * 2];
	const char *base;
	bool is_dir = false;
	struct stat st;
	int r;

	if (!strcmp(local, "-"))
		return put_stream(p, remote, 0, -1, false, NULL, NULL);
	fd = open(local, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return hutch_cli_fail(CP_EXIT_FILE, "cannot open '%s': %s", local, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return upload_dir(p, local, remote);
	snprintf(mode, sizeof(mode), "%o", (unsigned)(st.st_mode & 0777));
	base = strrchr(local, '/') ? strrchr(local, '/') + 1 : local;
	if (remote[0] && remote[strlen(remote) - 1] == '/') {
		snprintf(into, sizeof(into), "%s%s", remote, base);
		return put_stream(p, into, fd, S_ISREG(st.st_mode) ? st.st_size : -1, false, mode,
		                  NULL);
	}
	r = put_stream(p, remote, fd, S_ISREG(st.st_mode) ? st.st_size : -1, false, mode, &is_dir);
	if (r || !is_dir)
		return r;
	/* The destination is a directory: copy into it. */
	if (lseek(fd, 0, SEEK_SET) < 0) /* a FIFO, a pipe, a device: its bytes are gone */
		return hutch_cli_fail(CP_EXIT_FILE,
		                      "'%s' is a directory in the sandbox, and '%s' cannot be "
		                      "read again (not a regular file): end the path with '/' "
		                      "('ID:%s/') or name the file in it",
		                      remote, local, remote);
	snprintf(into, sizeof(into), "%s/%s", remote, base);
	return put_stream(p, into, fd, S_ISREG(st.st_mode) ? st.st_size : -1, false, mode, NULL);
}

int hutch_cli_cp_in(const struct hutch_paths *p, const char *local, const char *remote)
{
	signal(SIGPIPE, SIG_IGN);
	return upload(p, local, remote);
}

int hutch_cli_cp_put(const struct hutch_paths *p, const char *remote, int fd, int64_t length,
                     const char *mode)
{
	signal(SIGPIPE, SIG_IGN);
	return put_stream(p, remote, fd, length, false, mode, NULL);
}

/* ---- download ---- */

static int copy_body(int sock, struct http_resp *h, int out)
{
	_cleanup_free_ char *buf = malloc(IO_CHUNK);
	size_t pre = h->nhead - h->body_off;
	int64_t got = (int64_t)pre;

	if (!buf)
		return -ENOMEM;
	if (max_bytes && ((h->length >= 0 && (uint64_t)h->length > max_bytes) || pre > max_bytes))
		return -EFBIG; /* nothing written */
	if (pre && hutch_write_all(out, h->head + h->body_off, pre) < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(sock, buf, IO_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (max_bytes && (uint64_t)got + (uint64_t)n > max_bytes)
			return -EFBIG;
		if (hutch_write_all(out, buf, (size_t)n) < 0)
			return -errno;
		got += n;
	}
	if (h->length >= 0 && got != h->length)
		return -EPIPE; /* the sandbox side failed mid-way */
	return 0;
}

/* GET into out; 1 when the path is a directory (nothing written). */
static int get_stream(const struct hutch_paths *p, const char *remote, bool tar, int out)
{
	_cleanup_close_ int sock = connect_sock(p->sock);
	struct http_resp h = { 0 };
	int r;

	if (sock < 0)
		return lost(p, "cannot connect to", sock);
	r = send_head(sock, "GET", remote, tar, NULL, -1, true);
	if (r >= 0)
		r = read_head(sock, &h);
	if (r < 0)
		return lost(p, "no answer from", r);
	if (h.status != 200) {
		if (!tar && h.status == 400 && error_code_is(sock, &h, "is_a_directory"))
			return -EISDIR;
		return api_failure(sock, &h, remote);
	}
	r = copy_body(sock, &h, out);
	if (r == -EFBIG)
		return hutch_cli_fail(
		        CP_EXIT_FILE,
		        "copy of '%s' stopped: the sandbox sent more than --max-bytes "
		        "%llu bytes",
		        remote, (unsigned long long)max_bytes);
	if (r < 0)
		return hutch_cli_fail(CP_EXIT_FILE, "copy of '%s' failed: %s", remote,
		                      r == -EPIPE ? "the transfer ended early" : strerror(-r));
	return 0;
}

static int download_dir(const struct hutch_paths *p, const char *remote, const char *local)
{
	char *argv[] = {
		"tar", "-C", (char *)local, "-xf", "-", "--no-same-owner", "--no-same-permissions",
		NULL
	};
	int fds[2], r, t;
	bool made;
	pid_t pid;

	if (!strcmp(local, "-"))
		return get_stream(p, remote, true, 1);
	/* The stream may be anything a process in the sandbox writes into its
	 * tar's pipe. Run as root, GNU tar would create the device nodes it
	 * names (a raw disk, mode 0666, in the user's directory): this process
	 * and so the tar it starts lose CAP_MKNOD first (nothing else here
	 * needs it), and tar fails those members. */
	if (hutch_caps_bound_drop(CAP_MKNOD) < 0)
		return hutch_cli_fail(HUTCH_EXIT_NOT_CAPABLE,
		                      "cannot take CAP_MKNOD away from the tar that extracts "
		                      "'%s' (it needs CAP_SETPCAP): nothing copied; copy to '-' "
		                      "and extract yourself",
		                      remote);
	made = mkdir(local, 0755) == 0;
	if (!made && errno != EEXIST)
		return hutch_cli_fail(CP_EXIT_FILE, "cannot create '%s': %s", local,
		                      strerror(errno));
	if (pipe2(fds, O_CLOEXEC) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "pipe: %s", strerror(errno));
	pid = spawn_tar(argv, fds[0], -1);
	if (pid < 0) {
		r = tar_refused();
		close(fds[0]);
		close(fds[1]);
		if (made) /* nothing left behind: the directory was ours, empty */
			(void)rmdir(local);
		return r;
	}
	close(fds[0]);
	r = get_stream(p, remote, true, fds[1]);
	close(fds[1]);
	t = wait_tar(pid);
	if (r == 0 && t != 0)
		return hutch_cli_fail(CP_EXIT_FILE, "extracting into '%s' failed (tar exit %d)",
		                      local, t);
	return r;
}

/* A file copied out is written beside its destination and put in its
 * place only when complete (issue 18 #2: truncating LOCAL first lost it
 * when the copy failed, and a killed copy left it cut short). The data
 * goes to an O_TMPFILE inode in LOCAL's directory, which has no name until
 * the copy is whole (a kill -9 leaves nothing); where the file system has
 * no O_TMPFILE, to a temporary name there, removed on failure. */
struct staged {
	int dirfd, fd;
	bool named; /* the fallback: tmp is a visible name */
	char tmp[64];
	const char *base;
};

static void staged_done(struct staged *sf)
{
	if (sf->named && sf->tmp[0])
		(void)unlinkat(sf->dirfd, sf->tmp, 0);
	sf->tmp[0] = '\0';
	if (sf->fd >= 0)
		close(sf->fd);
	if (sf->dirfd >= 0)
		close(sf->dirfd);
	sf->fd = sf->dirfd = -EBADF;
}

static void staged_tmp_name(struct staged *sf, unsigned n)
{
	snprintf(sf->tmp, sizeof(sf->tmp), ".hutch-cp-%d-%u", (int)getpid(), n);
}

static int staged_open(struct staged *sf, const char *local, const struct stat *old)
{
	const char *slash = strrchr(local, '/');
	char dir[PATH_MAX];

	*sf = (struct staged){ .dirfd = -EBADF, .fd = -EBADF, .base = slash ? slash + 1 : local };
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash == local ? 1 : slash - local) : 1,
	         slash ? local : ".");
	if (!*sf->base)
		return -EISDIR;
	sf->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (sf->dirfd < 0)
		return -errno;
	sf->fd = openat(sf->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	for (unsigned n = 0; sf->fd < 0 && n < 100 && errno != EACCES && errno != EROFS; n++) {
		staged_tmp_name(sf, n);
		sf->fd = openat(sf->dirfd, sf->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		sf->named = sf->fd >= 0;
		if (sf->fd < 0 && errno != EEXIST)
			break;
	}
	if (sf->fd < 0) {
		sf->tmp[0] = '\0';
		return -errno;
	}
	/* Replacing a file keeps its mode and, where we may, its owner. */
	if (old) {
		(void)fchmod(sf->fd, old->st_mode & 0777);
		if ((old->st_uid != geteuid() || old->st_gid != getegid()) &&
		    fchown(sf->fd, old->st_uid, old->st_gid) < 0)
			hutch_log(HUTCH_LOG_DEBUG,
			          "keep the owner of the file copied over, ignoring");
	}
	return 0;
}

static int staged_commit(struct staged *sf)
{
	char proc[64];
	int r = -EEXIST;

	if (!sf->named) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", sf->fd);
		for (unsigned n = 0; r == -EEXIST && n < 100; n++) {
			staged_tmp_name(sf, n);
			r = linkat(AT_FDCWD, proc, sf->dirfd, sf->tmp, AT_SYMLINK_FOLLOW) < 0
			            ? -errno
			            : 0;
		}
		if (r < 0) {
			sf->tmp[0] = '\0';
			return r;
		}
		sf->named = true;
	}
	if (renameat(sf->dirfd, sf->tmp, sf->dirfd, sf->base) < 0)
		return -errno; /* staged_done() removes the temporary name */
	sf->tmp[0] = '\0';
	return 0;
}

static int download(const struct hutch_paths *p, const char *remote, const char *local)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *real = NULL;
	char into[PATH_MAX * 2];
	struct staged sf;
	struct stat st;
	bool exists;
	int r;

	if (!strcmp(local, "-")) {
		r = get_stream(p, remote, false, 1);
		return r == -EISDIR ? download_dir(p, remote, local) : r;
	}
	if (stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
		const char *base = strrchr(remote, '/') ? strrchr(remote, '/') + 1 : remote;
		snprintf(into, sizeof(into), "%s/%s", local, *base ? base : ".");
		local = into;
	}
	exists = stat(local, &st) == 0;
	if (exists && !S_ISREG(st.st_mode)) {
		/* A device or FIFO (/dev/null, a pipe) is written to, not replaced. */
		fd = open(local, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return hutch_cli_fail(CP_EXIT_FILE, "cannot write '%s': %s", local,
			                      strerror(errno));
		r = get_stream(p, remote, false, fd);
		return r == -EISDIR ? download_dir(p, remote, local) : r;
	}
	/* A symbolic link's target is replaced, not the link. */
	if (exists && (real = realpath(local, NULL)))
		local = real;
	r = staged_open(&sf, local, exists ? &st : NULL);
	if (r < 0) {
		staged_done(&sf);
		return hutch_cli_fail(CP_EXIT_FILE, "cannot write '%s': %s", local, strerror(-r));
	}
	r = get_stream(p, remote, false, sf.fd);
	if (r == 0 && (r = staged_commit(&sf)) < 0) {
		staged_done(&sf);
		return hutch_cli_fail(CP_EXIT_FILE, "cannot put the copy in place as '%s': %s",
		                      local, strerror(-r));
	}
	staged_done(&sf);
	if (r == -EISDIR)
		return download_dir(p, remote, local);
	return r;
}

static int cmd_cp(struct hutch_cli_args *a)
{
	char id_src[HUTCH_ID_LEN + 1], id_dst[HUTCH_ID_LEN + 1];
	const char *rsrc = NULL, *rdst = NULL;
	struct hutch_paths p;
	bool src_remote, dst_remote;
	int r;

	max_bytes = a->max_bytes;
	if (a->npos != 2)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "give a source and a destination: hutch cp LOCAL ID:PATH "
		                      "or hutch cp [--max-bytes N] ID:PATH LOCAL");
	signal(SIGPIPE, SIG_IGN);
	src_remote = split_remote(a->pos[0], id_src, sizeof(id_src), &rsrc);
	dst_remote = split_remote(a->pos[1], id_dst, sizeof(id_dst), &rdst);
	if (src_remote == dst_remote)
		return hutch_cli_fail(
		        HUTCH_EXIT_USAGE,
		        "exactly one of '%s' and '%s' must be ID:PATH (a sandbox id, a colon, "
		        "a path in the sandbox)",
		        a->pos[0], a->pos[1]);
	if (max_bytes && dst_remote)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "--max-bytes bounds a copy out of a sandbox (ID:PATH LOCAL), "
		                      "not into one");
	if ((src_remote && !*rsrc) || (dst_remote && !*rdst))
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "empty path after 'ID:' in '%s'",
		                      src_remote ? a->pos[0] : a->pos[1]);
	r = hutch_cli_open_live(src_remote ? id_src : id_dst, &p);
	if (r)
		return r;
	return src_remote ? download(&p, rsrc, a->pos[1]) : upload(&p, a->pos[0], rdst);
}

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h). */
#define HELP_TEXTS(X) X(max_bytes, "stop a copy out of a sandbox that sends more than N bytes")
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt cp_opts[] = {
	{ .name = "max-bytes",
	  .kind = HUTCH_CLI_U64,
	  .offset = offsetof(struct hutch_cli_args, max_bytes),
	  .metavar = "N",
	  .range = HUTCH_CLI_RANGE_MAX_BYTES,
	  HELP(max_bytes) },
	{ .name = "" },
};

const struct hutch_cli_verb hutch_verb_cp = {
	.name = "cp",
	.synopsis = "LOCAL ID:PATH\n       hutch cp [--max-bytes N] ID:PATH LOCAL",
	.about = about,
	.opts = cp_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.max_pos = HUTCH_CLI_MANY,
	.run = cmd_cp,
};
