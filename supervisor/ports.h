/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ports out of the sandbox (-p, POST /bind_port): the supervisor listens on
 * the host and relays each connection into the sandbox's network namespace.
 * The sandbox side of a connection is a socket that init makes and connects
 * there (HUTCH_MSG_CONNECT; the supervisor never enters the namespace) and
 * passes back with SCM_RIGHTS; the bytes go through base/relay.h's pipes on
 * the supervisor's loop. Works alike in every network mode: nothing about
 * it opens a way out of the sandbox.
 *
 * Forwards close at unbind and at the end of the sandbox (rm, TTL, crash);
 * the listening sockets belong to the supervisor alone, so a supervisor
 * killed with -9 takes them with it.
 */
#ifndef HUTCH_PORTS_H
#define HUTCH_PORTS_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "jsonw.h"
#include "portspec.h"

struct sup;
struct hutch_ports;

#define HUTCH_PORT_CONNS_MAX 1024 /* relayed connections at once, per sandbox */

/* Open the listeners of the sandbox's -p options (publish, n of them),
 * before init is cloned, so that a port in use fails the creation at
 * once, naming the port: setup's own object, *ret (made here when n > 0;
 * left NULL for none), also when it failed (the end closes what was
 * opened) until hutch_ports_adopt() hands it to s. */
int hutch_ports_open(const struct hutch_port_spec *publish, size_t n, struct hutch_ports **ret,
                     struct hutch_err *err);
/* The sandbox takes setup's forwards (ps, NULL: none): s->ports. */
void hutch_ports_adopt(struct sup *s, struct hutch_ports *ps);
/* Watch the listeners and take init's CONNECTED answers (run.c); wake
 * thaws a sleeping sandbox when a connection comes (hutch_idle_wake()). */
int hutch_ports_watch(struct sup *s, void (*wake)(struct sup *s, double arrival_sec));
/* Idle sleep's look (idle.c): the connections relayed now in *ret_open;
 * returns when the last one ended (monotonic ms, 0: none yet). */
int64_t hutch_ports_activity(const struct sup *s, unsigned *ret_open);
/* The caller writes state.json after bind and unbind (ls shows ports).
 * A new forward of spec (bind_port: executor true, at most one of those).
 * err names the port and the fix; -EADDRINUSE, -EEXIST (an executor port
 * is bound: ret_current its sandbox port), -EINVAL... The forward's JSON
 * goes to ret_json. */
int hutch_ports_bind(struct sup *s, const struct hutch_port_spec *spec, bool executor,
                     cJSON **ret_json, uint16_t *ret_current, struct hutch_err *err);
/* Close the executor's forward (sandbox_port 0: whichever; else it must be
 * that one). Returns 1 if one was closed, 0 if none was bound, -ENOENT if
 * another port is bound (ret_current says which). */
int hutch_ports_unbind(struct sup *s, uint16_t sandbox_port, uint16_t *ret_current);
/* The forwards of ps (s->ports, or setup's; NULL: none) as a JSON array
 * (live: with connection counts). */
cJSON *hutch_ports_json(const struct hutch_ports *ps, bool live);
/* The same array written as key's value (state.json, without libcjson). */
void hutch_ports_write(const struct hutch_ports *ps, bool live, const char *key,
                       struct hutch_jw *w);
/* Close every listener and connection (the sandbox ends). */
void hutch_ports_close_all(struct sup *s);

#endif
