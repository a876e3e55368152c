/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One JSON schema for a sandbox, whichever verb prints it (create --json,
 * ls --json, inspect): docs/api.md, "A sandbox as JSON". The sources
 * differ (the create answer, state.json, GET /status); this turns each
 * into the same keys: "status" (GET /status says "state", kept beside it),
 * "live", and every time twice, as an RFC 3339 UTC string and as
 * "<name>_unix" seconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "cli.h"
#include "config.h"
#include "fdutil.h"
#include "jsonw.h"
#include "options.h"
#include "sandbox.h"
#include "state.h"
#include "util.h"

/* "2026-12-03T14:15:41Z" -> seconds; -1 if not that form. */
static int64_t parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;

	return end && !*end ? (int64_t)timegm(&tm) : -1;
}

static void both_forms(cJSON *o, const char *key)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	char unix_key[64], when[40];
	int64_t t = -1;

	if (cJSON_IsNumber(v))
		t = (int64_t)v->valuedouble;
	else if (cJSON_IsString(v))
		t = parse_time(v->valuestring);
	if (t < 0)
		return;
	hutch_format_time(t, when, sizeof(when));
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	cJSON_AddStringToObject(o, key, when);
	snprintf(unix_key, sizeof(unix_key), "%s_unix", key);
	cJSON_DeleteItemFromObjectCaseSensitive(o, unix_key);
	cJSON_AddNumberToObject(o, unix_key, (double)t);
}

/* The host-derived root: no image, or "host" (create resolved the default
 * into config.image). */
static bool host_root(const char *image)
{
	return !*image || !strcmp(image, HUTCH_IMAGE_HOST);
}

/* config.network ("none", "all", "allow:H1,H2"): its mode, and each of
 * its hosts to fn (the live answer's and the create answer's lists). */
static void network_mode(const char *spec, char mode[static 16])
{
	const char *hosts = strchr(spec, ':');

	snprintf(mode, 16, "%.*s", hosts ? (int)(hosts - spec) : (int)strlen(spec), spec);
}

static void network_hosts(const char *spec, void (*fn)(const char *host, void *ud), void *ud)
{
	for (const char *h = strchr(spec, ':'); h && *h;) {
		const char *end = strchrnul(++h, ',');
		_cleanup_free_ char *one = strndup(h, (size_t)(end - h));

		if (one && *one)
			fn(one, ud);
		h = end;
	}
}

/* "root": which root the sandbox has, "host" (the host-derived one) or
 * "image", and "image": the image's name or null, from its configuration
 * (create resolved the default there). */
static void add_root(cJSON *o)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(o, "config");
	const char *image = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "image"));

	if (!image)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(o, "root");
	cJSON_DeleteItemFromObjectCaseSensitive(o, "image");
	if (host_root(image)) {
		cJSON_AddStringToObject(o, "root", "host");
		cJSON_AddNullToObject(o, "image");
	} else {
		cJSON_AddStringToObject(o, "root", "image");
		cJSON_AddStringToObject(o, "image", image);
	}
}

/* "network": always the object GET /status gives ({"mode", "hosts",
 * "host_ports", ...}); where the source has none (state.json, the create
 * answer), the mode and hosts of config.network ("none", "all",
 * "allow:H1,H2") and config.host_ports. */
static void host_to_list(const char *host, void *list)
{
	cJSON_AddItemToArray(list, cJSON_CreateString(host));
}

static void add_network(cJSON *o)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(o, "config");
	const char *spec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "network"));
	cJSON *net, *list = cJSON_CreateArray();
	char mode[16];

	if (!list || !spec || cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "network"))) {
		cJSON_Delete(list);
		return;
	}
	network_mode(spec, mode);
	network_hosts(spec, host_to_list, list);
	cJSON_DeleteItemFromObjectCaseSensitive(o, "network");
	net = cJSON_AddObjectToObject(o, "network");
	cJSON_AddStringToObject(net, "mode", mode);
	cJSON_AddItemToObject(net, "hosts", list);
	cJSON_AddItemToObject(
	        net, "host_ports",
	        cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(cfg, "host_ports"), 1)
	                ?: cJSON_CreateArray());
}

void hutch_cli_say_root(const struct hutch_config *cfg, int fd)
{
	if (fd < 0)
		return;
	if (hutch_config_has_image(cfg))
		dprintf(fd, "hutch: root: image %s\n", cfg->image);
	else
		dprintf(fd,
		        "hutch: root: host-derived (this host's /usr, read-only); 'hutch image "
		        "build-default' builds the cloud's image, used by default once built\n");
}

void hutch_cli_sandbox_json(cJSON *o, bool live)
{
	const cJSON *state = cJSON_GetObjectItemCaseSensitive(o, "state");
	const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "status"));
	char buf[32];

	if (!status && cJSON_IsString(state))
		status = state->valuestring;
	snprintf(buf, sizeof(buf), "%s", live ? (status ? status : "running") : "dead");
	cJSON_DeleteItemFromObjectCaseSensitive(o, "status");
	cJSON_AddStringToObject(o, "status", buf);
	cJSON_DeleteItemFromObjectCaseSensitive(o, "live");
	cJSON_AddBoolToObject(o, "live", live);
	both_forms(o, "created_at");
	both_forms(o, "expires_at");
	add_root(o);
	add_network(o);
}

int hutch_cli_sandbox_cmp(const void *x, const void *y)
{
	const cJSON *a = *(cJSON *const *)x, *b = *(cJSON *const *)y;
	const cJSON *ta = cJSON_GetObjectItemCaseSensitive(a, "created_at_unix");
	const cJSON *tb = cJSON_GetObjectItemCaseSensitive(b, "created_at_unix");
	double da = cJSON_IsNumber(ta) ? ta->valuedouble : 1e300;
	double db = cJSON_IsNumber(tb) ? tb->valuedouble : 1e300;

	if (da != db)
		return da < db ? 1 : -1;
	return strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "id")) ?: "",
	              cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "id")) ?: "");
}

/* The forwards of -p with the host ports they got (0: chosen by the
 * kernel), from the state.json the supervisor wrote before it was ready;
 * NULL (an empty list) without -p. */
static char *created_ports(const struct hutch_created *c, size_t npublish)
{
	_cleanup_cjson_ cJSON *state = NULL;
	_cleanup_cjson_ cJSON *ports = NULL;

	if (!npublish)
		return NULL;
	if (hutch_state_read(&c->paths, &state) >= 0)
		ports = cJSON_DetachItemFromObjectCaseSensitive(state, "ports");
	return cJSON_IsArray(ports) ? cJSON_PrintUnformatted(ports) : NULL;
}

/* --executor-port: where the contract is served and its secret, printed
 * this once (the file is the creator's alone, 0600; inspect and ls never
 * show the secret); NULL: nothing to show. */
static char *created_executor(const struct hutch_paths *p)
{
	_cleanup_cjson_ cJSON *state = NULL;
	_cleanup_cjson_ cJSON *e = NULL;
	char path[4300], secret[128] = "";

	if (hutch_state_read(p, &state) < 0)
		return NULL;
	e = cJSON_DetachItemFromObjectCaseSensitive(state, "executor");
	if (!e)
		return NULL;
	snprintf(path, sizeof(path), "%s/executor.secret", p->dir);
	if (hutch_read_file_at(AT_FDCWD, path, secret, sizeof(secret)) >= 0)
		cJSON_AddStringToObject(e, "secret", secret);
	return cJSON_PrintUnformatted(e);
}

/* A time as both_forms() leaves it: the string and "<key>_unix" at the
 * end; a time before 1970 stays a number where it was (the caller's). */
static void both_forms_jw(struct hutch_jw *w, const char *key, int64_t t)
{
	char unix_key[64], when[40];

	if (t < 0)
		return;
	hutch_format_time(t, when, sizeof(when));
	hutch_jw_str(w, key, when);
	snprintf(unix_key, sizeof(unix_key), "%s_unix", key);
	hutch_jw_num(w, unix_key, (double)t);
}

/* What hutch_cli_sandbox_json(o, true) adds to the create answer, from
 * cfg itself: "status" and "live", the times, add_root()'s and
 * add_network()'s keys. */
static void host_to_jw(const char *host, void *w)
{
	hutch_jw_str(w, NULL, host);
}

static void created_tail(const struct hutch_config *cfg, const struct hutch_created *c,
                         struct hutch_jw *w)
{
	bool host = host_root(cfg->image);
	char mode[16];

	hutch_jw_str(w, "status", "running");
	hutch_jw_bool(w, "live", true);
	both_forms_jw(w, "created_at", c->created_at);
	both_forms_jw(w, "expires_at", c->expires_at);
	hutch_jw_str(w, "root", host ? "host" : "image");
	if (host)
		hutch_jw_null(w, "image");
	else
		hutch_jw_str(w, "image", cfg->image);
	hutch_jw_open(w, "network", '{');
	network_mode(cfg->network_spec, mode);
	hutch_jw_str(w, "mode", mode);
	hutch_jw_open(w, "hosts", '[');
	network_hosts(cfg->network_spec, host_to_jw, w);
	hutch_jw_close(w, '[');
	hutch_option_write(hutch_option_find("host_ports"), cfg, w);
	hutch_jw_close(w, '{');
}

int hutch_cli_print_created(const struct hutch_config *cfg, const struct hutch_created *c)
{
	_cleanup_free_ char *ports = created_ports(c, cfg->npublish);
	_cleanup_free_ char *executor =
	        cfg->executor_listen[0] ? created_executor(&c->paths) : NULL;
	_cleanup_free_ char *text = NULL, *out = NULL;
	struct hutch_jw w;
	size_t len;
	int r;

	hutch_jw_init(&w, HUTCH_JW_CJSON_MAX);
	hutch_jw_open(&w, NULL, '{');
	hutch_jw_str(&w, "id", c->id);
	hutch_jw_str(&w, "socket", c->paths.sock);
	if (c->created_at < 0)
		hutch_jw_num(&w, "created_at", (double)c->created_at);
	if (c->expires_at < 0)
		hutch_jw_num(&w, "expires_at", (double)c->expires_at);
	hutch_config_write(cfg, "config", &w);
	hutch_jw_raw(&w, "ports", ports ? ports : "[]");
	hutch_jw_raw(&w, "executor", executor);
	created_tail(cfg, c, &w);
	hutch_jw_close(&w, '{');
	r = hutch_jw_finish(&w, &text, &len);
	if (r >= 0)
		r = hutch_jw_pretty(text, len, &out, &len);
	if (r < 0)
		return r;
	return printf("%s\n", out) < 0 ? -EIO : 0;
}
