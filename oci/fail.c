/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every OCI command shares, below them all: the global options
 * (dispatch.c parses them) and the one error report. Errors go to stderr
 * and, with --log, to that file (one JSON object per line with
 * --log-format json, as containerd reads runc's); the exit status is 1,
 * as runc's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cleanup.h"
#include "fdutil.h"
#include "oci-internal.h"

struct hutch_oci_opts hutch_oci_opts = { .root = HUTCH_OCI_DEFAULT_ROOT, .log_fd = -1 };

int hutch_oci_fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "hutch oci: %s\n", msg);
	if (hutch_oci_opts.log_fd >= 0) {
		char line[1400];
		if (hutch_oci_opts.log_json) {
			_cleanup_cjson_ cJSON *j = cJSON_CreateObject();
			_cleanup_free_ char *text = NULL;
			char ts[40];
			time_t now = time(NULL);
			strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
			cJSON_AddStringToObject(j, "level", "error");
			cJSON_AddStringToObject(j, "msg", msg);
			cJSON_AddStringToObject(j, "time", ts);
			text = cJSON_PrintUnformatted(j);
			snprintf(line, sizeof(line), "%s\n", text ? text : "{}");
		} else {
			snprintf(line, sizeof(line), "level=error msg=\"%s\"\n", msg);
		}
		(void)hutch_write_all(hutch_oci_opts.log_fd, line, strlen(line));
	}
	return 1;
}
