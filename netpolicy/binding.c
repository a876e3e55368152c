/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Header bindings (--header-binding, the cloud's header_bindings): a header
 * the supervisor's proxy sets on every HTTPS request to one host, with a
 * value the sandbox never sees. This file parses and checks them, reads
 * their secrets from the caller's environment, files or fds, and keeps
 * them in pages of their own: locked in memory where the host allows it,
 * never in a core dump, and wiped in any child forked after
 * hutch_net_bindings_protect() (init and so every command gets zeros).
 *
 * No message ever quotes a value: errors name the entry as HOST:HEADER.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cleanup.h"
#include "hostname-internal.h"
#include "netpolicy.h"
#include "util.h"

#define SECRET_MARK "{secret}"

/* Headers that frame or route the request: setting them would let a
 * binding break the HTTP framing the proxy relies on. Arrays, not
 * pointers: nothing for the loader to relocate at every start of every
 * hutch process (issue 31: RELRO pages). */
static const char refused_headers[][sizeof("transfer-encoding")] = {
	"host", "content-length", "transfer-encoding", "connection", "upgrade", "keep-alive",
	"te",   "trailer",        "proxy-connection",  "expect",
};

int hutch_net_bindings_new(struct hutch_net_bindings **ret)
{
	struct hutch_net_bindings *b =
	        mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (b == MAP_FAILED)
		return -errno;
	(void)madvise(b, sizeof(*b), MADV_DONTDUMP);
	b->n = 0;
	*ret = b;
	return 0;
}

void hutch_net_bindings_free(struct hutch_net_bindings *b)
{
	if (!b)
		return;
	explicit_bzero(b, sizeof(*b));
	(void)munlock(b, sizeof(*b));
	(void)munmap(b, sizeof(*b));
}

int hutch_net_bindings_protect(struct hutch_net_bindings *b)
{
	bool locked;

	if (!b)
		return 0;
	/* Without RLIMIT_MEMLOCK room the pages may be swapped: say so, go on. */
	locked = mlock(b, sizeof(*b)) == 0;
	if (madvise(b, sizeof(*b), MADV_WIPEONFORK) < 0)
		return -errno; /* before 4.14: the caller refuses */
	return locked ? 0 : 1;
}

void hutch_net_bindings_forget(struct hutch_net_bindings *b)
{
	for (size_t i = 0; b && i < b->n; i++) {
		explicit_bzero(b->b[i].value, sizeof(b->b[i].value));
		b->b[i].value_len = 0;
	}
}

static bool header_char_ok(unsigned char c)
{
	/* RFC 9110 token characters. */
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

int hutch_net_binding_check(const char *host, const char *header, const char *value,
                            size_t value_len, struct hutch_err *err)
{
	char norm[HUTCH_NET_HOST_MAX + 1];
	const char *h = host ? host : "", *hd = header ? header : "";
	size_t hl = strlen(h), hdl = strlen(hd);

	if (hl == 0)
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid header binding ':%.64s': no host (give "
		        "HOST:HEADER=VALUE, e.g. api.github.com:Authorization=@env:TOKEN)",
		        hd);
	if (strstr(h, "://"))
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid header binding '%.128s:%.64s': give a host name, not a "
		        "URL (drop the scheme)",
		        h, hd);
	if (strchr(h, '*'))
		return hutch_err_set(err, -EINVAL,
		                     "invalid header binding '%.128s:%.64s': wildcards are not "
		                     "allowed, bind each host",
		                     h, hd);
	if (strchr(h, '/') || strchr(h, ':') || hl > HUTCH_NET_HOST_MAX ||
	    hostname_normalize(h, hl, norm) <= 0 || !strchr(norm, '.') ||
	    strspn(norm, "0123456789.") == strlen(norm))
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid header binding '%.128s:%.64s': the host must be a DNS "
		        "name with a dot (no port, path or IP address)",
		        h, hd);
	if (hdl == 0 || hdl > HUTCH_NET_HEADER_MAX)
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid header binding '%.128s:%.64s': the header name must have "
		        "1 to %d characters",
		        h, hd, HUTCH_NET_HEADER_MAX);
	for (size_t i = 0; i < hdl; i++)
		if (!header_char_ok((unsigned char)hd[i]))
			return hutch_err_set(
			        err, -EINVAL,
			        "invalid header binding '%.128s:%.64s': a header name is "
			        "letters, digits and !#$%%&'*+-.^_`|~ only",
			        h, hd);
	for (size_t i = 0; i < ELEMENTSOF(refused_headers); i++)
		if (!strcasecmp(hd, refused_headers[i]))
			return hutch_err_set(
			        err, -EINVAL,
			        "invalid header binding '%.128s:%.64s': %s frames or routes "
			        "the request and cannot be bound",
			        h, hd, hd);
	if (!value || value_len == 0)
		return hutch_err_set(err, -EINVAL,
		                     "invalid header binding '%.128s:%.64s': empty value", h, hd);
	if (value_len > HUTCH_NET_BINDING_VALUE_MAX)
		return hutch_err_set(
		        err, -E2BIG,
		        "invalid header binding '%.128s:%.64s': the value is longer than "
		        "%d bytes",
		        h, hd, HUTCH_NET_BINDING_VALUE_MAX);
	for (size_t i = 0; i < value_len; i++) {
		unsigned char c = (unsigned char)value[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return hutch_err_set(
			        err, -EINVAL,
			        "invalid header binding '%.128s:%.64s': the value holds a "
			        "control character (CR, LF, NUL, ...)",
			        h, hd);
	}
	if (value[0] == ' ' || value[0] == '\t' || value[value_len - 1] == ' ' ||
	    value[value_len - 1] == '\t')
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid header binding '%.128s:%.64s': the value starts or ends "
		        "with white space",
		        h, hd);
	return 0;
}

/* Reads at most max bytes of fd into buf; -E2BIG if there is more. */
static ssize_t read_bounded(int fd, char *buf, size_t max)
{
	size_t n = 0;

	for (;;) {
		ssize_t k = read(fd, buf + n, max + 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return (ssize_t)n;
		n += (size_t)k;
		if (n > max)
			return -E2BIG;
	}
}

/* The secret named by src ("env:NAME", "file:PATH" or "fd:N") into buf
 * (max bytes); one trailing newline of a file or fd is dropped. Errors
 * start with what (never the value). */
int hutch_secret_read(const char *src, const char *what, char *buf, size_t max, size_t *ret_len,
                      struct hutch_err *err)
{
	ssize_t n;
	int fd = -1;
	uint64_t v;

	if (!strncmp(src, "env:", 4)) {
		const char *e = getenv(src + 4);
		size_t l = e ? strlen(e) : 0;
		if (!src[4] || !e || !*e)
			return hutch_err_set(err, -ENOENT,
			                     "%s: environment variable '%.64s' is not set or empty",
			                     what, src + 4);
		if (l > max)
			return hutch_err_set(err, -E2BIG, "%s: the value is longer than %zu bytes",
			                     what, max);
		memcpy(buf, e, l);
		*ret_len = l;
		return 0;
	}
	if (!strncmp(src, "file:", 5)) {
		fd = open(src + 5, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			return hutch_err_set_errno(err, -errno, "%s: open '%.128s'", what, src + 5);
	} else if (!strncmp(src, "fd:", 3)) {
		if (hutch_parse_u64(src + 3, 3, 1 << 20, &v) < 0)
			return hutch_err_set(err, -EINVAL,
			                     "%s: '@%.32s' is not an fd number of 3 or more", what,
			                     src);
		fd = (int)v;
	} else {
		return hutch_err_set(err, -EINVAL,
		                     "%s: unknown source '@%.32s' (use @env:NAME, @file:PATH or "
		                     "@fd:N)",
		                     what, src);
	}
	n = read_bounded(fd, buf, max);
	close(fd);
	if (n < 0)
		return hutch_err_set_errno(err, (int)n, "%s: read '@%.128s'", what, src);
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	*ret_len = (size_t)n;
	return 0;
}

/* Finds where the source of a value starts ("@env:", "@file:", "@fd:"), or
 * NULL for a literal value. */
static const char *find_source(const char *value)
{
	static const char *const marks[] = { "@env:", "@file:", "@fd:" };
	const char *best = NULL;

	for (size_t i = 0; i < ELEMENTSOF(marks); i++)
		for (const char *p = strstr(value, marks[i]); p; p = strstr(p + 1, marks[i]))
			if (!best || p > best)
				best = p;
	return best;
}

/* Builds ret->value from a template (with one {secret}, or "" for the
 * secret alone) and the secret. */
static int render(struct hutch_net_binding *ret, const char *tmpl, size_t tlen, const char *secret,
                  size_t slen, struct hutch_err *err)
{
	const char *mark = tlen ? memmem(tmpl, tlen, SECRET_MARK, strlen(SECRET_MARK)) : NULL;
	size_t pre, post, total;

	if (tlen && (!mark || memmem(mark + 1, tlen - (size_t)(mark + 1 - tmpl), SECRET_MARK,
	                             strlen(SECRET_MARK))))
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid header binding '%.128s:%.64s': a template before '@' must "
		        "hold {secret} once, e.g. 'Bearer {secret}@env:TOKEN'",
		        ret->host, ret->header);
	pre = mark ? (size_t)(mark - tmpl) : 0;
	post = mark ? tlen - pre - strlen(SECRET_MARK) : 0;
	total = pre + slen + post;
	if (total > HUTCH_NET_BINDING_VALUE_MAX)
		return hutch_err_set(
		        err, -E2BIG,
		        "invalid header binding '%.128s:%.64s': the value is longer than "
		        "%d bytes",
		        ret->host, ret->header, HUTCH_NET_BINDING_VALUE_MAX);
	memcpy(ret->value, tmpl, pre);
	memcpy(ret->value + pre, secret, slen);
	memcpy(ret->value + pre + slen, mark ? mark + strlen(SECRET_MARK) : "", post);
	ret->value[total] = '\0';
	ret->value_len = total;
	return 0;
}

int hutch_net_binding_parse(const char *spec, struct hutch_net_binding *ret, struct hutch_err *err)
{
	const char *colon = spec ? strchr(spec, ':') : NULL, *eq, *src;
	char *secret = ret->value; /* read in place, then rendered over a copy */
	char *tmp = NULL;
	size_t hl, hdl, slen = 0;
	int r;

	memset(ret, 0, offsetof(struct hutch_net_binding, value));
	/* A scheme ("https://host:...") has its colon first: say so, quoting
	 * only what comes before '=' (never a value). */
	eq = spec ? strchr(spec, '=') : NULL;
	if (spec && strstr(spec, "://") && (!eq || strstr(spec, "://") < eq))
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid header binding '%.*s': give a host name, not a URL "
		        "(drop the scheme)",
		        (int)(eq ? (size_t)(eq - spec) > 128 ? 128 : (size_t)(eq - spec) : 0),
		        spec);
	eq = colon ? strchr(colon, '=') : NULL;
	if (!colon || !eq)
		return hutch_err_set(err, -EINVAL,
		                     "invalid header binding: give HOST:HEADER=VALUE, e.g. "
		                     "api.github.com:Authorization=@env:GITHUB_TOKEN");
	hl = (size_t)(colon - spec);
	hdl = (size_t)(eq - colon - 1);
	if (hl > HUTCH_NET_HOST_MAX || hdl > HUTCH_NET_HEADER_MAX)
		return hutch_err_set(
		        err, -EINVAL,
		        "invalid header binding '%.64s...': host or header name too long", spec);
	memcpy(ret->host, spec, hl);
	memcpy(ret->header, colon + 1, hdl);
	/* The checks of the names come first, with a stand-in value. */
	r = hutch_net_binding_check(ret->host, ret->header, "x", 1, err);
	if (r < 0)
		return r;
	(void)hostname_normalize(ret->host, hl, ret->host);
	src = find_source(eq + 1);
	if (!src) {
		ret->literal = true;
		if (strstr(eq + 1, SECRET_MARK))
			return hutch_err_set(
			        err, -EINVAL,
			        "invalid header binding '%.128s:%.64s': {secret} needs a "
			        "source after it (@env:NAME, @file:PATH or @fd:N)",
			        ret->host, ret->header);
		slen = strlen(eq + 1);
		if (slen > HUTCH_NET_BINDING_VALUE_MAX)
			return hutch_err_set(
			        err, -E2BIG,
			        "invalid header binding '%.128s:%.64s': the value is longer "
			        "than %d bytes",
			        ret->host, ret->header, HUTCH_NET_BINDING_VALUE_MAX);
		memcpy(ret->value, eq + 1, slen + 1);
		ret->value_len = slen;
	} else {
		char what[256];
		snprintf(what, sizeof(what), "header binding '%.128s:%.64s'", ret->host,
		         ret->header);
		r = hutch_secret_read(src + 1, what, secret, HUTCH_NET_BINDING_VALUE_MAX, &slen,
		                      err);
		if (r < 0)
			return r;
		tmp = malloc(slen + 1);
		if (!tmp) {
			explicit_bzero(secret, slen);
			return hutch_err_set(err, -ENOMEM, "allocate a header binding");
		}
		memcpy(tmp, secret, slen);
		r = render(ret, eq + 1, (size_t)(src - eq - 1), tmp, slen, err);
		explicit_bzero(tmp, slen);
		free(tmp);
		if (r < 0) {
			explicit_bzero(ret->value, sizeof(ret->value));
			return r;
		}
	}
	r = hutch_net_binding_check(ret->host, ret->header, ret->value, ret->value_len, err);
	if (r < 0)
		explicit_bzero(ret->value, sizeof(ret->value));
	return r;
}

int hutch_net_bindings_add(struct hutch_net_bindings *b, const struct hutch_net_binding *one,
                           struct hutch_err *err)
{
	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->b[i].host, one->host) && !strcasecmp(b->b[i].header, one->header))
			return hutch_err_set(err, -EEXIST,
			                     "header binding '%.128s:%.64s' is given twice",
			                     one->host, one->header);
	if (b->n >= HUTCH_NET_BINDINGS_MAX)
		return hutch_err_set(err, -E2BIG, "too many header bindings: at most %d",
		                     HUTCH_NET_BINDINGS_MAX);
	b->b[b->n++] = *one;
	return 0;
}

bool hutch_net_bindings_has_host(const struct hutch_net_bindings *b, const char *host)
{
	for (size_t i = 0; b && i < b->n; i++)
		if (!strcmp(b->b[i].host, host))
			return true;
	return false;
}
