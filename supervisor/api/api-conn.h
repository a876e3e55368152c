/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A connection of the API (api.c accepts and serves it; http.c writes a
 * request's journal line as it answers it): the context libmicrohttpd keeps
 * for its socket.
 */
#ifndef HUTCH_API_CONN_H
#define HUTCH_API_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "loop.h"
#include "mhd.h"

struct sup;
struct request;

/* A connection of the API. It waits for a request's headers from when it
 * is accepted, or its previous request answered (keep-alive); the waiting
 * ones are a list in that order, so the oldest is the first. Its client's
 * half-close is watched on a duplicate of its fd (the request's own
 * hang-up watch, http.c, may watch the fd itself). */
struct hutch_api_conn {
	struct sup *s;
	int fd, dup_fd;
	int uid, pid; /* the peer's (SO_PEERCRED), for the journal; -1: unknown */
	int64_t since_ms;
	bool waiting, half_closed;
	struct request *req; /* the request being served, if any */
	struct hutch_watch w;
	struct hutch_api_conn *prev, *next;   /* waiting */
	struct hutch_api_conn *hprev, *hnext; /* half-closed, not yet settled */
};

/* conn's context (NULL when it could not be allocated: conn_start()). */
static inline struct hutch_api_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	        hutch_mhd.get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

#endif
