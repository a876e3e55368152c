/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Intercepted connections (proxy-internal.h, C_MITM): a bound host's TLS
 * terminated on both sides. The upstream handshake comes first and must
 * verify (certificate chain and host name) or the client's connection is
 * reset and the refusal recorded: nothing is ever forwarded to an
 * unverified server. Then the client's handshake, answered with the
 * sandbox CA's certificate for the host (its ClientHello, already read by
 * proxy.c, is handed to OpenSSL through a memory BIO), then HTTP/1.1 both
 * ways: requests through the parser of httpreq.c, which sets the bound
 * headers on each, responses as they come.
 *
 * One non-blocking pump moves whatever can move and derives the epoll
 * interest of each socket from what its TLS object last waited for.
 * Memory per connection: the parser (32 KiB), one TLS record of input
 * each way, and the output towards upstream (a head plus the bindings,
 * plus 64 KiB).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "httpreq-internal.h"
#include "mitm-internal.h"
#include "proxy-internal.h"
#include "util.h"

#define HANDSHAKE_DEADLINE_MS 10000
#define REC                   (16u << 10)

struct mitm_conn {
	SSL *down, *up; /* towards the sandbox's client; towards upstream */
	BIO *hello;     /* down's read BIO while the ClientHello is read */
	bool up_ok, down_ok, c_eof, s_eof;
	uint32_t cwant, swant;
	struct httpreq_header hdrs[HUTCH_NET_BINDINGS_MAX];
	size_t in_len, in_off;            /* client plaintext not yet parsed */
	size_t out_len, out_off, out_cap; /* parsed, towards upstream */
	size_t sc_len, sc_off;            /* upstream plaintext towards the client */
	uint8_t *out;
	uint8_t in[REC], sc[REC];
	struct httpreq req;
	enum mitm_verdict end; /* set once: what proxy.c is to do */
};

void mitm_conn_free(struct conn *c)
{
	struct mitm_conn *m = c->m;

	if (!m)
		return;
	SSL_free(m->down); /* frees its BIOs, the hello BIO included */
	SSL_free(m->up);
	if (m->out)
		explicit_bzero(m->out, m->out_cap); /* rewritten heads: the secrets */
	free(m->out);
	explicit_bzero(m, sizeof(*m));
	free(m);
	c->m = NULL;
}

/* The connection is finished: proxy.c closes it (reset: with a reset). */
static void end(struct conn *c, bool reset)
{
	if (c->m->end == MITM_GOING)
		c->m->end = reset ? MITM_RESET : MITM_CLOSE;
}

/* Record why the connection is refused, and end it with a reset. */
#define refuse(c, ...)                                                                  \
	do {                                                                            \
		refusals_verdict((c)->p->refusals, &(c)->v, "tls", (c)->sni, &(c)->dst, \
		                 "tls_failed", __VA_ARGS__);                            \
		end(c, true);                                                           \
	} while (0)

/* What an SSL call that returned r <= 0 waits for: adds to *want; false
 * if the connection is finished (error or end of stream, see *eof). */
static bool ssl_wait(SSL *ssl, int r, uint32_t *want, bool *eof)
{
	switch (SSL_get_error(ssl, r)) {
	case SSL_ERROR_WANT_READ:
		*want |= EPOLLIN;
		return true;
	case SSL_ERROR_WANT_WRITE:
		*want |= EPOLLOUT;
		return true;
	case SSL_ERROR_ZERO_RETURN:
		if (eof)
			*eof = true;
		return eof != NULL;
	default:
		return false;
	}
}

static void refuse_upstream(struct conn *c)
{
	long v = SSL_get_verify_result(c->m->up);
	char buf[120];

	if (v != X509_V_OK) {
		refuse(c, "upstream certificate of %s does not verify: %s", c->sni,
		       X509_verify_cert_error_string(v));
		return;
	}
	ERR_error_string_n(ERR_peek_last_error(), buf, sizeof(buf));
	ERR_clear_error();
	refuse(c, "TLS with upstream %s failed: %s", c->sni, buf);
}

/* Once the ClientHello has been read from the memory BIO, the socket. */
static bool down_to_socket(struct conn *c)
{
	struct mitm_conn *m = c->m;
	BIO *b;

	if (!m->hello || BIO_ctrl_pending(m->hello) > 0)
		return true;
	b = BIO_new_socket(c->cfd, BIO_NOCLOSE);
	if (!b)
		return false;
	SSL_set0_rbio(m->down, b); /* frees the memory BIO */
	m->hello = NULL;
	return true;
}

/* The handshakes, upstream first. True if both are done. */
static bool handshakes(struct conn *c)
{
	struct mitm_conn *m = c->m;
	int r;

	if (!m->up_ok) {
		r = SSL_do_handshake(m->up);
		if (r != 1) {
			if (!ssl_wait(m->up, r, &m->swant, NULL))
				refuse_upstream(c);
			return false;
		}
		m->up_ok = true;
	}
	if (!m->down_ok) {
		if (!down_to_socket(c)) {
			end(c, true);
			return false;
		}
		r = SSL_do_handshake(m->down);
		if (r != 1) {
			if (!ssl_wait(m->down, r, &m->cwant, NULL)) {
				ERR_clear_error();
				refuse(c,
				       "TLS with the sandbox's client for %s failed (does it "
				       "trust the sandbox CA?)",
				       c->sni);
			}
			return false;
		}
		(void)down_to_socket(c);
		m->down_ok = true;
		c->deadline_ms = 0;
	}
	return true;
}

/* Client to upstream. Returns 1 on progress, 0 if blocked, -1 if closed. */
static int pump_up(struct conn *c)
{
	struct mitm_conn *m = c->m;
	int r;

	if (m->out_off < m->out_len) {
		r = SSL_write(m->up, m->out + m->out_off, (int)(m->out_len - m->out_off));
		if (r <= 0)
			return ssl_wait(m->up, r, &m->swant, NULL) ? 0 : -1;
		m->out_off += (size_t)r;
		if (m->out_off == m->out_len)
			m->out_off = m->out_len = 0;
		return 1;
	}
	if (m->in_off < m->in_len) {
		long k = httpreq_feed(&m->req, m->in + m->in_off, m->in_len - m->in_off, m->out,
		                      m->out_cap, &m->out_len);
		if (k < 0) {
			static const char answer[] =
			        "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n"
			        "Content-Length: 0\r\n\r\n";
			/* Answered and closed in order (a reset would drop the
			 * answer), and recorded. */
			(void)SSL_write(m->down, answer, sizeof(answer) - 1);
			(void)SSL_shutdown(m->down);
			ERR_clear_error();
			refusals_verdict(c->p->refusals, &c->v, "http", c->sni, &c->dst, "bad_http",
			                 "%s (to %s)", m->req.why, c->sni);
			end(c, false);
			return -1;
		}
		m->in_off += (size_t)k;
		if (m->in_off == m->in_len)
			m->in_off = m->in_len = 0;
		return k > 0 || m->out_len > 0 ? 1 : 0;
	}
	if (m->c_eof)
		return 0;
	r = SSL_read(m->down, m->in, sizeof(m->in));
	if (r <= 0)
		return ssl_wait(m->down, r, &m->cwant, &m->c_eof) ? (m->c_eof ? 1 : 0) : -1;
	m->in_len = (size_t)r;
	c->bytes_up += (uint64_t)r; /* the client's own bytes: never a bound header */
	return 1;
}

/* Upstream to client, as pump_up(). */
static int pump_down(struct conn *c)
{
	struct mitm_conn *m = c->m;
	int r;

	if (m->sc_off < m->sc_len) {
		r = SSL_write(m->down, m->sc + m->sc_off, (int)(m->sc_len - m->sc_off));
		if (r <= 0)
			return ssl_wait(m->down, r, &m->cwant, NULL) ? 0 : -1;
		m->sc_off += (size_t)r;
		if (m->sc_off == m->sc_len)
			m->sc_off = m->sc_len = 0;
		return 1;
	}
	if (m->s_eof)
		return 0;
	r = SSL_read(m->up, m->sc, sizeof(m->sc));
	if (r <= 0)
		return ssl_wait(m->up, r, &m->swant, &m->s_eof) ? (m->s_eof ? 1 : 0) : -1;
	m->sc_len = (size_t)r;
	c->bytes_down += (uint64_t)r;
	return 1;
}

static void watch(struct conn *c)
{
	struct mitm_conn *m = c->m;

	if (evloop_watch(c->p->loop, c->cfd, &c->ev_c, &c->cmask, m->cwant ? m->cwant : EPOLLERR) <
	            0 ||
	    evloop_watch(c->p->loop, c->sfd, &c->ev_s, &c->smask, m->swant ? m->swant : EPOLLERR) <
	            0)
		end(c, true);
}

static void pump(struct conn *c)
{
	struct mitm_conn *m = c->m;
	int up, down;

	m->cwant = m->swant = 0;
	if (!handshakes(c)) {
		if (m->end == MITM_GOING)
			watch(c);
		return;
	}
	do {
		m->cwant = m->swant = 0;
		up = pump_up(c);
		if (up < 0)
			break;
		down = pump_down(c);
	} while (up > 0 || down > 0);
	if (m->end != MITM_GOING)
		return; /* refused */
	if (up < 0 || down < 0) {
		ERR_clear_error();
		end(c, true);
		return;
	}
	/* One side ended and what it sent is through: end the other. */
	if ((m->c_eof && m->in_len == 0 && m->out_len == 0) || (m->s_eof && m->sc_len == 0)) {
		(void)SSL_shutdown(m->c_eof ? m->up : m->down);
		ERR_clear_error();
		end(c, false);
		return;
	}
	watch(c);
}

enum mitm_verdict mitm_conn_event(struct conn *c, bool server_side, uint32_t events)
{
	(void)server_side;
	if ((events & (EPOLLERR | EPOLLHUP)) && !(events & (EPOLLIN | EPOLLOUT)))
		return MITM_RESET;
	pump(c);
	return c->m->end;
}

/* The bound headers of the host, in the parser's form. */
static size_t host_headers(struct conn *c, struct httpreq_header *hdrs)
{
	const struct hutch_net_bindings *b = mitm_bindings(c->p->mitm);
	size_t n = 0;

	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->b[i].host, c->sni))
			hdrs[n++] = (struct httpreq_header){ b->b[i].header, b->b[i].value,
				                             b->b[i].value_len };
	return n;
}

static bool setup(struct conn *c)
{
	struct mitm_conn *m = c->m;
	SSL_CTX *sctx = mitm_server_ctx(c->p->mitm, c->sni);
	size_t n = host_headers(c, m->hdrs);
	BIO *wb;

	m->out_cap = HTTPREQ_HEAD_MAX + httpreq_extra(m->hdrs, n) + (64u << 10);
	m->out = malloc(m->out_cap);
	m->up = SSL_new(mitm_client_ctx(c->p->mitm));
	m->down = sctx ? SSL_new(sctx) : NULL;
	m->hello = BIO_new(BIO_s_mem());
	wb = BIO_new_socket(c->cfd, BIO_NOCLOSE);
	if (!m->out || !m->up || !m->down || !m->hello || !wb || SSL_set_fd(m->up, c->sfd) != 1 ||
	    SSL_set_tlsext_host_name(m->up, c->sni) != 1 || SSL_set1_host(m->up, c->sni) != 1 ||
	    BIO_write(m->hello, c->hello, (int)c->hello_len) != (int)c->hello_len) {
		BIO_free(m->hello);
		BIO_free(wb);
		m->hello = NULL;
		return false;
	}
	SSL_set_connect_state(m->up);
	SSL_set_bio(m->down, m->hello, wb);
	SSL_set_accept_state(m->down);
	httpreq_init(&m->req, m->hdrs, n);
	return true;
}

enum mitm_verdict mitm_conn_start(struct conn *c)
{
	c->m = calloc(1, sizeof(*c->m));
	c->state = C_MITM;
	if (!c->m || !setup(c)) {
		ERR_clear_error();
		refusals_verdict(c->p->refusals, &c->v, "tls", c->sni, &c->dst, "internal",
		                 "cannot set up TLS for %s (out of memory?)", c->sni);
		return MITM_RESET;
	}
	c->deadline_ms = hutch_now_mono_ms() + HANDSHAKE_DEADLINE_MS;
	evloop_tick(c->p->loop, true);
	pump(c);
	return c->m->end;
}
