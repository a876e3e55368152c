/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers of api.c shared with the route files api-files.c and
 * api-procs.c: JSON answers, errors, suspend/resume of a request.
 */
#ifndef HUTCH_API_INTERNAL_H
#define HUTCH_API_INTERNAL_H

#include <cjson/cJSON.h>

#include "mhd.h"

struct request;
struct cmd;
struct sup;

void hutch_api_suspend(struct request *r);
void hutch_api_resume(struct request *r);
/* Queue j (consumed) as a JSON answer. */
enum MHD_Result hutch_api_respond_json(struct MHD_Connection *conn, unsigned status, cJSON *j);
/* {"error": {"code": code, "message": msg}} (caller owns it). */
cJSON *hutch_api_error_json(const char *code, const char *msg);
/* Queue an error answer with a formatted message. */
enum MHD_Result hutch_api_respond_error(struct MHD_Connection *conn, unsigned status,
                                        const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Kill c (SIGKILL to its tree) if the client of r hangs up while it runs:
 * libmicrohttpd does not look at a suspended connection's socket. */
void hutch_api_kill_on_hangup(struct request *r, struct cmd *c);
/* The 410 body of a sandbox that has ended. */
cJSON *hutch_api_ended_json(struct sup *s);

#endif
