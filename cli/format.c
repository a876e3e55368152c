/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ls --filter and --format; see format.h. Both read the sandbox JSON that
 * ls --json prints, so a filter or a template sees what the user sees.
 * Templates are a small fixed language, parsed once into at most
 * TMPL_NODES_MAX nodes and checked whole before anything is printed: a
 * typo is a usage error naming the byte where it is, not a half-printed
 * table.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "config.h"
#include "format.h"
#include "util.h"

/* ---- filters ---- */

enum filter_key {
	F_ID,
	F_STATUS,
	F_NETWORK,
	F_TYPE,
	F_REGION,
	F_DESCRIPTION,
	F_COUNT
};

static const char *const filter_names[F_COUNT] = {
	"id", "status", "network", "instance-type", "region", "description",
};
#define FILTER_KEYS "id, status, network, instance-type, region, description"

static const char *const statuses[] = {
	"creating", "running", "sleeping", "pooled", "closing", "dead", NULL,
};

void hutch_cli_filter_words(FILE *f)
{
	size_t n;
	const struct hutch_instance_type *t = hutch_instance_types(&n);

	for (unsigned k = 0; k < F_COUNT; k++) {
		if (k == F_STATUS)
			for (size_t i = 0; statuses[i]; i++)
				fprintf(f, " status=%s", statuses[i]);
		else if (k == F_NETWORK)
			fputs(" network=none network=all network=allow", f);
		else if (k == F_TYPE)
			for (size_t i = 0; i < n; i++)
				fprintf(f, " instance-type=%s", t[i].name);
		else
			fprintf(f, " %s=", filter_names[k]);
	}
}

static const char *config_str(const cJSON *s, const char *key)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(s, "config");

	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, key));
}

static bool is_status(const char *v)
{
	for (size_t i = 0; statuses[i]; i++)
		if (!strcmp(statuses[i], v))
			return true;
	return false;
}

static int check_value(unsigned key, const char *spec, const char *v, struct hutch_err *err)
{
	switch (key) {
	case F_ID:
		if (!hutch_id_prefix_is_valid(v))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "invalid --filter '%s': an id (or its start) is 1 to 12 "
			        "lowercase hex digits",
			        spec);
		break;
	case F_STATUS:
		if (!is_status(v))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "invalid --filter '%s': a status is creating, running, "
			        "sleeping, pooled, closing or dead",
			        spec);
		break;
	case F_NETWORK:
		if (strcmp(v, "none") && strcmp(v, "all") && strcmp(v, "allow") &&
		    strncmp(v, "allow:", 6))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "invalid --filter '%s': a network is none, all, allow or "
			        "allow:HOST[,HOST...]",
			        spec);
		break;
	case F_TYPE:
		if (!hutch_instance_type_find(v))
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "invalid --filter '%s': an instance type is one of %s", spec,
			        hutch_instance_type_names());
		break;
	}
	return 0;
}

/* One "KEY=VALUE". */
static int parse_filter(const char *spec, struct hutch_cli_filters *f, struct hutch_err *err)
{
	const char *eq = strchr(spec, '=');
	size_t len = eq ? (size_t)(eq - spec) : 0;
	unsigned key;

	if (!eq || !len)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid --filter '%s': write it as KEY=VALUE (keys: " FILTER_KEYS ")",
		        spec);
	for (key = 0; key < F_COUNT; key++)
		if (strlen(filter_names[key]) == len && !strncmp(filter_names[key], spec, len))
			break;
	if (key == F_COUNT &&
	    ((len == 4 && !strncmp(spec, "name", 4)) || (len == 5 && !strncmp(spec, "label", 5))))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid --filter '%s': sandboxes have no names or labels; "
		        "filter by description=TEXT (a part of their --description)",
		        spec);
	if (key == F_COUNT)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "unknown --filter key '%.*s' (keys: " FILTER_KEYS ")",
		                           (int)len, spec);
	if (f->n == HUTCH_CLI_FILTERS_MAX)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "too many --filter options (at most %d)",
		                           HUTCH_CLI_FILTERS_MAX);
	if (check_value(key, spec, eq + 1, err) < 0)
		return err->code;
	f->f[f->n].key = key;
	f->f[f->n].value = eq + 1;
	f->n++;
	return 0;
}

int hutch_cli_filters_parse(const cJSON *specs, struct hutch_cli_filters *ret,
                            struct hutch_err *err)
{
	struct hutch_cli_filters f = { 0 };
	const cJSON *s;

	cJSON_ArrayForEach(s, specs) {
		if (!cJSON_IsString(s))
			return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
			                           "invalid --filter");
		if (parse_filter(s->valuestring, &f, err) < 0)
			return err->code;
	}
	*ret = f;
	return 0;
}

static bool match_one(unsigned key, const char *v, const cJSON *s)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "id"));
	const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "status"));
	const char *have;

	switch (key) {
	case F_ID:
		return id && !strncmp(id, v, strlen(v));
	case F_STATUS:
		return status && !strcmp(status, v);
	case F_NETWORK:
		/* "allow" is every allow:... spec; a whole spec is itself. */
		have = config_str(s, "network");
		return have && (!strcmp(have, v) ||
		                (strcspn(have, ":") == strlen(v) && !strncmp(have, v, strlen(v))));
	case F_TYPE:
		have = config_str(s, "instance_type");
		return have && !strcmp(have, v);
	case F_REGION:
		have = config_str(s, "region");
		return have && !strcmp(have, v);
	case F_DESCRIPTION:
		have = config_str(s, "description");
		return have && strstr(have, v);
	}
	return false;
}

bool hutch_cli_filters_match(const struct hutch_cli_filters *f, const cJSON *sandbox)
{
	for (unsigned key = 0; key < F_COUNT; key++) {
		bool seen = false, ok = false;

		for (size_t i = 0; i < f->n && !ok; i++) {
			if (f->f[i].key != key)
				continue;
			seen = true;
			ok = match_one(key, f->f[i].value, sandbox);
		}
		if (seen && !ok)
			return false;
	}
	return true;
}

/* ---- ports, as docker ps shows them ---- */

void hutch_cli_ports_text(const cJSON *ports, char *buf, size_t size)
{
	const cJSON *it;
	size_t len = 0;

	buf[0] = '\0';
	cJSON_ArrayForEach(it, ports) {
		const char *h = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "host"));
		const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "sandbox_port");
		int n;
		if (!h || !cJSON_IsNumber(sp) || len >= size)
			continue;
		n = snprintf(buf + len, size - len, "%s%s->%d/tcp", len ? ", " : "", h,
		             sp->valueint);
		len += n > 0 ? (size_t)n : 0;
	}
}

/* ---- templates ---- */

#define TMPL_MAX       4096 /* bytes of a template */
#define TMPL_NODES_MAX 128
#define TABLE_DEFAULT                                                                         \
	"table "                                                                              \
	"{{.ID}}\\t{{.Status}}\\t{{.Type}}\\t{{.Network}}\\t{{.Expires}}\\t{{.Region}}\\t{{." \
	"Ports}}"
#define FIELD_NAMES                                                                         \
	".ID, .Status, .Live, .Type, .Network, .Region, .Description, .Created, .Expires, " \
	".Socket, .Ports, .Config[.KEY]"

static char *ports_text(const cJSON *s);

enum {
	TEXT_NONE,
	TEXT_PORTS
};
static hutch_cli_field_text *const texts[] = { [TEXT_PORTS] = ports_text };

static const struct hutch_cli_field fields[] = {
	{ "ID", "ID", "id", "", 0 },
	{ "Status", "STATUS", "status", "", 0 },
	{ "Live", "LIVE", "live", "", 0 },
	{ "Type", "TYPE", "instance_type", "config", 0 },
	{ "InstanceType", "TYPE", "instance_type", "config", 0 },
	{ "Network", "NETWORK", "network", "config", 0 },
	{ "Region", "REGION", "region", "config", 0 },
	{ "Description", "DESCRIPTION", "description", "config", 0 },
	{ "Created", "CREATED", "created_at", "", 0 },
	{ "Expires", "EXPIRES", "expires_at", "", 0 },
	{ "Socket", "SOCKET", "socket", "", 0 },
	{ "Ports", "PORTS", "ports", "", TEXT_PORTS },
	{ "Config", "CONFIG", "config", "", 0 },
	{ .name = "" },
};

const struct hutch_cli_fields hutch_cli_sandbox_fields = {
	.fields = fields,
	.texts = texts,
	.names = FIELD_NAMES,
	.table = TABLE_DEFAULT,
	.sub = "Config",
	.verb = "ls",
};

enum func {
	FN_NONE,
	FN_JSON,
	FN_UPPER,
	FN_LOWER
};
/* Names in the array, not pointers: nothing to relocate at start. */
static const char func_names[][sizeof("upper")] = { "", "json", "upper", "lower" };

struct node {
	char *text;                          /* text to print as it is; NULL for an action */
	enum func fn;                        /* an action: its function */
	const struct hutch_cli_field *field; /* its field, NULL for "." */
	char *sub;                           /* .Config.KEY: KEY, else NULL */
};

struct hutch_cli_tmpl {
	const struct hutch_cli_fields *set;
	bool table;
	size_t n;
	struct node nodes[TMPL_NODES_MAX];
};

struct hutch_cli_tmpl *hutch_cli_tmpl_free(struct hutch_cli_tmpl *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->n; i++) {
		free(t->nodes[i].text);
		free(t->nodes[i].sub);
	}
	free(t);
	return NULL;
}

/* The template with "\t" and "\n" (two characters each) made a tab and a
 * newline, as docker does. */
static char *unescape(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		if (s[0] == '\\' && (s[1] == 't' || s[1] == 'n')) {
			*o++ = s[1] == 't' ? '\t' : '\n';
			s++;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
	return out;
}

static struct node *new_node(struct hutch_cli_tmpl *t, struct hutch_err *err)
{
	if (t->n == TMPL_NODES_MAX) {
		hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                    "invalid --format: more than %d parts", TMPL_NODES_MAX);
		return NULL;
	}
	return &t->nodes[t->n++];
}

/* ".", ".Field" or ".Config.KEY" into n; action: the whole {{...}} text,
 * at: its byte offset, for the messages. */
static int parse_path(const struct hutch_cli_fields *set, const char *w, size_t len, struct node *n,
                      const char *action, size_t at, struct hutch_err *err)
{
	const char *dot;
	size_t name_len;

	if (len == 1)
		return 0; /* ".": the whole sandbox */
	dot = memchr(w + 1, '.', len - 1);
	name_len = (dot ? (size_t)(dot - w) : len) - 1;
	for (const struct hutch_cli_field *f = set->fields; f->name[0]; f++)
		if (strlen(f->name) == name_len && !strncmp(f->name, w + 1, name_len))
			n->field = f;
	if (!n->field)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid --format: unknown field '.%.*s' in '{{%s}}' at byte "
		        "%zu (fields: %s)",
		        (int)name_len, w + 1, action, at, set->names);
	if (!dot)
		return 0;
	if (!set->sub || strcmp(n->field->name, set->sub) || dot + 1 == w + len ||
	    memchr(dot + 1, '.', (size_t)(w + len - dot - 1)))
		return set->sub ? hutch_err_set_class(
		                          err, HUTCH_ERRC_USAGE, -EINVAL,
		                          "invalid --format: '{{%s}}' at byte %zu: only .%s "
		                          "has fields below it (.%s.KEY, KEY as in %s --json)",
		                          action, at, set->sub, set->sub, set->verb)
		                : hutch_err_set_class(
		                          err, HUTCH_ERRC_USAGE, -EINVAL,
		                          "invalid --format: '{{%s}}' at byte %zu: no field "
		                          "has fields below it",
		                          action, at);
	n->sub = strndup(dot + 1, (size_t)(w + len - dot - 1));
	return n->sub ? 0 : -ENOMEM;
}

static int parse_func(const char *w, size_t len, struct node *n, const char *action, size_t at,
                      bool has_arg, struct hutch_err *err)
{
	for (unsigned i = FN_JSON; i <= FN_LOWER; i++)
		if (strlen(func_names[i]) == len && !strncmp(func_names[i], w, len)) {
			n->fn = i;
			if (!has_arg)
				return hutch_err_set_class(
				        err, HUTCH_ERRC_USAGE, -EINVAL,
				        "invalid --format: '{{%s}}' at byte %zu: %s needs "
				        "an argument, e.g. {{%s .}}",
				        action, at, func_names[i], func_names[i]);
			return 0;
		}
	return hutch_err_set_class(
	        err, HUTCH_ERRC_USAGE, -EINVAL,
	        "invalid --format: unknown function '%.*s' in '{{%s}}' at byte %zu "
	        "(functions: json, upper, lower; a field is written .Field)",
	        (int)len, w, action, at);
}

/* The inside of one {{...}}: "ARG" or "FUNCTION ARG". */
static int parse_action(struct hutch_cli_tmpl *t, char *action, size_t at, struct hutch_err *err)
{
	const char *w[3];
	size_t len[3], nw = 0;
	struct node *n;
	char *p = action;

	while (nw < 3) {
		p += strspn(p, " ");
		if (!*p)
			break;
		w[nw] = p;
		len[nw] = strcspn(p, " ");
		p += len[nw++];
	}
	if (nw == 0)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid --format: empty '{{}}' at byte %zu", at);
	if ((nw >= 1 && w[0][0] == '-') || (w[nw - 1][len[nw - 1] - 1] == '-' && len[nw - 1] == 1))
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid --format: '{{%s}}' at byte %zu: the trim markers {{- "
		        "and -}} are not supported",
		        action, at);
	if (nw == 3)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid --format: '{{%s}}' at byte %zu: write {{.Field}} or "
		        "{{FUNCTION .Field}}",
		        action, at);
	n = new_node(t, err);
	if (!n)
		return err->code;
	if (w[0][0] != '.' && parse_func(w[0], len[0], n, action, at, nw == 2, err) < 0)
		return err->code;
	if (w[0][0] == '.' && nw == 2)
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid --format: '{{%s}}' at byte %zu: write {{.Field}} or "
		        "{{FUNCTION .Field}}",
		        action, at);
	if (w[nw - 1][0] != '.')
		return hutch_err_set_class(
		        err, HUTCH_ERRC_USAGE, -EINVAL,
		        "invalid --format: '{{%s}}' at byte %zu: the argument is a field "
		        "(.Field) or '.'",
		        action, at);
	return parse_path(t->set, w[nw - 1], len[nw - 1], n, action, at, err);
}

static int add_text(struct hutch_cli_tmpl *t, const char *s, size_t len, struct hutch_err *err)
{
	struct node *n;

	if (!len)
		return 0;
	n = new_node(t, err);
	if (!n)
		return err->code;
	n->text = strndup(s, len);
	return n->text ? 0 : -ENOMEM;
}

static int parse_body(struct hutch_cli_tmpl *t, const char *s, struct hutch_err *err)
{
	const char *p = s;

	for (;;) {
		const char *open = strstr(p, "{{"), *close;
		_cleanup_free_ char *action = NULL;
		int r;

		r = add_text(t, p, open ? (size_t)(open - p) : strlen(p), err);
		if (r < 0 || !open)
			return r;
		close = strstr(open + 2, "}}");
		if (!close)
			return hutch_err_set_class(
			        err, HUTCH_ERRC_USAGE, -EINVAL,
			        "invalid --format: '{{' at byte %zu is not closed by '}}'",
			        (size_t)(open - s));
		action = strndup(open + 2, (size_t)(close - open - 2));
		if (!action)
			return -ENOMEM;
		r = parse_action(t, action, (size_t)(open - s), err);
		if (r < 0)
			return r;
		p = close + 2;
	}
}

int hutch_cli_tmpl_parse(const char *format, struct hutch_cli_tmpl **ret, struct hutch_err *err)
{
	return hutch_cli_tmpl_parse_fields(format, &hutch_cli_sandbox_fields, ret, err);
}

int hutch_cli_tmpl_parse_fields(const char *format, const struct hutch_cli_fields *set,
                                struct hutch_cli_tmpl **ret, struct hutch_err *err)
{
	struct hutch_cli_tmpl *t = NULL;
	_cleanup_free_ char *body = NULL;
	const char *s = format;
	int r;

	if (strlen(format) > TMPL_MAX)
		return hutch_err_set_class(err, HUTCH_ERRC_USAGE, -EINVAL,
		                           "invalid --format: longer than %d bytes", TMPL_MAX);
	if (!strcmp(s, "json"))
		s = "{{json .}}";
	else if (!strcmp(s, "table"))
		s = set->table;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->set = set;
	if (!strncmp(s, "table", 5)) {
		t->table = true;
		s += 5;
		s += strspn(s, " ");
	}
	body = unescape(s);
	r = body ? parse_body(t, body, err) : -ENOMEM;
	if (r < 0) {
		hutch_cli_tmpl_free(t);
		return r == -ENOMEM ? hutch_err_set(err, r, "out of memory") : r;
	}
	*ret = t;
	return 0;
}

/* ---- printing ---- */

static const cJSON *lookup(const struct node *n, const cJSON *s)
{
	const cJSON *in = s, *v;

	if (!n->field)
		return s;
	if (n->field->in[0])
		in = cJSON_GetObjectItemCaseSensitive(s, n->field->in);
	v = n->field->key[0] ? cJSON_GetObjectItemCaseSensitive(in, n->field->key) : NULL;
	return n->sub ? cJSON_GetObjectItemCaseSensitive(v, n->sub) : v;
}

/* A value as text: strings as they are, null or missing as nothing,
 * numbers and booleans as JSON writes them, objects and arrays as JSON. */
static char *value_text(const cJSON *v, enum func fn)
{
	char *t;

	if (fn != FN_JSON && (!v || cJSON_IsNull(v)))
		return strdup("");
	if (fn != FN_JSON && cJSON_IsString(v))
		t = strdup(v->valuestring);
	else
		t = v ? cJSON_PrintUnformatted(v) : strdup("null");
	for (char *c = t; c && *c && (fn == FN_UPPER || fn == FN_LOWER); c++)
		*c = (char)(fn == FN_UPPER ? toupper((unsigned char)*c)
		                           : tolower((unsigned char)*c));
	return t;
}

/* .Ports: "127.0.0.1:8080->80/tcp, ..." (json .Ports: the array). */
static char *ports_text(const cJSON *s)
{
	char buf[1024];

	hutch_cli_ports_text(cJSON_GetObjectItemCaseSensitive(s, "ports"), buf, sizeof(buf));
	return strdup(buf);
}

/* A field computed from the object (its text function), as text: upper
 * and lower apply, json quotes it. */
static char *computed_value(const struct hutch_cli_fields *set, const struct node *n,
                            const cJSON *s)
{
	_cleanup_free_ char *text = set->texts[n->field->text](s);
	_cleanup_cjson_ cJSON *v = NULL;

	if (!text)
		return NULL;
	v = cJSON_CreateString(text);
	return v ? value_text(v, n->fn) : NULL;
}

/* One row: the template for sandbox s, or the header row (s NULL). */
static int render(const struct hutch_cli_tmpl *t, const cJSON *s, struct hutch_buf *out)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct node *n = &t->nodes[i];
		_cleanup_free_ char *text = NULL;

		if (n->text)
			text = strdup(n->text);
		else if (!s)
			text = strdup(n->sub ? n->sub : n->field ? n->field->header : "SANDBOX");
		else if (n->field && n->field->text && !(n->fn == FN_JSON && n->field->key[0]))
			text = computed_value(t->set, n, s);
		else
			text = value_text(lookup(n, s), n->fn);
		if (!s && text && n->sub)
			for (char *c = text; *c; c++)
				*c = (char)toupper((unsigned char)*c);
		if (!text || hutch_buf_append(out, text, strlen(text)) < 0)
			return -ENOMEM;
	}
	return hutch_buf_append(out, "\n", 1);
}

/* Characters, not bytes, for the alignment (UTF-8). */
static size_t text_width(const char *s, size_t len)
{
	size_t w = 0;

	for (size_t i = 0; i < len; i++)
		w += ((unsigned char)s[i] & 0xc0) != 0x80;
	return w;
}

/* Align the cells (ended by tabs) of text's lines as docker's tabwriter
 * does: each column as wide as its widest cell plus 3, at least 10; the
 * last cell of a line is not padded. */
static int print_aligned(const char *text, size_t len, FILE *f)
{
	_cleanup_free_ size_t *width = NULL;
	size_t ncols = 0;

	for (int pass = 0; pass < 2; pass++) {
		const char *line = text, *end = text + len;
		while (line < end) {
			const char *nl = memchr(line, '\n', (size_t)(end - line)) ?: end;
			const char *cell = line;
			for (size_t col = 0;; col++) {
				const char *tab = memchr(cell, '\t', (size_t)(nl - cell));
				size_t w = text_width(cell, (size_t)((tab ?: nl) - cell));
				if (!tab) {
					if (pass)
						fprintf(f, "%.*s\n", (int)(nl - cell), cell);
					break;
				}
				if (!pass && col >= ncols) {
					size_t *nw = realloc(width, (col + 1) * sizeof(*nw));
					if (!nw)
						return -ENOMEM;
					width = nw;
					memset(width + ncols, 0, (col + 1 - ncols) * sizeof(*nw));
					ncols = col + 1;
				}
				if (!pass && w > width[col])
					width[col] = w;
				if (pass)
					fprintf(f, "%.*s%*s", (int)(tab - cell), cell,
					        (int)((width[col] + 3 < 10 ? 10 : width[col] + 3) -
					              w),
					        "");
				cell = tab + 1;
			}
			line = nl + 1;
		}
	}
	return 0;
}

int hutch_cli_tmpl_print(const struct hutch_cli_tmpl *t, cJSON *const *sandboxes, size_t n, FILE *f)
{
	struct hutch_buf out;
	int r = 0;

	hutch_buf_init(&out, SIZE_MAX);
	if (t->table)
		r = render(t, NULL, &out);
	for (size_t i = 0; i < n && r == 0; i++)
		r = render(t, sandboxes[i], &out);
	if (r == 0 && t->table)
		r = print_aligned(out.data ? out.data : "", out.len, f);
	else if (r == 0 && out.len)
		fwrite(out.data, 1, out.len, f);
	hutch_buf_done(&out);
	return r;
}
