/* SPDX-License-Identifier: Apache-2.0 */
/* CLI side of the API; see client.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "client.h"

#define RESP_MAX (300u << 20)

struct stream_ctx {
	struct hutch_http_resp *resp;
	CURL *curl;
	hutch_sse_cb cb;
	void *ud;
	volatile sig_atomic_t *cancel;
	struct hutch_buf line;  /* partial line */
	char event[32];
	struct hutch_buf data;  /* data of the event being read */
	bool aborted;
};

void hutch_http_resp_done(struct hutch_http_resp *r)
{
	hutch_buf_done(&r->body);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct hutch_http_resp *r = ud;

	if (hutch_buf_append(&r->body, p, size * n) < 0)
		return 0;
	return size * n;
}

static CURL *new_handle(const char *sock, const char *method, const char *path,
			const char *body, size_t len, struct curl_slist **hdrs)
{
	static bool inited;
	char url[512];
	CURL *c;

	if (!inited) {
		curl_global_init(CURL_GLOBAL_NOTHING);
		inited = true;
	}
	c = curl_easy_init();
	if (!c)
		return NULL;
	snprintf(url, sizeof(url), "http://sandbox%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	*hdrs = curl_slist_append(NULL, "Expect:");
	if (body) {
		*hdrs = curl_slist_append(*hdrs, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
	return c;
}

static int transport_error(CURLcode rc, const char *sock, struct hutch_err *err)
{
	if (rc == CURLE_COULDNT_CONNECT)
		return hutch_err_set(err, -ECONNREFUSED, "cannot connect to '%s'", sock);
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		return hutch_err_set(err, -ECANCELED, "interrupted");
	return hutch_err_set(err, -EIO, "request to '%s' failed: %s", sock, curl_easy_strerror(rc));
}

int hutch_client_request(const char *sock, const char *method, const char *path,
			 const char *body, size_t len, struct hutch_http_resp *ret,
			 struct hutch_err *err)
{
	struct curl_slist *hdrs = NULL;
	CURL *c = new_handle(sock, method, path, body, len, &hdrs);
	CURLcode rc;

	if (!c)
		return hutch_err_set(err, -ENOMEM, "curl init");
	memset(ret, 0, sizeof(*ret));
	hutch_buf_init(&ret->body, RESP_MAX);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, ret);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK)
		return transport_error(rc, sock, err);
	(void)hutch_buf_append(&ret->body, "", 1); /* NUL-terminate */
	ret->body.len--;
	return 0;
}

static int dispatch_line(struct stream_ctx *s, const char *line, size_t len)
{
	if (len == 0) {
		int r = 0;
		if (s->event[0] || s->data.len) {
			(void)hutch_buf_append(&s->data, "", 1);
			r = s->cb(s->ud, s->event[0] ? s->event : "message",
				  s->data.data ? s->data.data : "", s->data.len - 1);
		}
		s->event[0] = '\0';
		s->data.len = 0;
		return r;
	}
	if (len >= 6 && !memcmp(line, "event:", 6)) {
		size_t off = line[6] == ' ' ? 7 : 6, n = len - off;
		if (n >= sizeof(s->event))
			n = sizeof(s->event) - 1;
		memcpy(s->event, line + off, n);
		s->event[n] = '\0';
	} else if (len >= 5 && !memcmp(line, "data:", 5)) {
		size_t off = line[5] == ' ' ? 6 : 5;
		if (s->data.len)
			(void)hutch_buf_append(&s->data, "\n", 1);
		(void)hutch_buf_append(&s->data, line + off, len - off);
	}
	return 0;
}

static size_t on_stream(char *p, size_t size, size_t n, void *ud)
{
	struct stream_ctx *s = ud;
	size_t total = size * n;

	if (s->resp->status == 0)
		curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->resp->status);
	if (s->resp->status != 200)
		return on_body(p, size, n, s->resp);
	for (size_t i = 0; i < total; i++) {
		if (p[i] != '\n') {
			if (hutch_buf_append(&s->line, p + i, 1) < 0)
				return 0;
			continue;
		}
		if (dispatch_line(s, s->line.data ? s->line.data : "", s->line.len) < 0) {
			s->aborted = true;
			return 0;
		}
		s->line.len = 0;
	}
	return total;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct stream_ctx *s = ud;

	return s->cancel && *s->cancel ? 1 : 0;
}

int hutch_client_stream(const char *sock, const char *path, const char *body, size_t len,
			hutch_sse_cb cb, void *ud, volatile sig_atomic_t *cancel,
			struct hutch_http_resp *ret, struct hutch_err *err)
{
	struct curl_slist *hdrs = NULL;
	struct stream_ctx s = { .resp = ret, .cb = cb, .ud = ud, .cancel = cancel };
	CURLcode rc;

	memset(ret, 0, sizeof(*ret));
	hutch_buf_init(&ret->body, RESP_MAX);
	hutch_buf_init(&s.line, 64u << 20);
	hutch_buf_init(&s.data, 64u << 20);
	s.curl = new_handle(sock, "POST", path, body, len, &hdrs);
	if (!s.curl)
		return hutch_err_set(err, -ENOMEM, "curl init");
	curl_easy_setopt(s.curl, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(s.curl, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(s.curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(s.curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(s.curl, CURLOPT_XFERINFODATA, &s);
	rc = curl_easy_perform(s.curl);
	if (ret->status == 0)
		curl_easy_getinfo(s.curl, CURLINFO_RESPONSE_CODE, &ret->status);
	curl_easy_cleanup(s.curl);
	curl_slist_free_all(hdrs);
	hutch_buf_done(&s.line);
	hutch_buf_done(&s.data);
	if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && s.aborted))
		return transport_error(rc, sock, err);
	(void)hutch_buf_append(&ret->body, "", 1);
	ret->body.len--;
	return 0;
}
