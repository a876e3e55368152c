/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `list` (runc's and crun's): the containers under --root, as a table or
 * as JSON, each with the status `state` would report; and the commands
 * hutch refuses on purpose (checkpoint, restore) or leaves to others
 * (events), each with why and what to use.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "oci-internal.h"

#define LIST_MAX 65536 /* containers listed at most: a bound on a hostile --root */

static int by_id(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The ids under root that have a state.json, sorted; *ret_n of them. */
static int read_ids(const char *root, char ***ret, size_t *ret_n)
{
	_cleanup_closedir_ DIR *d = opendir(root);
	char **ids = NULL;
	size_t n = 0;
	struct dirent *e;

	*ret = NULL;
	*ret_n = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d)) && n < LIST_MAX) {
		struct stat st;
		char **grown;

		if (!hutch_oci_id_is_valid(e->d_name) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		grown = realloc(ids, (n + 1) * sizeof(*ids));
		if (!grown || !(grown[n] = strdup(e->d_name))) {
			free(grown ? grown : ids);
			return -ENOMEM;
		}
		ids = grown;
		n++;
	}
	if (n)
		qsort(ids, n, sizeof(*ids), by_id);
	*ret = ids;
	*ret_n = n;
	return 0;
}

static void owner_of(const char *dir, char *out, size_t size)
{
	struct passwd *pw;
	struct stat st;

	if (stat(dir, &st) < 0) {
		snprintf(out, size, "?");
		return;
	}
	pw = getpwuid(st.st_uid);
	if (pw)
		snprintf(out, size, "%s", pw->pw_name);
	else
		snprintf(out, size, "#%u", (unsigned)st.st_uid);
}

/* One container's line (table), id (quiet) or object (json). */
static int list_one(const char *id, int format, cJSON *arr)
{
	struct hutch_oci_paths p;
	struct hutch_oci_state st;
	struct hutch_err err = { 0 };
	const cJSON *bundle, *created;
	char owner[64];
	cJSON *j;

	if (hutch_oci_paths_init(hutch_oci_opts.root, id, &p, &err) < 0 ||
	    hutch_oci_state_read(&p, id, &st, &err) < 0)
		return 0; /* being created or deleted right now: not listed */
	owner_of(p.dir, owner, sizeof(owner));
	bundle = cJSON_GetObjectItemCaseSensitive(st.doc, "bundle");
	created = cJSON_GetObjectItemCaseSensitive(st.doc, "created");
	if (format == 'q') {
		printf("%s\n", id);
	} else if (format == 't') {
		printf("%-12s %-8d %-10s %-40s %-31s %s\n", id, (int)hutch_oci_state_pid(&st),
		       st.status, cJSON_IsString(bundle) ? bundle->valuestring : "",
		       cJSON_IsString(created) ? created->valuestring : "", owner);
	} else {
		j = hutch_oci_state_json(&st, id);
		if (!j) {
			hutch_oci_state_done(&st);
			return -ENOMEM;
		}
		cJSON_AddStringToObject(j, "owner", owner);
		cJSON_AddItemToArray(arr, j);
	}
	hutch_oci_state_done(&st);
	return 0;
}

int hutch_oci_cmd_list(int argc, char **argv)
{
	_cleanup_cjson_ cJSON *arr = cJSON_CreateArray();
	_cleanup_free_ char *text = NULL;
	bool quiet = false, json = false;
	char **ids = NULL;
	size_t n = 0;
	int format, r;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *fmt;

		if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			quiet = true;
			continue;
		}
		if ((!strcmp(a, "-f") || !strcmp(a, "--format")) && i + 1 < argc)
			fmt = argv[++i];
		else if (!strncmp(a, "--format=", 9))
			fmt = a + 9;
		else
			return hutch_oci_fail("list: unknown option '%s' (usage: list [-q] "
			                      "[--format table|json])",
			                      a);
		if (strcmp(fmt, "json") != 0 && strcmp(fmt, "table") != 0)
			return hutch_oci_fail("list: --format '%s': table or json", fmt);
		json = !strcmp(fmt, "json");
	}
	format = quiet ? 'q' : json ? 'j' : 't';
	if (!arr)
		return hutch_oci_fail("out of memory");
	r = read_ids(hutch_oci_opts.root, &ids, &n);
	if (r < 0)
		return hutch_oci_fail("list: read --root '%s': %s", hutch_oci_opts.root,
		                      strerror(-r));
	if (format == 't')
		printf("%-12s %-8s %-10s %-40s %-31s %s\n", "ID", "PID", "STATUS", "BUNDLE",
		       "CREATED", "OWNER");
	for (size_t k = 0; k < n; k++) {
		if (r == 0)
			r = list_one(ids[k], format, arr);
		free(ids[k]);
	}
	free(ids);
	if (r < 0)
		return hutch_oci_fail("list: %s", strerror(-r));
	if (format == 'j') {
		text = cJSON_PrintUnformatted(arr);
		if (!text)
			return hutch_oci_fail("out of memory");
		printf("%s\n", text);
	}
	return 0;
}

int hutch_oci_cmd_refused(int argc, char **argv)
{
	(void)argc;
	if (!strcmp(argv[0], "events"))
		return hutch_oci_fail("events: not supported by hutch (runc's stream of stats and "
		                      "OOM events): read the container's cgroup (memory.events, "
		                      "cpu.stat; 'hutch oci ps ID' lists its processes)");
	return hutch_oci_fail("%s: refused on purpose: a checkpoint (CRIU) writes the "
	                      "container's whole memory, secrets included, to files and restores "
	                      "it into namespaces hutch did not make; stop the container and "
	                      "create it again instead",
	                      argv[0]);
}
