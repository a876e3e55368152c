/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded getters of config.json's fields; see json.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

const cJSON *hutch_oci_json_item(const cJSON *obj, const char *key)
{
	return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

/* A bounded string without NUL; *ret is malloc'ed (NULL when absent). */
int hutch_oci_json_str(const cJSON *obj, const char *key, const char *field, char **ret,
                       struct hutch_err *err)
{
	const cJSON *j = hutch_oci_json_item(obj, key);

	*ret = NULL;
	if (!j || cJSON_IsNull(j))
		return 0;
	if (!cJSON_IsString(j) || !j->valuestring)
		return hutch_err_set(err, -EINVAL, "%s: not a string", field);
	if (strlen(j->valuestring) > HUTCH_OCI_MAX_STRING)
		return hutch_err_set(err, -EINVAL, "%s: longer than %u bytes", field,
		                     HUTCH_OCI_MAX_STRING);
	*ret = strdup(j->valuestring);
	return *ret ? 0 : hutch_err_set(err, -ENOMEM, "out of memory");
}

/* A whole number in [0, max]; absent: *ret unchanged. */
int hutch_oci_json_u64(const cJSON *obj, const char *key, const char *field, uint64_t max,
                       uint64_t *ret, struct hutch_err *err)
{
	const cJSON *j = hutch_oci_json_item(obj, key);
	double v;

	if (!j || cJSON_IsNull(j))
		return 0;
	v = j->valuedouble;
	if (!cJSON_IsNumber(j) || !isfinite(v) || v < 0 || v != hutch_round(v) || v > (double)max)
		return hutch_err_set(err, -EINVAL, "%s: not a whole number from 0 to %llu", field,
		                     (unsigned long long)max);
	*ret = (uint64_t)v;
	return 0;
}

bool hutch_oci_json_bool(const cJSON *obj, const char *key)
{
	return cJSON_IsTrue(hutch_oci_json_item(obj, key));
}

/* A string array into a new NULL-terminated vector. */
int hutch_oci_json_strv(const cJSON *obj, const char *key, const char *field, size_t max,
                        char ***ret, size_t *ret_n, struct hutch_err *err)
{
	const cJSON *arr = hutch_oci_json_item(obj, key), *e;
	char **v;
	size_t n = 0;

	*ret = NULL;
	*ret_n = 0;
	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hutch_err_set(err, -EINVAL, "%s: not an array", field);
	if ((size_t)cJSON_GetArraySize(arr) > max)
		return hutch_err_set(err, -E2BIG, "%s: more than %zu entries", field, max);
	v = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*v));
	if (!v)
		return hutch_err_set(err, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(e, arr) {
		if (!cJSON_IsString(e) || strlen(e->valuestring) > HUTCH_OCI_MAX_STRING ||
		    !(v[n] = strdup(e->valuestring))) {
			for (size_t i = 0; i < n; i++)
				free(v[i]);
			free(v);
			return hutch_err_set(err, -EINVAL,
			                     "%s[%zu]: not a string of at most %u bytes", field, n,
			                     HUTCH_OCI_MAX_STRING);
		}
		n++;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}
