/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-sandbox CA and the TLS contexts of header bindings
 * (mitm-internal.h). Keys are P-256: a few hundred microseconds to make,
 * so the CA costs a creation with bindings about a millisecond; a host's
 * certificate is signed on its first connection and cached.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "mitm-internal.h"

#define VALID_DAYS 400 /* beyond the longest TTL (366 days) */

struct mitm_host {
	char host[HUTCH_NET_HOST_MAX + 1];
	SSL_CTX *ctx;
};

struct mitm {
	const struct hutch_net_bindings *bindings;
	EVP_PKEY *ca_key, *leaf_key;
	X509 *ca;
	char *ca_pem;
	SSL_CTX *client;
	struct mitm_host hosts[HUTCH_NET_BINDINGS_MAX];
	size_t nhosts;
};

static const unsigned char alpn_http11[] = "\x08http/1.1";
/* AES-128-GCM first (TLS 1.3): as strong a choice as the others for this
 * hop and the fastest with AES-NI, which bulk transfers through a binding
 * (two TLS layers) feel. */
static const char suites[] = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                             "TLS_CHACHA20_POLY1305_SHA256";

/* Read ahead into a 64 KiB buffer: one read() for several records
 * instead of two per record (header, then body). */
static void fast_reads(SSL_CTX *ctx)
{
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_default_read_buffer_len(ctx, 64u << 10);
}

static int ssl_fail(struct hutch_err *err, const char *what)
{
	char buf[160];
	unsigned long e = ERR_get_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return hutch_err_set(err, -EIO, "%s: %s", what, e ? buf : "unknown OpenSSL error");
}

static EVP_PKEY *new_key(void)
{
	return EVP_EC_gen("P-256");
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	bool ok;

	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return false;
	ok = X509_add_ext(cert, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

/* A certificate with a random serial, valid from an hour ago (clocks
 * differ) for VALID_DAYS, named CN=cn. */
static X509 *new_cert(const char *cn, EVP_PKEY *key)
{
	X509 *c = X509_new();
	unsigned char serial[16];
	BIGNUM *bn = NULL;
	bool ok;

	if (!c || RAND_bytes(serial, sizeof(serial)) != 1)
		goto fail;
	serial[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) &&
	     X509_set_version(c, 2) == 1 && X509_gmtime_adj(X509_getm_notBefore(c), -3600) &&
	     X509_gmtime_adj(X509_getm_notAfter(c), 86400L * VALID_DAYS) &&
	     X509_set_pubkey(c, key) == 1 &&
	     X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_UTF8,
	                                (const unsigned char *)cn, -1, -1, 0) == 1;
	BN_free(bn);
	if (ok)
		return c;
fail:
	X509_free(c);
	return NULL;
}

static int make_ca(struct mitm *m, struct hutch_err *err)
{
	char nc[HUTCH_NET_BINDINGS_MAX * (HUTCH_NET_HOST_MAX + 16) + 16] = "critical";
	BIO *bio = NULL;
	long len;
	char *p;

	m->ca_key = new_key();
	m->leaf_key = new_key();
	if (!m->ca_key || !m->leaf_key)
		return ssl_fail(err, "make the sandbox CA's keys");
	m->ca = new_cert("hutch sandbox CA (header bindings)", m->ca_key);
	/* Only the bound hosts: a leaked CA could vouch for nothing else. */
	for (size_t i = 0; i < m->bindings->n; i++) {
		bool dup = false;
		for (size_t j = 0; j < i; j++)
			dup = dup || !strcmp(m->bindings->b[j].host, m->bindings->b[i].host);
		if (dup)
			continue;
		strcat(nc, ",permitted;DNS:");
		strcat(nc, m->bindings->b[i].host);
	}
	if (!m->ca || X509_set_issuer_name(m->ca, X509_get_subject_name(m->ca)) != 1 ||
	    !add_ext(m->ca, m->ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
	    !add_ext(m->ca, m->ca, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    !add_ext(m->ca, m->ca, NID_subject_key_identifier, "hash") ||
	    !add_ext(m->ca, m->ca, NID_name_constraints, nc) ||
	    X509_sign(m->ca, m->ca_key, EVP_sha256()) <= 0)
		return ssl_fail(err, "make the sandbox CA");
	bio = BIO_new(BIO_s_mem());
	if (!bio || PEM_write_bio_X509(bio, m->ca) != 1) {
		BIO_free(bio);
		return ssl_fail(err, "write the sandbox CA");
	}
	len = BIO_get_mem_data(bio, &p);
	m->ca_pem = OPENSSL_malloc((size_t)len + 1);
	if (m->ca_pem) {
		memcpy(m->ca_pem, p, (size_t)len);
		m->ca_pem[len] = '\0';
	}
	BIO_free(bio);
	return m->ca_pem ? 0 : hutch_err_set(err, -ENOMEM, "write the sandbox CA");
}

static int make_client(struct mitm *m, const char *upstream_ca, struct hutch_err *err)
{
	m->client = SSL_CTX_new(TLS_client_method());
	if (!m->client)
		return ssl_fail(err, "make the upstream TLS context");
	SSL_CTX_set_min_proto_version(m->client, TLS1_2_VERSION);
	SSL_CTX_set_verify(m->client, SSL_VERIFY_PEER, NULL);
	fast_reads(m->client);
	(void)SSL_CTX_set_ciphersuites(m->client, suites);
	SSL_CTX_set_options(m->client, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_mode(m->client,
	                 SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (SSL_CTX_set_alpn_protos(m->client, alpn_http11, sizeof(alpn_http11) - 1) != 0)
		return ssl_fail(err, "set ALPN");
	if (upstream_ca && *upstream_ca) {
		if (SSL_CTX_load_verify_locations(m->client, upstream_ca, NULL) != 1)
			return hutch_err_set(err, -EINVAL,
			                     "HUTCH_UPSTREAM_CA: cannot load '%.200s' as PEM CA "
			                     "certificates",
			                     upstream_ca);
	} else if (SSL_CTX_set_default_verify_paths(m->client) != 1) {
		return ssl_fail(err, "load the host's trust store");
	}
	return 0;
}

int mitm_new(const struct hutch_net_bindings *b, const char *upstream_ca, struct mitm **ret,
             struct hutch_err *err)
{
	struct mitm *m;
	int r = hutch_ssl_load(err);

	if (r < 0)
		return r;
	m = OPENSSL_zalloc(sizeof(*m));
	if (!m)
		return hutch_err_set(err, -ENOMEM, "allocate the sandbox CA");
	m->bindings = b;
	r = make_ca(m, err);
	if (r >= 0)
		r = make_client(m, upstream_ca, err);
	if (r < 0) {
		mitm_free(m);
		return r;
	}
	*ret = m;
	return 0;
}

const char *mitm_ca_pem(const struct mitm *m)
{
	return m->ca_pem;
}

SSL_CTX *mitm_client_ctx(struct mitm *m)
{
	return m->client;
}

const struct hutch_net_bindings *mitm_bindings(const struct mitm *m)
{
	return m->bindings;
}

/* http/1.1 if the client offers it; else no ALPN at all (HTTP/1.1 then). */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	for (unsigned int i = 0; i < inlen; i += 1u + in[i])
		if (in[i] == 8 && i + 9 <= inlen && !memcmp(in + i + 1, "http/1.1", 8)) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
	return SSL_TLSEXT_ERR_NOACK;
}

static SSL_CTX *make_server(struct mitm *m, const char *host)
{
	char san[HUTCH_NET_HOST_MAX + 8];
	X509 *leaf = new_cert(host, m->leaf_key);
	SSL_CTX *ctx = NULL;

	snprintf(san, sizeof(san), "DNS:%s", host);
	if (!leaf || X509_set_issuer_name(leaf, X509_get_subject_name(m->ca)) != 1 ||
	    !add_ext(leaf, m->ca, NID_basic_constraints, "critical,CA:FALSE") ||
	    !add_ext(leaf, m->ca, NID_key_usage, "critical,digitalSignature") ||
	    !add_ext(leaf, m->ca, NID_ext_key_usage, "serverAuth") ||
	    !add_ext(leaf, m->ca, NID_subject_alt_name, san) ||
	    !add_ext(leaf, m->ca, NID_authority_key_identifier, "keyid:always") ||
	    X509_sign(leaf, m->ca_key, EVP_sha256()) <= 0)
		goto out;
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_use_certificate(ctx, leaf) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, m->leaf_key) != 1 ||
	    SSL_CTX_add1_chain_cert(ctx, m->ca) != 1) {
		SSL_CTX_free(ctx);
		ctx = NULL;
		goto out;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
	fast_reads(ctx);
	(void)SSL_CTX_set_ciphersuites(ctx, suites);
	SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
out:
	X509_free(leaf);
	ERR_clear_error();
	return ctx;
}

SSL_CTX *mitm_server_ctx(struct mitm *m, const char *host)
{
	for (size_t i = 0; i < m->nhosts; i++)
		if (!strcmp(m->hosts[i].host, host))
			return m->hosts[i].ctx;
	if (m->nhosts >= HUTCH_NET_BINDINGS_MAX || strlen(host) > HUTCH_NET_HOST_MAX)
		return NULL;
	m->hosts[m->nhosts].ctx = make_server(m, host);
	if (!m->hosts[m->nhosts].ctx)
		return NULL;
	memcpy(m->hosts[m->nhosts].host, host, strlen(host) + 1);
	return m->hosts[m->nhosts++].ctx;
}

void mitm_free(struct mitm *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nhosts; i++)
		SSL_CTX_free(m->hosts[i].ctx);
	SSL_CTX_free(m->client);
	X509_free(m->ca);
	EVP_PKEY_free(m->ca_key); /* OpenSSL clears private key memory as it frees */
	EVP_PKEY_free(m->leaf_key);
	OPENSSL_free(m->ca_pem);
	OPENSSL_clear_free(m, sizeof(*m));
}
