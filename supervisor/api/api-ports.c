/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /bind_port and POST /unbind_port, in the cloud executor's shapes
 * (docs/api.md): {"port": "8080"} forwards a new host port to that sandbox
 * port and answers {"success": true, "message": "Port binding configured",
 * "port": "8080"} plus where it is on the host; one executor binding at a
 * time (409 {"success": false, "error": "Port already bound",
 * "current_port": ...}). hutch's own fields: "host_port" (0 or absent: any
 * free port) and "host_address" (127.0.0.1 unless named).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "executor.h"
#include "fields.h"
#include "ports.h"
#include "routes.h"
#include "status.h"
#include "supervisor.h"
#include "util.h"

/* A port as the executor's client sends it ("8080") or as a number. */
static int port_value(const cJSON *v, uint64_t min, uint16_t *ret)
{
	uint64_t p;

	if (cJSON_IsString(v) && hutch_parse_u64(v->valuestring, min, 65535, &p) == 0) {
		*ret = (uint16_t)p;
		return 0;
	}
	if (cJSON_IsNumber(v) && v->valuedouble >= (double)min && v->valuedouble <= 65535 &&
	    v->valuedouble == (double)(uint16_t)v->valuedouble) {
		*ret = (uint16_t)v->valuedouble;
		return 0;
	}
	return -EINVAL;
}

/* The body: an object with only the fields named in known; NULL body: {}. */
static cJSON *parse_body(struct request *r, const char *const *known, struct hutch_err *err)
{
	cJSON *j;
	const cJSON *it;

	if (!r->body.data || r->body.len == 0)
		return cJSON_CreateObject();
	if (hutch_fields_check_text(r->body.data, r->body.len, err) < 0)
		return NULL;
	j = cJSON_ParseWithLength(r->body.data, r->body.len);
	/* The executor's endpoint: a key given twice, the last wins (Go). */
	if (!j || !cJSON_IsObject(j) || hutch_exec_go_object(j, NULL, false) < 0) {
		cJSON_Delete(j);
		hutch_err_set(err, -EBADMSG, /* the executor's "Invalid request" */
		              "the request body must be a JSON object: {\"port\": "
		              "\"8080\"}");
		return NULL;
	}
	cJSON_ArrayForEach(it, j) {
		bool ok = false;
		for (const char *const *k = known; *k; k++)
			ok = ok || !strcmp(it->string, *k);
		if (!ok) {
			hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL, "unknown field '%.64s'",
			                    it->string);
			cJSON_Delete(j);
			return NULL;
		}
	}
	return j;
}

static int bind_spec(const cJSON *j, struct hutch_port_spec *spec, struct hutch_err *err)
{
	const cJSON *port = cJSON_GetObjectItemCaseSensitive(j, "port");
	const cJSON *hp = cJSON_GetObjectItemCaseSensitive(j, "host_port");
	const cJSON *ha = cJSON_GetObjectItemCaseSensitive(j, "host_address");
	char text[HUTCH_PORTSPEC_MAX];

	if (!port || cJSON_IsNull(port))
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "Port is required: {\"port\": \"8080\"}");
	if (port_value(port, 1, &spec->sandbox_port) < 0)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid 'port': give the sandbox port, 1 to 65535, as a "
		        "string (\"8080\") or a number");
	spec->host_port = 0;
	if (hp && !cJSON_IsNull(hp) && port_value(hp, 0, &spec->host_port) < 0)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid 'host_port': give a port from 0 (any free port) to "
		        "65535");
	if (ha && !cJSON_IsNull(ha) && (!cJSON_IsString(ha) || strlen(ha->valuestring) > 64))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid 'host_address': give an IPv4 address or [IPv6]");
	/* The same rules as -p: HOST_ADDR:HOST_PORT:SANDBOX_PORT. */
	snprintf(text, sizeof(text), "%s:%u:%u", cJSON_IsString(ha) ? ha->valuestring : "127.0.0.1",
	         spec->host_port, spec->sandbox_port);
	if (hutch_port_spec_parse(text, spec, err) < 0)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid 'host_address' '%.64s'",
		                           ha ? ha->valuestring : "");
	return 0;
}

static cJSON *conflict_json(const char *error, uint16_t current)
{
	cJSON *o = cJSON_CreateObject();
	char cur[8];

	snprintf(cur, sizeof(cur), "%u", current);
	cJSON_AddBoolToObject(o, "success", false);
	cJSON_AddStringToObject(o, "error", error);
	cJSON_AddStringToObject(o, "current_port", cur);
	return o;
}

/* The endpoint's name for a bind that failed, by its class. */
static const char *bind_code(const struct hutch_err *err)
{
	switch (hutch_err_class(err)) {
	case HUTCH_ERRC_CONFLICT:
		return "port_in_use";
	case HUTCH_ERRC_USAGE:
		return "invalid_request";
	default:
		return NULL; /* the class's name: limit, not_capable, internal */
	}
}

enum MHD_Result hutch_api_serve_bind_port(struct request *r, const char *upload, size_t *size)
{
	static const char *const known[] = { "port", "host_port", "host_address", NULL };
	struct hutch_err err = { 0 };
	struct hutch_port_spec spec;
	_cleanup_cjson_ cJSON *j = parse_body(r, known, &err);
	const cJSON *port_field;
	cJSON *fwd = NULL, *o;
	uint16_t current = 0;
	char port[8];
	int ret;

	/* The executor's own refusals, in its words and form (Go's
	 * http.Error: plain text); hutch's checks of its extra fields stay
	 * JSON errors naming the field. */
	if (!j && err.code == -EBADMSG)
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL, HUTCH_EXEC_INVALID);
	port_field = j ? cJSON_GetObjectItemCaseSensitive(j, "port") : NULL;
	if (j && (!port_field || cJSON_IsNull(port_field) ||
	          (cJSON_IsString(port_field) && !*port_field->valuestring)))
		return hutch_api_refuse_text(r->conn, HUTCH_ERRC_USAGE, NULL, "Port is required");
	if (!j || bind_spec(j, &spec, &err) < 0)
		return hutch_api_respond_err(r->conn, &err, "invalid_request");
	ret = hutch_ports_bind(r->s, &spec, true, &fwd, &current, &err);
	if (ret == -EEXIST) /* the executor's answer, its shape */
		return hutch_api_respond_json(r->conn, hutch_api_status(HUTCH_ERRC_CONFLICT, NULL),
		                              conflict_json("Port already bound", current));
	/* The status from the class ports.c gave the failure (a host port in
	 * use conflict, an address not this machine's usage, too many
	 * forwards limit, a port below 1024 without the right not capable). */
	if (ret < 0)
		return hutch_api_respond_err(r->conn, &err, bind_code(&err));
	(void)hutch_sup_write_state(r->s, "running"); /* for ls */
	/* The executor's fields first, then where it is on the host. */
	o = cJSON_CreateObject();
	snprintf(port, sizeof(port), "%u", spec.sandbox_port);
	cJSON_AddBoolToObject(o, "success", true);
	cJSON_AddStringToObject(o, "message", "Port binding configured");
	cJSON_AddStringToObject(o, "port", port);
	for (cJSON *it = fwd ? fwd->child : NULL; it; it = it->next)
		cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, true));
	cJSON_Delete(fwd);
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, o);
}

enum MHD_Result hutch_api_serve_unbind_port(struct request *r, const char *upload, size_t *size)
{
	static const char *const known[] = { "port", NULL };
	struct hutch_err err = { 0 };
	_cleanup_cjson_ cJSON *j = parse_body(r, known, &err);
	const cJSON *port = j ? cJSON_GetObjectItemCaseSensitive(j, "port") : NULL;
	uint16_t want = 0, current = 0;
	char msg[64];
	int ret;
	cJSON *o;

	if (!j || (port && !cJSON_IsNull(port) && port_value(port, 1, &want) < 0))
		return hutch_api_refuse(r->conn, HUTCH_ERRC_USAGE, "invalid_request", "%s",
		                        j ? "invalid 'port': give the bound sandbox port, "
		                            "1 to 65535, or nothing"
		                          : err.msg);
	ret = hutch_ports_unbind(r->s, want, &current);
	if (ret == -ENOENT) {
		snprintf(msg, sizeof(msg), "Port %u is not bound", want);
		return hutch_api_respond_json(r->conn, hutch_api_status(HUTCH_ERRC_CONFLICT, NULL),
		                              conflict_json(msg, current));
	}
	if (ret > 0)
		(void)hutch_sup_write_state(r->s, "running");
	o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "success", true);
	cJSON_AddStringToObject(o, "message", "Port binding removed");
	return hutch_api_respond_json(r->conn, MHD_HTTP_OK, o);
}
