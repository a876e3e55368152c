/* SPDX-License-Identifier: Apache-2.0 */
/* What a sandbox reports of itself; see status.h. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "cleanup.h"
#include "executor.h"
#include "kind.h"
#include "netpolicy.h"
#include "ports.h"
#include "status.h"
#include "supervisor.h"
#include "util.h"

/* --executor-port: where the contract is served on TCP (not the secret). */
static void executor_json(const struct hutch_config *cfg, uint16_t port, cJSON *o)
{
	cJSON *e = hutch_executor_json(cfg, port);

	if (e)
		cJSON_AddItemToObject(o, "executor", e);
}

/*
 * The record, written without libcjson (base/jsonw.h): its load was the
 * largest step of a create's supervisor before clone3 (1.4-1.8 ms of CPU,
 * 24-25 faults; docs/performance.md), and neither create nor run parses
 * JSON there. The members and their order are those cJSON printed.
 */
static void state_write(const struct hutch_sup_record *r, struct hutch_jw *w)
{
	const char *dirs[HUTCH_CGROUP_MAX_DIRS];
	size_t n;

	hutch_jw_open(w, NULL, '{');
	hutch_jw_str(w, "id", r->id);
	hutch_jw_str(w, "status", r->status);
	hutch_jw_num(w, "supervisor_pid", (double)getpid());
	hutch_jw_num(w, "init_pid", (double)r->init_pid);
	hutch_jw_num(w, "created_at", (double)r->created_at);
	hutch_jw_num(w, "expires_at", (double)r->expires_at);
	hutch_jw_str(w, "socket", r->paths->sock);
	hutch_config_write(r->cfg, "config", w);
	hutch_jw_open(w, "cgroup", '{');
	if (r->cg) {
		hutch_jw_open(w, "dirs", '[');
		n = hutch_cgroup_dirs(r->cg, dirs, HUTCH_CGROUP_MAX_DIRS);
		for (size_t i = 0; i < n; i++)
			hutch_jw_str(w, NULL, dirs[i]);
		hutch_jw_close(w, '[');
		hutch_jw_str(w, "version", hutch_cgroup_version(r->cg));
	}
	hutch_jw_close(w, '{');
	hutch_jw_num(w, "uid_base", (double)r->uid_base);
	hutch_jw_num(w, "uid_slot", (double)r->slot); /* a pod's containers pin it */
	hutch_ports_write(r->ports, false, "ports", w);
	/* Its image's use record, which gc and rm remove if this supervisor
	 * dies without doing it (kill -9). */
	if (r->kind->status)
		r->kind->status(r->kind_part, w);
	hutch_executor_write(r->cfg, r->executor_port, "executor", w);
	hutch_jw_close(w, '{');
}

int hutch_sup_write_record(const struct hutch_sup_record *rec)
{
	_cleanup_free_ char *text = NULL;
	struct hutch_jw w;
	size_t len;
	int r;

	hutch_jw_init(&w, HUTCH_STATE_MAX);
	state_write(rec, &w);
	r = hutch_jw_finish(&w, &text, &len);
	return r < 0 ? r : hutch_state_write_text(rec->paths, text, len);
}

int hutch_sup_write_state(struct sup *s, const char *status)
{
	/* what the kind's status op reads */
	const struct hutch_kind_setup k = {
		.container = s->container, .image = s->image, .cfg = s->cfg, .id = s->id
	};

	return hutch_sup_write_record(&(struct hutch_sup_record){
	        .id = s->id,
	        .status = status,
	        .paths = &s->paths,
	        .cfg = s->cfg,
	        .created_at = s->created_at,
	        .expires_at = s->expires_at,
	        .init_pid = s->init_pid,
	        .cg = s->cg,
	        .uid_base = s->uid_base,
	        .slot = s->slot,
	        .ports = s->ports,
	        .executor_port = s->executor.port,
	        .kind = s->kind,
	        .kind_part = &k,
	});
}

/* A container that joins a network namespace (a pod's, or the CNI's) was
 * never wired by its own supervisor: it has the pod's addresses, shown by
 * the pod's /status, not the zeros of a plan it never carried out. */
static cJSON *network_json(struct sup *s)
{
	cJSON *o = hutch_net_plan_status(&s->net.plan);

	if (!o || (!s->net.joined_pod[0] && !s->net.joined_cni))
		return o;
	cJSON_DeleteItemFromObjectCaseSensitive(o, "address");
	cJSON_DeleteItemFromObjectCaseSensitive(o, "gateway");
	cJSON_DeleteItemFromObjectCaseSensitive(o, "host_link");
	if (s->net.joined_cni)
		cJSON_AddBoolToObject(o, "cni_netns", true);
	else
		cJSON_AddStringToObject(o, "pod", s->net.joined_pod);
	return o;
}

cJSON *hutch_sup_status_json(struct sup *s)
{
	cJSON *o = cJSON_CreateObject();
	char created[40], expires[40];
	unsigned running = hutch_cmds_running(&s->cmds);

	if (!o)
		return NULL;
	hutch_format_time(s->created_at, created, sizeof(created));
	hutch_format_time(s->expires_at, expires, sizeof(expires));
	cJSON_AddStringToObject(o, "id", s->id);
	/* "status" as in docs/sandbox.schema.json; "state" its older alias. */
	cJSON_AddStringToObject(o, "status",
	                        s->state != SUP_RUNNING ? "closing"
	                        : s->cfg->pool_key[0]   ? "pooled"
	                        : s->idle.sleeping      ? "sleeping"
	                                                : "running");
	cJSON_AddStringToObject(o, "state", cJSON_GetObjectItem(o, "status")->valuestring);
	cJSON_AddStringToObject(o, "created_at", created);
	cJSON_AddStringToObject(o, "expires_at", expires);
	cJSON_AddNumberToObject(o, "expires_in_seconds",
	                        (double)(s->expires_at - hutch_now_realtime()));
	cJSON_AddItemToObject(o, "config", hutch_config_to_json(s->cfg));
	cJSON_AddStringToObject(o, "cgroup_version", s->cg ? hutch_cgroup_version(s->cg) : "");
	cJSON_AddNumberToObject(o, "commands_running", running);
	cJSON_AddNumberToObject(o, "init_pid", s->init_pid);
	cJSON_AddNumberToObject(o, "supervisor_pid", getpid());
	cJSON_AddStringToObject(o, "socket", s->paths.sock);
	executor_json(s->cfg, s->executor.port, o);
	{
		cJSON *idle = cJSON_AddObjectToObject(o, "idle");
		cJSON_AddBoolToObject(idle, "sleeping", s->idle.sleeping);
		cJSON_AddNumberToObject(idle, "sleeps", s->idle.sleeps);
		cJSON_AddNumberToObject(idle, "last_wake_ms",
		                        hutch_round(s->idle.last_wake_ms * 1000) / 1000);
	}
	cJSON_AddItemToObject(o, "hooks",
	                      s->hooks.results ? cJSON_Duplicate(s->hooks.results, true)
	                                       : cJSON_CreateObject());
	cJSON_AddItemToObject(o, "network", network_json(s));
	cJSON_AddItemToObject(o, "ports", hutch_ports_json(s->ports, true));
	return o;
}
