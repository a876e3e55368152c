/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch build FILE [-t NAME]: a declared environment made into a snapshot
 * (docs/snapshots.md "The builder"). The file (image/buildspec.c) names a
 * base image, files, copies from the host, commands and env; a sandbox of
 * the base is created as create makes one (never a warm pool's) and never
 * handed over (supervisor/sandbox.h), so its supervisor deletes it as soon
 * as this process ends, however it ends. Files and copies go in as hutch
 * cp sends them (PUT /files), commands run as exec runs them (exec.sock or POST /exec,
 * their output on our stderr), and POST /snapshot with the build's env
 * ends it. Then the sandbox is deleted (DELETE /) whatever happened.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "buildspec.h"
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "fdutil.h"
#include "image.h"
#include "options.h"
#include "sandbox.h"
#include "state.h"
#include "stream.h"
#include "util.h"
#include "verb-opts.h"
#include "verbs.h"

#define A(f) .offset = offsetof(struct hutch_cli_args, f)

/* The help texts of this file's option rows (HUTCH_CLI_POOL, args.h): of
 * verb-opts.h's, PROGRESS_OPT's only. */
#define HELP_TEXTS(X)                                                               \
	X(tag, "the snapshot's name (over the file's \"name\")")                    \
	X(json, "print {name, base, steps, bytes, layers, frozen_ms, duration_ms}") \
	VERB_HELP_progress(X)
HUTCH_CLI_POOL(help_pool, HELP_TEXTS);
#define HELP(id) HUTCH_CLI_HELP(help_pool, id)

static const struct hutch_cli_opt build_opts[] = {
	{ .name = "tag",
	  .short_name = 't',
	  .kind = HUTCH_CLI_STRING,
	  A(tag),
	  .metavar = "NAME",
	  HELP(tag) },
	{ .name = "json", .kind = HUTCH_CLI_FLAG, A(json), HELP(json) },
	PROGRESS_OPT,
	{ .name = "" },
};

struct build {
	struct hutch_buildspec spec;
	const char *name;
	char base[HUTCH_IMAGE_REF_MAX + 1];
	char dir[PATH_MAX]; /* where copies' relative sources are */
	size_t step, steps;
	struct hutch_paths p;
	bool quiet;
};

static void say(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct build *b, const char *fmt, ...)
{
	va_list ap;

	if (b->quiet)
		return;
	fprintf(stderr, "hutch: build %s [%zu/%zu] ", b->name, ++b->step, b->steps);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Standard input, at most max bytes (-EFBIG beyond). */
static ssize_t read_stdin(size_t max, char **ret)
{
	_cleanup_free_ char *buf = malloc(max + 2);
	ssize_t len;

	if (!buf)
		return -ENOMEM;
	len = hutch_read_all(0, buf, max + 1);
	if (len < 0)
		return len;
	if ((size_t)len > max)
		return -EFBIG;
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	return (ssize_t)len;
}

/* A Dockerfile (docker's habit): its first instruction, after comments
 * and blank lines, is FROM (or ARG, before a FROM). */
static bool looks_docker(const char *text)
{
	while (*text) {
		text += strspn(text, " \t\r\n");
		if (*text != '#')
			break;
		text += strcspn(text, "\n");
	}
	return !strncasecmp(text, "FROM ", 5) || !strncasecmp(text, "ARG ", 4);
}

/* FILE ("-": stdin) read and parsed; b->dir is its directory (stdin's:
 * the current one). */
static int load(struct build *b, const char *path)
{
	_cleanup_free_ char *text = NULL, *real = NULL;
	struct hutch_err err = { 0 };
	ssize_t n;

	if (!strcmp(path, "-")) {
		n = read_stdin(HUTCH_BUILDSPEC_MAX, &text);
		if (!getcwd(b->dir, sizeof(b->dir)))
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "getcwd: %s", strerror(errno));
	} else {
		real = realpath(path, NULL);
		n = real ? hutch_read_file_alloc_at(AT_FDCWD, real, HUTCH_BUILDSPEC_MAX, &text)
		         : -errno;
		if (n >= 0)
			snprintf(b->dir, sizeof(b->dir), "%.*s", (int)(strrchr(real, '/') - real),
			         real);
	}
	if (n == -ENOENT)
		return hutch_cli_fail(HUTCH_EXIT_NOT_FOUND, "no build file '%s'", path);
	if (n == -EFBIG)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "the build file '%s' has more than %u bytes: put big files "
		                      "beside it and copy them (\"copy\")",
		                      path, HUTCH_BUILDSPEC_MAX);
	/* A directory is the caller's slip (docker build takes one), not a
	 * failure of the system: usage, naming what to give. */
	if (n == -EISDIR)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "'%s' is a directory: give the build file (JSON) itself, "
		                      "hutch build DIR/FILE",
		                      path);
	if (n < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "read the build file '%s': %s", path,
		                      strerror((int)-n));
	if (hutch_buildspec_parse(text, (size_t)n, &b->spec, &err) < 0 && looks_docker(text))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "build file '%s' is a Dockerfile: hutch build takes JSON, "
		                      "{\"image\": FROM, \"workdir\": WORKDIR, \"env\": {ENV}, "
		                      "\"copy\": [{\"src\", \"dst\"}] as COPY, \"run\": [RUN] } "
		                      "(docs/snapshots.md \"The builder\")",
		                      path);
	if (err.code)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)), "build file '%s': %s",
		                      path, err.msg);
	return 0;
}

/* The name and the base: the command line's over the file's; the base an
 * image (not the host-derived root), the name free in the store. */
static int check(struct build *b, struct hutch_cli_args *a)
{
	_cleanup_(hutch_image_store_freep) struct hutch_image_store *s = NULL;
	struct hutch_err err = { 0 };
	int r;

	b->name = a->tag ? a->tag : b->spec.name;
	if (!b->name)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "give the snapshot's name: -t NAME, or \"name\" in the file");
	if (!hutch_image_name_is_valid(b->name))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "invalid snapshot name '%.64s': letters, digits and "
		                      "._:/@+- (not first), no '..'",
		                      b->name);
	if (!a->cfg->image[0] && !b->spec.image)
		return hutch_cli_fail(
		        HUTCH_EXIT_USAGE,
		        "give the base image: \"image\" in the file, or --image NAME");
	if (!a->cfg->image[0] &&
	    hutch_option_parse(hutch_option_find("image"), a->cfg, b->spec.image, &err) < 0)
		return hutch_cli_fail(HUTCH_EXIT_USAGE, "build file: 'image': %s", err.msg);
	if (!hutch_config_has_image(a->cfg))
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "a build cannot start from the host-derived root: it has "
		                      "no snapshots (no image to stack a layer on); base it on an "
		                      "image: hutch-default (hutch image build-default), or one "
		                      "of 'hutch image ls'");
	snprintf(b->base, sizeof(b->base), "%s", a->cfg->image);
	for (size_t i = 0; i < b->spec.ncopies; i++) {
		const char *src = b->spec.copies[i].src;
		char path[PATH_MAX * 2];
		struct stat st;

		snprintf(path, sizeof(path), "%s%s%s", src[0] == '/' ? "" : b->dir,
		         src[0] == '/' ? "" : "/", src);
		if (stat(path, &st) < 0)
			return hutch_cli_fail(errno == ENOENT ? HUTCH_EXIT_NOT_FOUND
			                                      : HUTCH_EXIT_FAILURE,
			                      "'copy' entry %zu: cannot read '%s': %s", i + 1, path,
			                      strerror(errno));
	}
	if ((r = hutch_cli_image_store_open(NULL, &s)))
		return r;
	if (hutch_image_name_free(s, b->name, &err) < 0)
		return hutch_cli_fail(hutch_errc_exit(hutch_err_class(&err)), "%s", err.msg);
	return 0;
}

/* A file's text into the sandbox (PUT /files, mode 644). */
static int put_file(struct build *b, const struct hutch_build_file *f)
{
	_cleanup_close_ int fd = memfd_create("hutch-build", MFD_CLOEXEC);
	size_t len = strlen(f->content);

	if (fd < 0 || hutch_write_all(fd, f->content, len) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "file '%s': %s", f->path,
		                      strerror(errno));
	return hutch_cli_cp_put(&b->p, f->path, fd, (int64_t)len, "644");
}

/* The commands' output goes to our stderr: stdout is the result's. */
static int run_cmd(struct build *b, const struct hutch_build_cmd *c, size_t i)
{
	char *argv[] = { "sh", "-c", c->command, NULL };
	struct hutch_cli_args ea = { 0 };
	_cleanup_close_ int saved = -EBADF;
	int r;

	for (size_t k = 0; k < b->spec.nenv; k++) {
		const char *nv = b->spec.env[k], *eq = strchr(nv, '=');

		if (hutch_cli_env_set(&ea.env, nv, (size_t)(eq - nv), eq + 1) < 0) {
			hutch_cli_env_done(&ea.env);
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
		}
	}
	ea.cwd = c->cwd ? c->cwd : b->spec.workdir;
	ea.timeout = c->timeout;
	(void)fflush(stdout);
	saved = fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (saved < 0 || dup3(2, 1, 0) < 0) { /* lint-fds: ok: our stdout, restored below */
		hutch_cli_env_done(&ea.env);
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "redirect stdout: %s", strerror(errno));
	}
	r = hutch_cli_stream_command(b->p.sock, argv, &ea, NULL);
	hutch_cli_env_done(&ea.env);
	(void)dup3(saved, 1, 0); /* lint-fds: ok: our stdout back */
	if (r)
		return hutch_cli_fail(
		        HUTCH_EXIT_SETUP,
		        "build command %zu/%zu exited %d (its output is above): %.200s", i + 1,
		        b->spec.nruns, r, c->command);
	return 0;
}

/* POST /snapshot {"name", "env"}: the answer, or an exit code. */
static int snapshot(struct build *b, cJSON **ret)
{
	_cleanup_cjson_ cJSON *body = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;
	cJSON *env;

	if (!body || !cJSON_AddStringToObject(body, "name", b->name) ||
	    !(env = cJSON_AddArrayToObject(body, "env")))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	for (size_t i = 0; i < b->spec.nenv; i++)
		cJSON_AddItemToArray(env, cJSON_CreateString(b->spec.env[i]));
	if (!(text = cJSON_PrintUnformatted(body)))
		return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
	return hutch_cli_call(b->p.sock, "POST", "/snapshot", text, 201, ret);
}

/* The steps in the cloud's order: workdir, files, copies, commands; then
 * the snapshot. */
static int steps(struct build *b, cJSON **ret)
{
	const struct hutch_buildspec *sp = &b->spec;
	const cJSON *bytes, *frozen;
	int r;

	if (sp->workdir) {
		_cleanup_cjson_ cJSON *body = cJSON_CreateObject(), *ans = NULL;
		_cleanup_free_ char *text = NULL;

		say(b, "workdir %s", sp->workdir);
		if (!body || !cJSON_AddStringToObject(body, "path", sp->workdir) ||
		    !(text = cJSON_PrintUnformatted(body)))
			return hutch_cli_fail(HUTCH_EXIT_FAILURE, "out of memory");
		if ((r = hutch_cli_call(b->p.sock, "POST", "/make_dir", text, 200, &ans)))
			return r;
	}
	for (size_t i = 0; i < sp->nfiles; i++) {
		say(b, "file %s", sp->files[i].path);
		if ((r = put_file(b, &sp->files[i])))
			return r;
	}
	for (size_t i = 0; i < sp->ncopies; i++) {
		const char *src = sp->copies[i].src;
		char path[PATH_MAX * 2];

		snprintf(path, sizeof(path), "%s%s%s", src[0] == '/' ? "" : b->dir,
		         src[0] == '/' ? "" : "/", src);
		say(b, "copy %s -> %s", src, sp->copies[i].dst);
		if ((r = hutch_cli_cp_in(&b->p, path, sp->copies[i].dst)))
			return r;
	}
	for (size_t i = 0; i < sp->nruns; i++) {
		say(b, "run %.200s", sp->runs[i].command);
		if ((r = run_cmd(b, &sp->runs[i], i)))
			return r;
	}
	say(b, "snapshot %s", b->name);
	if ((r = snapshot(b, ret)))
		return r;
	bytes = cJSON_GetObjectItemCaseSensitive(*ret, "bytes");
	frozen = cJSON_GetObjectItemCaseSensitive(*ret, "frozen_ms");
	if (!b->quiet)
		fprintf(stderr, "hutch: built %s: %.0f bytes of changes over %s, frozen %.1f ms\n",
		        b->name, cJSON_GetNumberValue(bytes), b->base,
		        cJSON_GetNumberValue(frozen));
	return 0;
}

/* The build sandbox deleted now (its processes dead on return), then the
 * hand-over dropped: the supervisor would delete it anyway. */
static void remove_sandbox(struct hutch_created *c)
{
	struct hutch_http_resp resp = { 0 };
	struct hutch_err err = { 0 };

	if (hutch_client_request(c->paths.sock, "DELETE", "/", NULL, 0, &resp, &err) >= 0)
		hutch_http_resp_done(&resp);
	hutch_created_drop(c);
}

static void print_result(const struct hutch_cli_args *a, struct build *b, cJSON *ans, double t0)
{
	_cleanup_cjson_ cJSON *o = cJSON_CreateObject();
	_cleanup_free_ char *t = NULL;
	static const char *const keep[] = { "bytes", "layers", "frozen_ms" };

	if (!a->json || !o) {
		printf("%s\n", b->name);
		return;
	}
	cJSON_AddStringToObject(o, "name", b->name);
	cJSON_AddStringToObject(o, "base", b->base);
	cJSON_AddNumberToObject(o, "steps", (double)b->steps);
	for (size_t i = 0; i < ELEMENTSOF(keep); i++)
		cJSON_AddNumberToObject(
		        o, keep[i],
		        cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ans, keep[i])));
	cJSON_AddNumberToObject(o, "duration_ms", (hutch_now_mono_sec() - t0) * 1e3);
	t = cJSON_PrintUnformatted(o);
	printf("%s\n", t ? t : "{}");
}

static int cmd_build(struct hutch_cli_args *a)
{
	struct build b = { 0 };
	struct hutch_created c = { .handover_fd = -EBADF };
	_cleanup_cjson_ cJSON *ans = NULL;
	double t0 = hutch_now_mono_sec();
	sigset_t set;
	int r;

	if (a->npos != 1)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "give one build file: hutch build FILE [-t NAME] (FILE '-': "
		                      "standard input)");
	b.quiet = a->progress && !strcmp(a->progress, "never");
	if ((r = load(&b, a->pos[0])) || (r = check(&b, a))) {
		hutch_buildspec_done(&b.spec);
		return r;
	}
	b.steps = 2 + !!b.spec.workdir + b.spec.nfiles + b.spec.ncopies + b.spec.nruns;
	a->cfg->no_pool = true;
	say(&b, "sandbox from %s", b.base);
	r = hutch_cli_create_sandbox(a->cfg, a->progress ? a->progress : "never", &c);
	if (!r) {
		/* Not handed over: an interrupt ends this process, and its
		 * supervisor then deletes the sandbox (as after SIGKILL). */
		sigemptyset(&set);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGHUP);
		sigaddset(&set, SIGQUIT);
		(void)sigprocmask(SIG_UNBLOCK, &set, NULL);
		b.p = c.paths;
		r = steps(&b, &ans);
		remove_sandbox(&c);
	}
	if (r && c.id[0])
		fprintf(stderr,
		        "hutch: build %s failed: no snapshot made, the build sandbox %s deleted\n",
		        b.name, c.id);
	else
		print_result(a, &b, ans, t0);
	hutch_buildspec_done(&b.spec);
	return r;
}

const struct hutch_cli_verb hutch_verb_build = {
	.name = "build",
	.synopsis = "FILE [-t NAME] [--json] [OPTIONS]",
	.about = "Build a snapshot from a build file (JSON: \"image\", \"name\", \"workdir\",\n"
	         "\"env\", \"files\", \"copy\", \"run\"; docs/snapshots.md \"The builder\"): a\n"
	         "sandbox of the base image gets the files and the copies from the host, runs\n"
	         "the commands (as appuser, with env; one failing ends the build, exit 71) and\n"
	         "ends as snapshot NAME, whose Env has the build's env. The sandbox options are\n"
	         "for the build sandbox (--network all for downloads); it is deleted whatever\n"
	         "happens, even if this process is killed. Progress and the commands' output\n"
	         "on stderr; prints NAME. 'hutch create --snapshot NAME' starts from it.\n",
	.opts = build_opts,
	.help_pool = HUTCH_CLI_POOL_OF(help_pool),
	.sandbox_opts = true,
	.max_pos = 1,
	.run = cmd_build,
};
