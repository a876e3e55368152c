/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcjson loaded on first use: hutch defines the cJSON functions it calls
 * (their prototypes are <cjson/cJSON.h>'s), each forwarding to the
 * library's, which the first call dlopen()s by its SONAME (base/dl.h).
 * libcjson is then no NEEDED library of hutch: the commands that use no
 * JSON (version, help, rm, ps, and exec and run on their hot path, whose
 * answers come as binary frames) never map, relocate or bind it, and a
 * CLI start is a library shorter (issue 31: `hutch version` 1.60x
 * `/bin/true` with it, a trivial program linking it 1.13-1.19x alone).
 * The parser is still the system's libcjson1, security updates included;
 * no JSON parser is hutch's own. What the hot path only writes (state.json's
 * records, the journal's lines) goes through base/jsonw.h, which prints
 * what the library prints; what a run or an exec asks of its supervisor
 * comes in a form that needs no parser (base/frame.h, HUTCH_REQ_MAGIC).
 *
 * A NULL item needs no library: cJSON_Delete(NULL), the lookups and the
 * type tests of NULL answer here as libcjson answers them (nothing, 0,
 * false, NAN), so a `_cleanup_cjson_` of nothing loads nothing. Any other
 * item came from the library, which is then loaded.
 *
 * A library that cannot be loaded ends the process as the dynamic loader
 * would have at its start (exit 127, one line on stderr): it is a broken
 * installation (the package depends on libcjson1), and the cJSON API has
 * no way to report it to a caller.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cjson-dl.h"
#include "dl.h"
#include "util.h"

#if !defined(HUTCH_CJSON_SONAME) || !defined(HUTCH_CJSON_PATH)
#error "HUTCH_CJSON_SONAME and _PATH must name libcjson (set by CMakeLists.txt)"
#endif

/* X(ret, name, params, args): functions that need the library whatever
 * their arguments. */
#define CJ_LOADING(X)                                                                              \
	X(cJSON *, AddArrayToObject, (cJSON *const o, const char *const n), (o, n))                \
	X(cJSON *, AddBoolToObject, (cJSON *const o, const char *const n, const cJSON_bool b),     \
	  (o, n, b))                                                                               \
	X(cJSON_bool, AddItemReferenceToObject, (cJSON * o, const char *s, cJSON *i), (o, s, i))   \
	X(cJSON_bool, AddItemToArray, (cJSON * a, cJSON * i), (a, i))                              \
	X(cJSON_bool, AddItemToObject, (cJSON * o, const char *s, cJSON *i), (o, s, i))            \
	X(cJSON *, AddNullToObject, (cJSON *const o, const char *const n), (o, n))                 \
	X(cJSON *, AddNumberToObject, (cJSON *const o, const char *const n, const double v),       \
	  (o, n, v))                                                                               \
	X(cJSON *, AddObjectToObject, (cJSON *const o, const char *const n), (o, n))               \
	X(cJSON *, AddStringToObject, (cJSON *const o, const char *const n, const char *const s),  \
	  (o, n, s))                                                                               \
	X(cJSON *, AddTrueToObject, (cJSON *const o, const char *const n), (o, n))                 \
	X(cJSON *, CreateArray, (void), ())                                                        \
	X(cJSON *, CreateNumber, (double v), (v))                                                  \
	X(cJSON *, CreateObject, (void), ())                                                       \
	X(cJSON *, CreateString, (const char *s), (s))                                             \
	X(cJSON *, Parse, (const char *v), (v))                                                    \
	X(cJSON *, ParseWithLength, (const char *v, size_t n), (v, n))                             \
	X(cJSON *, ParseWithLengthOpts, (const char *v, size_t n, const char **end, cJSON_bool z), \
	  (v, n, end, z))                                                                          \
	X(char *, Print, (const cJSON *i), (i))                                                    \
	X(char *, PrintUnformatted, (const cJSON *i), (i))                                         \
	X(cJSON_bool, ReplaceItemInObjectCaseSensitive, (cJSON * o, const char *s, cJSON *n),      \
	  (o, s, n))

/* Y(ret, name, params, args, item, on_null): functions that answer on_null
 * for a NULL item as libcjson does, without loading it. */
#define CJ_NULL_SAFE(Y)                                                                            \
	Y(cJSON *, DetachItemFromObjectCaseSensitive, (cJSON * o, const char *s), (o, s), o, NULL) \
	Y(cJSON *, DetachItemViaPointer, (cJSON * p, cJSON *const i), (p, i), p, NULL)             \
	Y(cJSON *, Duplicate, (const cJSON *i, cJSON_bool r), (i, r), i, NULL)                     \
	Y(cJSON *, GetArrayItem, (const cJSON *a, int i), (a, i), a, NULL)                         \
	Y(int, GetArraySize, (const cJSON *a), (a), a, 0)                                          \
	Y(double, GetNumberValue, (const cJSON *const i), (i), i, (double)NAN)                     \
	Y(cJSON *, GetObjectItem, (const cJSON *const o, const char *const s), (o, s), o, NULL)    \
	Y(cJSON *, GetObjectItemCaseSensitive, (const cJSON *const o, const char *const s),        \
	  (o, s), o, NULL)                                                                         \
	Y(char *, GetStringValue, (const cJSON *const i), (i), i, NULL)                            \
	Y(cJSON_bool, HasObjectItem, (const cJSON *o, const char *s), (o, s), o, 0)                \
	Y(cJSON_bool, IsArray, (const cJSON *const i), (i), i, 0)                                  \
	Y(cJSON_bool, IsBool, (const cJSON *const i), (i), i, 0)                                   \
	Y(cJSON_bool, IsFalse, (const cJSON *const i), (i), i, 0)                                  \
	Y(cJSON_bool, IsNull, (const cJSON *const i), (i), i, 0)                                   \
	Y(cJSON_bool, IsNumber, (const cJSON *const i), (i), i, 0)                                 \
	Y(cJSON_bool, IsObject, (const cJSON *const i), (i), i, 0)                                 \
	Y(cJSON_bool, IsString, (const cJSON *const i), (i), i, 0)                                 \
	Y(cJSON_bool, IsTrue, (const cJSON *const i), (i), i, 0)

/* and the three that return nothing, written out below */
#define CJ_VOID(V)                                            \
	V(Delete, (cJSON * i), (i), i)                        \
	V(DeleteItemFromArray, (cJSON * a, int w), (a, w), a) \
	V(DeleteItemFromObjectCaseSensitive, (cJSON * o, const char *s), (o, s), o)

static struct cjson_fns {
#define X(ret, name, params, args)                ret(*name) params;
#define Y(ret, name, params, args, item, on_null) ret(*name) params;
#define V(name, params, args, item)               void(*name) params;
	CJ_LOADING(X) CJ_NULL_SAFE(Y) CJ_VOID(V)
#undef X
#undef Y
#undef V
} fns;

/* The names as one string pool and the slots' offsets (base/dl.h) */
#define X(ret, name, params, args)                "cJSON_" #name "\0"
#define Y(ret, name, params, args, item, on_null) "cJSON_" #name "\0"
#define V(name, params, args, item)               "cJSON_" #name "\0"
static const char names[] = CJ_LOADING(X) CJ_NULL_SAFE(Y) CJ_VOID(V);
#undef X
#undef Y
#undef V
static const size_t offsets[] = {
#define X(ret, name, params, args)                offsetof(struct cjson_fns, name),
#define Y(ret, name, params, args, item, on_null) offsetof(struct cjson_fns, name),
#define V(name, params, args, item)               offsetof(struct cjson_fns, name),
	CJ_LOADING(X) CJ_NULL_SAFE(Y) CJ_VOID(V)
#undef X
#undef Y
#undef V
};

static const struct cjson_fns *lib(void)
{
	static const char pre[] = "hutch: error while loading shared libraries: ";
	struct hutch_err err = { 0 };

	if (__builtin_expect(fns.Parse != NULL, 1))
		return &fns;
	/* by its path first: a dlopen() by name maps and searches
	 * /etc/ld.so.cache again (CMakeLists.txt) */
	if (hutch_dl_load(HUTCH_CJSON_PATH, "the JSON library", names, offsets,
	                  sizeof(offsets) / sizeof(offsets[0]), &fns, &err) < 0 &&
	    hutch_dl_load(HUTCH_CJSON_SONAME, "the JSON library", names, offsets,
	                  sizeof(offsets) / sizeof(offsets[0]), &fns, &err) < 0) {
		/* as ld.so at a start without it: one line, 127 */
		(void)!write(2, pre, sizeof(pre) - 1);
		(void)!write(2, err.msg, strlen(err.msg));
		(void)!write(2, "\n", 1);
		_exit(127);
	}
	return &fns;
}

bool hutch_cjson_is_loaded(void)
{
	return fns.Parse != NULL;
}

#define X(ret, name, params, args)       \
	ret cJSON_##name params          \
	{                                \
		return lib()->name args; \
	}
CJ_LOADING(X)
#undef X

#define Y(ret, name, params, args, item, on_null) \
	ret cJSON_##name params                   \
	{                                         \
		if (!item)                        \
			return on_null;           \
		return lib()->name args;          \
	}
CJ_NULL_SAFE(Y)
#undef Y

/* cJSON_Delete(NULL) ends every verb (hutch_cli_args_done()): these
 * three beside main() (base/util.h) */
#define V(name, params, args, item)               \
	HUTCH_START_TEXT void cJSON_##name params \
	{                                         \
		if (item)                         \
			lib()->name args;         \
	}
CJ_VOID(V)
#undef V
