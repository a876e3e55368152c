/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hutch command line's one parser. A verb is a row of a table: its
 * usage, its own options (a table of struct hutch_cli_opt) and whether it
 * takes the sandbox options (runtime/options.c), positionals and a
 * command. Options may come before or after positionals, as with docker;
 * "--" ends them; a verb that takes a command starts it at the first
 * argument after its positionals. --help (-h) is generated from the same
 * tables.
 *
 * Errors are printed ("hutch: ...") and returned as exit codes (cli.h);
 * the messages name the option, the verb and 'hutch VERB --help'.
 */
#ifndef HUTCH_ARGS_H
#define HUTCH_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "util.h"

/* What an option's value is, and where it goes in struct hutch_cli_args. */
enum hutch_cli_kind {
	HUTCH_CLI_FLAG,     /* no value; sets a bool */
	HUTCH_CLI_STRING,   /* const char * (the argument itself) */
	HUTCH_CLI_ENV,      /* NAME=VALUE, into struct hutch_cli_env (repeatable) */
	HUTCH_CLI_ENV_FILE, /* a file of NAME=VALUE lines, into the same list */
	HUTCH_CLI_LIST,     /* a string, into a cJSON array (repeatable) */
	HUTCH_CLI_U64,      /* whole number in [umin, umax] */
	HUTCH_CLI_SECONDS,  /* finite number of seconds in [min, max] (double) */
	HUTCH_CLI_REFUSE,   /* known to this verb but refused: prints .help */
	HUTCH_CLI_MOUNT,    /* docker's --mount: a volume spec for the "volumes" option */
};

/* The range and default of a HUTCH_CLI_U64 or HUTCH_CLI_SECONDS option,
 * and the messages of a bad or missing value: a row's range is an index
 * (HUTCH_CLI_RANGE_*) into args.c's table. */
struct hutch_cli_range {
	double min, max, def;      /* HUTCH_CLI_SECONDS */
	uint64_t umin, umax, udef; /* HUTCH_CLI_U64 */
	/* The message of a bad value: its "%s" is replaced by the value. In
	 * the row (no pointers: the table is read-only data). */
	char invalid[72];
	/* The message when the value is missing; "": "option '--x' needs a
	 * value". */
	char missing[64];
};
enum {
	HUTCH_CLI_RANGE_NONE,      /* all 0 */
	HUTCH_CLI_RANGE_TIMEOUT,   /* run, exec --timeout */
	HUTCH_CLI_RANGE_GRACE,     /* kill --grace */
	HUTCH_CLI_RANGE_FORKS,     /* fork -n */
	HUTCH_CLI_RANGE_POOL_SIZE, /* pool start --size */
	HUTCH_CLI_RANGE_MAX_BYTES, /* cp --max-bytes */
	HUTCH_CLI_RANGE_N,
};

/* A row of a verb's option table, without pointers (issue 31: CLI
 * start): a pointer in a table of a PIE is a relocation the dynamic
 * loader writes at every start of hutch, its table a page of RELRO
 * faulted in each time; a row without any is read-only data. The short
 * strings are in the row ("" is none: the unit test checks each keeps its
 * NUL), the help text an offset into the pool of the row's file
 * (HUTCH_CLI_POOL: the verb's help_pool), the range an index. */
struct hutch_cli_opt {
	char name[20]; /* long name without "--"; "" ends a table */
	/* The value's name in --help. */
	char metavar[52];
	/* What completion offers as its value (completion.c): words, space
	 * separated, and sources: @sandboxes, @images, @procs (of the
	 * sandbox named first), @filters (ls -f's KEY=VALUE); "": any. */
	char complete[24];
	uint32_t offset; /* the field in struct hutch_cli_args */
	/* Verb-defined modes the option applies in (0: all); see
	 * hutch_cli_check_mode(). */
	unsigned modes;
	/* --help's text; HUTCH_CLI_REFUSE (not in --help): the refusal, its
	 * "%s" replaced by the option as spelled. hutch_cli_opt_help(). */
	uint16_t help;
	uint8_t range;   /* HUTCH_CLI_U64, HUTCH_CLI_SECONDS: HUTCH_CLI_RANGE_* */
	char short_name; /* 0: none */
	enum hutch_cli_kind kind;
};

/* The help texts of a file's option rows: a pool of strings
 * (HUTCH_STRPOOL, base/util.h) whose offsets the compiler computes.
 * LIST(X) calls X(id, "text") once a text. In the file:
 *   HUTCH_CLI_POOL(help_pool, LIST);
 *   #define HELP(id) HUTCH_CLI_HELP(help_pool, id)
 * rows say HELP(id), and the file's verbs .help_pool = HUTCH_CLI_POOL_OF(help_pool). */
#define HUTCH_CLI_POOL(var, LIST)                                                      \
	static const HUTCH_STRPOOL_TYPE(var##_t, LIST) var = HUTCH_STRPOOL_INIT(LIST); \
	_Static_assert(sizeof(var) <= UINT16_MAX, #var ": more than uint16_t offsets reach")
#define HUTCH_CLI_HELP(var, id) .help = HUTCH_STRPOOL_AT(var##_t, id)
#define HUTCH_CLI_POOL_OF(var)  ((const char *)&(var))

struct hutch_cli_args;

#define HUTCH_CLI_VERB_NAME_MAX 24

struct hutch_cli_verb {
	/* "exec", "pool start"; in the struct, not a pointer: main() compares
	 * argv[1] with every verb's name before it runs one, and names kept
	 * in each verb's file spread those reads over pages of read-only data
	 * that hutch would not touch otherwise (issue 31: CLI start). The
	 * verbs' pages are written by the dynamic loader at every start too
	 * (their pointers): the narrow fields last, 80 bytes. */
	char name[HUTCH_CLI_VERB_NAME_MAX];
	const char *synopsis;             /* after "usage: hutch NAME " */
	const char *about;                /* the text after the usage line */
	const struct hutch_cli_opt *opts; /* its own options; NULL: none */
	const char *help_pool;            /* its options' help texts (HUTCH_CLI_POOL) */
	const char *pos_complete;         /* the others, as hutch_cli_opt.complete */
	int (*run)(struct hutch_cli_args *a);
	uint16_t max_pos;  /* positionals (before the command) */
	uint16_t id_pos;   /* the first id_pos of them are sandbox ids */
	bool sandbox_opts; /* takes the option table's options */
	bool command;      /* a command follows the positionals */
};

#define HUTCH_CLI_OPTS_MAX 24
#define HUTCH_CLI_MANY     UINT16_MAX /* max_pos: no limit */

/* Every value an option of any verb can set; a verb reads its own. */
/* -e's variables, "NAME=VALUE" each, in the order given, a name once (a
 * later -e replaces it, moved last): a list, not a cJSON object, so that
 * hutch run -e and exec -e load no libcjson (base/cjson-dl.c). */
struct hutch_cli_env {
	char **kv;
	size_t n;
};

/* Set name (its first nlen bytes) to value; -ENOMEM. */
int hutch_cli_env_set(struct hutch_cli_env *e, const char *name, size_t nlen, const char *value);
void hutch_cli_env_done(struct hutch_cli_env *e);

struct hutch_cli_args {
	const struct hutch_cli_verb *verb;
	const struct hutch_cli_verb *const *verbs; /* every verb (completion) */
	/* The sandbox options: only a verb with verb->sandbox_opts has them
	 * (NULL otherwise). Not in the struct: 9.4 KiB on hutch_cli_run()'s
	 * stack took two pages, a fault each, at every start of every verb
	 * (issue 31: CLI start). */
	struct hutch_config *cfg;
	bool json, quiet, all, detach, follow, interactive, tty, force, no_stream, close, no_limits,
	        foreground, verify, rm /* run --rm: docker's habit, what run does anyway */;
	const char *cwd;
	const char *tag, *store;  /* image import --tag, image --store */
	const char *recipe;       /* image build-default --recipe */
	struct hutch_cli_env env; /* -e's, n 0 if none */
	cJSON *filter;            /* ls --filter: an array of strings, NULL if none */
	const char *format;       /* ls --format */
	const char *progress;     /* create, run --progress */
	const char *since;        /* diff --since */
	const char *into;         /* replay --into */
	const char *process;      /* diff --process */
	double timeout, grace;
	uint64_t size, max_bytes;
	char **pos; /* positionals: pos_few, or calloc()ed past its room */
	size_t npos;
	/* The positionals of a short command line, without malloc: `hutch
	 * version` then never starts the heap (brk, getrandom for the
	 * tcache, 2 zeroed pages; issue 31: CLI start). */
	char *pos_few[6];
	char **cmd; /* the command, NULL-terminated; NULL if none */
	/* How each of verb->opts was spelled, NULL if not given. */
	const char *given[HUTCH_CLI_OPTS_MAX];
};

/* --store DIR, as the image, snapshot and volume verbs take it: the row,
 * and its help text for the file's pool (HUTCH_CLI_POOL). */
#define HUTCH_CLI_STORE_HELP(X)                                                          \
	X(store, "the image store (default $HUTCH_IMAGE_STORE, else /var/lib/hutch, or " \
	         "the user's ~/.local/share/hutch)")
#define HUTCH_CLI_STORE_OPT                                                                     \
	{                                                                                       \
		.name = "store", .kind = HUTCH_CLI_STRING,                                      \
		.offset = offsetof(struct hutch_cli_args, store), .metavar = "DIR", HELP(store) \
	}

/* The table of verbs whose one option is --json, and its help texts
 * (the verb's .help_pool = HUTCH_CLI_POOL_OF(hutch_cli_json_pool)). */
extern const struct hutch_cli_opt hutch_cli_json_opts[];
extern const struct hutch_cli_json_pool_t hutch_cli_json_pool;

/* The help text of the verb's option row o. */
const char *hutch_cli_opt_help(const struct hutch_cli_verb *verb, const struct hutch_cli_opt *o);

/* Parse argv (argv[0] is the verb) for verb; all is every verb (NULL
 * ended), to tell an option of another verb ("does not apply") from an
 * unknown one. Returns 0, an exit code after printing why, or
 * HUTCH_CLI_HELP_SHOWN after printing --help. hutch_cli_args_done() in
 * every case. */
#define HUTCH_CLI_HELP_SHOWN (-1)
int hutch_cli_parse(const struct hutch_cli_verb *verb, const struct hutch_cli_verb *const *all,
                    int argc, char **argv, struct hutch_cli_args *a);
void hutch_cli_args_done(struct hutch_cli_args *a);
/* Parse and run the verb; returns the exit code. */
int hutch_cli_run(const struct hutch_cli_verb *verb, const struct hutch_cli_verb *const *all,
                  int argc, char **argv);

/* "hutch GROUP SUB ...": run the verb of subs (NULL-ended, named "GROUP
 * SUB") that argv[1] names, with argv[0] being GROUP; usage for --help or
 * no SUB; choices lists the SUBs in the unknown-command message. */
int hutch_cli_run_group(const char *group, const char *usage, const char *choices,
                        const struct hutch_cli_verb *const *subs, int argc, char **argv,
                        const struct hutch_cli_verb *const *all);

/* Print the verb's --help: usage, text, its options, the sandbox options. */
void hutch_cli_help(const struct hutch_cli_verb *verb, FILE *f);
/* Refuse the options given that do not apply in mode (for 'what', e.g.
 * "exec -d"); 0 or an exit code. */
int hutch_cli_check_mode(const struct hutch_cli_args *a, unsigned mode, const char *what,
                         const char *takes);
/* The options of the table read from the environment (HUTCH_RESOLVER...);
 * 0 or an exit code. */
int hutch_cli_config_from_env(struct hutch_config *cfg);

#endif
