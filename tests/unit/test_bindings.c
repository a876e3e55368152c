/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for header bindings' pure parts: the HOST:HEADER=VALUE
 * syntax and its sources (netpolicy/binding.c), the wiped-on-fork pages,
 * and the request stream rewrite (netpolicy/httpreq.c): the header set on
 * every request of a keep-alive stream, replaced not doubled, bodies
 * passed through by length and chunks, framing ambiguities refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "httpreq-internal.h"
#include "mitm-internal.h"
#include "netpolicy.h"

static int parse(const char *spec, struct hutch_net_binding *b, struct hutch_err *err)
{
	memset(err, 0, sizeof(*err));
	return hutch_net_binding_parse(spec, b, err);
}

static void test_binding_sources(void **state)
{
	struct hutch_net_binding b;
	struct hutch_err err;
	int fds[2];
	char spec[64];

	(void)state;
	setenv("HB_TEST", "tok3n", 1);
	assert_int_equal(
	        parse("Api.Example.com.:Authorization=Bearer {secret}@env:HB_TEST", &b, &err), 0);
	assert_string_equal(b.host, "api.example.com");
	assert_string_equal(b.header, "Authorization");
	assert_string_equal(b.value, "Bearer tok3n");
	assert_false(b.literal);
	assert_int_equal(parse("a.example:X-Key=lit", &b, &err), 0);
	assert_true(b.literal);
	assert_string_equal(b.value, "lit");
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(write(fds[1], "from-fd\n", 8), 8);
	close(fds[1]);
	snprintf(spec, sizeof(spec), "a.example:X-Key=@fd:%d", fds[0]);
	assert_int_equal(parse(spec, &b, &err), 0);
	assert_string_equal(b.value, "from-fd");
	unsetenv("HB_TEST");
}

static void test_binding_refusals(void **state)
{
	static const struct {
		const char *spec, *says;
	} bad[] = {
		{ ":A=x", "no host" },
		{ "*.example.com:A=x", "wildcards" },
		{ "https://a.example:A=x", "not a URL" },
		{ "10.0.0.1:A=x", "DNS name" },
		{ "localhost:A=x", "DNS name" },
		{ "a.example:Bad Name=x", "header name" },
		{ "a.example:Transfer-Encoding=x", "cannot be bound" },
		{ "a.example:A=", "empty value" },
		{ "a.example:A= x", "white space" },
		{ "a.example:A=Bearer {secret}", "source" },
		{ "a.example:A={secret}{secret}@env:PATH", "once" },
		{ "a.example:A=@env:HB_NOT_SET_ANYWHERE", "HB_NOT_SET_ANYWHERE" },
		{ "a.example:A=@fd:1", "3 or more" },
		{ "a.example", "HOST:HEADER=VALUE" },
	};
	struct hutch_net_binding b;
	struct hutch_err err;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = parse(bad[i].spec, &b, &err);
		if (r >= 0 || !strstr(err.msg, bad[i].says))
			fail_msg("'%s': %d '%s'", bad[i].spec, r, err.msg);
	}
	setenv("HB_CRLF", "a\r\nX-Evil: 1", 1);
	assert_true(parse("a.example:A=@env:HB_CRLF", &b, &err) < 0);
	assert_non_null(strstr(err.msg, "control character"));
	assert_null(strstr(err.msg, "X-Evil"));
	unsetenv("HB_CRLF");
}

/* After hutch_net_bindings_protect(), a child sees zeros. */
static void test_bindings_wiped_on_fork(void **state)
{
	struct hutch_net_bindings *b = NULL;
	struct hutch_net_binding one;
	struct hutch_err err;
	pid_t pid;
	int status;

	(void)state;
	assert_int_equal(hutch_net_bindings_new(&b), 0);
	assert_int_equal(parse("a.example:A=s3cr3t", &one, &err), 0);
	assert_int_equal(hutch_net_bindings_add(b, &one, &err), 0);
	assert_true(hutch_net_bindings_add(b, &one, &err) < 0); /* twice */
	assert_true(hutch_net_bindings_protect(b) >= 0);
	pid = fork();
	if (pid == 0)
		_exit(b->n == 0 && b->b[0].value[0] == '\0' ? 0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_string_equal(b->b[0].value, "s3cr3t"); /* the parent keeps it */
	hutch_net_bindings_forget(b);
	assert_string_equal(b->b[0].value, "");
	hutch_net_bindings_free(b);
}

/* OpenSSL through its dlopen()ed table (ssl-internal.h): one sandbox
 * CA's certificate for a bound host verifies at a client that trusts that
 * CA (a second mitm's upstream context, given the first's CA as its
 * upstream CA file), and bytes cross the TLS connection both ways. */
static void test_mitm_handshake(void **state)
{
	struct hutch_net_bindings *b = NULL;
	struct hutch_net_binding one;
	struct mitm *server = NULL, *client = NULL;
	struct hutch_err err = { 0 };
	char ca[] = "/tmp/hutch-test-ca-XXXXXX", buf[8] = { 0 };
	int sv[2], fd, status;
	SSL *c;
	pid_t pid;

	(void)state;
	assert_int_equal(hutch_net_bindings_new(&b), 0);
	assert_int_equal(parse("api.example:A=s3cr3t", &one, &err), 0);
	assert_int_equal(hutch_net_bindings_add(b, &one, &err), 0);
	assert_int_equal(mitm_new(b, NULL, &server, &err), 0);
	fd = mkstemp(ca);
	assert_true(fd >= 0);
	assert_true(write(fd, mitm_ca_pem(server), strlen(mitm_ca_pem(server))) > 0);
	close(fd);
	assert_int_equal(mitm_new(b, ca, &client, &err), 0);
	unlink(ca);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid = fork();
	if (pid == 0) {
		SSL *s = SSL_new(mitm_server_ctx(server, "api.example"));

		close(sv[0]);
		if (!s || SSL_set_fd(s, sv[1]) != 1)
			_exit(2);
		SSL_set_accept_state(s);
		_exit(SSL_do_handshake(s) == 1 && SSL_write(s, "hello", 5) == 5 ? 0 : 3);
	}
	close(sv[1]);
	c = SSL_new(mitm_client_ctx(client));
	assert_non_null(c);
	assert_int_equal(SSL_set_fd(c, sv[0]), 1);
	assert_int_equal(SSL_set_tlsext_host_name(c, "api.example"), 1);
	assert_int_equal(SSL_set1_host(c, "api.example"), 1);
	SSL_set_connect_state(c);
	assert_int_equal(SSL_do_handshake(c), 1);
	assert_int_equal(SSL_get_verify_result(c), X509_V_OK);
	assert_int_equal(SSL_read(c, buf, sizeof(buf) - 1), 5);
	assert_string_equal(buf, "hello");
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	SSL_free(c);
	close(sv[0]);
	mitm_free(client);
	mitm_free(server);
	hutch_net_bindings_free(b);
}

static const struct httpreq_header hdrs[] = { { "Authorization", "Bearer S", 8 } };

/* Feeds all of in (in pieces of step bytes); returns the output or NULL
 * if refused. */
static char *rewrite(const char *in, size_t step, const char **why)
{
	static struct httpreq r;
	size_t cap = HTTPREQ_HEAD_MAX + 4096 + 65536, len = strlen(in), off = 0, out_len = 0;
	char *out = calloc(1, cap + 1);

	httpreq_init(&r, hdrs, 1);
	while (off < len) {
		size_t n = step && len - off > step ? step : len - off;
		long k = httpreq_feed(&r, (const uint8_t *)in + off, n, (uint8_t *)out, cap,
		                      &out_len);
		if (k < 0) {
			*why = r.why;
			free(out);
			return NULL;
		}
		off += (size_t)k;
	}
	return out;
}

static void test_httpreq_rewrite(void **state)
{
	const char *in = "GET /a HTTP/1.1\r\nHost: h\r\nauthorization: forged\r\n\r\n"
	                 "POST /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
	                 "PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	                 "3;x\r\nabc\r\n0\r\nAuthorization: t\r\nX-T: 1\r\n\r\n";
	const char *want =
	        "GET /a HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer S\r\n\r\n"
	        "POST /b HTTP/1.1\r\nContent-Length: 5\r\nAuthorization: Bearer S\r\n\r\n"
	        "hello"
	        "PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	        "Authorization: Bearer S\r\n\r\n3;x\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
	const char *why = NULL;

	(void)state;
	for (size_t step = 0; step < 8; step++) {
		char *out = rewrite(in, step, &why);
		assert_non_null(out);
		assert_string_equal(out, want);
		free(out);
	}
}

static void test_httpreq_refusals(void **state)
{
	static const char *const bad[] = {
		"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", /* obs-fold */
		"GET / HTTP/1.1\nHost: h\r\n\r\n",      /* bare LF */
		"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"GET / HTTP/2.0\r\n\r\n",
		"GET /\r\n\r\n",
		"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
		"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
	};
	const char *why = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out = rewrite(bad[i], 0, &why);
		if (out)
			fail_msg("accepted: %s", bad[i]);
		assert_non_null(why);
	}
}

static void test_httpreq_head_bound(void **state)
{
	size_t n = HTTPREQ_HEAD_MAX + 100;
	char *big = malloc(n + 1);
	const char *why = NULL;

	(void)state;
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	memset(big + 19, 'a', n - 19);
	big[n] = '\0';
	assert_null(rewrite(big, 4096, &why));
	assert_non_null(strstr(why, "32 KiB"));
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_binding_sources),
		cmocka_unit_test(test_binding_refusals),
		cmocka_unit_test(test_bindings_wiped_on_fork),
		cmocka_unit_test(test_mitm_handshake),
		cmocka_unit_test(test_httpreq_rewrite),
		cmocka_unit_test(test_httpreq_refusals),
		cmocka_unit_test(test_httpreq_head_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
