/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch completion bash|zsh|fish: a completion script generated from the
 * same tables the parser reads (args.h: every verb, its options, how many
 * of its positionals are sandbox ids; runtime/options.h: the sandbox
 * options), so that it can never disagree with the parser. Sandbox ids
 * are completed at completion time from `hutch ls -q`.
 *
 * zsh runs the bash script through bashcompinit (which gives the bash
 * function 0-based arrays: ksharrays); fish gets a script of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "config.h"
#include "format.h"
#include "oci.h"
#include "options.h"
#include "verbs.h"

/* The values a sandbox option's argument can take, space separated, with
 * sources as in hutch_cli_opt.complete (@images). */
static void option_values(const struct hutch_option *o, FILE *f)
{
	size_t n;
	const struct hutch_instance_type *t;

	if (hutch_option_type(o) == &hutch_opt_instance_type) {
		t = hutch_instance_types(&n);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s%s", i ? " " : "", t[i].name);
	} else if (hutch_option_type(o) == &hutch_opt_network) {
		fputs("none all allow:", f);
	} else if (hutch_option_type(o) == &hutch_opt_image) {
		fputs(HUTCH_IMAGE_HOST " @images", f);
	}
}

static bool has_values(const struct hutch_option *o)
{
	return hutch_option_type(o) == &hutch_opt_instance_type ||
	       hutch_option_type(o) == &hutch_opt_network ||
	       hutch_option_type(o) == &hutch_opt_image;
}

/* A verb option's or positional's words (hutch_cli_opt.complete), the
 * sources made at generation time (@filters) written out, the others
 * (@sandboxes, @images, @procs, @oci) left for the script. */
static void complete_words(const char *words, FILE *f)
{
	const char *filters = strstr(words, "@filters");

	if (!filters) {
		fputs(words, f);
		return;
	}
	fprintf(f, "%.*s", (int)(filters - words), words);
	hutch_cli_filter_words(f);
	fputs(filters + strlen("@filters"), f);
}

/* How each source is listed when completing: a command's output. */
static const struct {
	const char *name, *cmd, *fish; /* cmd: bash's ($2: the first positional) */
} sources[] = {
	{ "@sandboxes", "hutch ls -q 2>/dev/null", "hutch ls -q 2>/dev/null" },
	{ "@images", "hutch image ls 2>/dev/null | awk 'NR > 1 {print $1}'",
	  "hutch image ls 2>/dev/null | tail -n +2 | string replace -r ' .*' ''" },
	{ "@procs", "hutch ps \"$2\" 2>/dev/null | awk 'NR > 1 {print $1}'",
	  "hutch ps (commandline -opc)[3] 2>/dev/null | tail -n +2 | string replace -r ' .*' ''" },
	{ "@oci", "hutch oci list -q 2>/dev/null", "hutch oci list -q 2>/dev/null" },
};

/* Calls fn for each option of verb: its long and short spelling, whether
 * it takes a value, its help, and the sandbox option behind it (or NULL)
 * or the words of a verb's own option (hutch_cli_opt.complete, or NULL). */
typedef void (*opt_fn)(const char *lng, char shrt, bool value, const char *help,
                       const struct hutch_option *so, const char *words, void *ud);

static void for_each_option(const struct hutch_cli_verb *v, opt_fn fn, void *ud)
{
	size_t n;
	const struct hutch_option *so = hutch_options(&n);

	for (const struct hutch_cli_opt *o = v->opts; o && o->name[0]; o++)
		if (o->kind != HUTCH_CLI_REFUSE) /* docker's flags hutch refuses */
			fn(o->name, o->short_name, o->kind != HUTCH_CLI_FLAG,
			   hutch_cli_opt_help(v, o), NULL, o->complete[0] ? o->complete : NULL, ud);
	for (size_t i = 0; v->sandbox_opts && i < n; i++)
		if (so[i].cli[0])
			fn(so[i].cli, so[i].cli_short, true, hutch_option_help(&so[i]), &so[i],
			   NULL, ud);
	fn("help", 'h', false, "show this command's options", NULL, NULL, ud);
}

/* A verb of a group ("pool start", "image pull"): the group's length, else 0. */
static size_t group_len(const char *name)
{
	const char *sp = strchr(name, ' ');

	return sp ? (size_t)(sp - name) : 0;
}

/* The subcommands of name's group, space separated (static buffer). */
static const char *group_subs(const struct hutch_cli_verb *const *all, const char *name, size_t len)
{
	static char subs[512];

	subs[0] = '\0';
	for (size_t j = 0; all[j]; j++)
		if (group_len(all[j]->name) == len && !strncmp(all[j]->name, name, len))
			snprintf(subs + strlen(subs), sizeof(subs) - strlen(subs), "%s%s",
			         *subs ? " " : "", all[j]->name + len + 1);
	return subs;
}

/* Whether all[i] is the first verb of its group (each group named once). */
static bool group_first(const struct hutch_cli_verb *const *all, size_t i)
{
	size_t len = group_len(all[i]->name);

	for (size_t j = 0; len && j < i; j++)
		if (group_len(all[j]->name) == len && !strncmp(all[j]->name, all[i]->name, len))
			return false;
	return len > 0;
}

/* Whether a verb is called name itself ("snapshot" beside "snapshot ls"). */
static bool is_verb(const struct hutch_cli_verb *const *all, const char *name, size_t len)
{
	for (size_t j = 0; all[j]; j++)
		if (strlen(all[j]->name) == len && !strncmp(all[j]->name, name, len))
			return true;
	return false;
}

/* hutch oci's commands (its own parser, oci/dispatch.c), space separated;
 * the containers under the default --root are completed after them. */
static void print_oci_commands(FILE *f)
{
	for (size_t i = 0; hutch_oci_command(i); i++)
		fprintf(f, "%s%s", i ? " " : "", hutch_oci_command(i));
}

/* ---- bash (and zsh) ---- */

static void bash_word(const char *lng, char shrt, bool value, const char *help,
                      const struct hutch_option *so, const char *words, void *ud)
{
	FILE *f = ud;

	fprintf(f, " --%s", lng);
	if (shrt)
		fprintf(f, " -%c", shrt);
}

static void bash_valued(const char *lng, char shrt, bool value, const char *help,
                        const struct hutch_option *so, const char *words, void *ud)
{
	FILE *f = ud;

	if (!value)
		return;
	fprintf(f, "|--%s", lng);
	if (shrt)
		fprintf(f, "|-%c", shrt);
}

struct bash_ctx {
	FILE *f;
	const char *verb; /* NULL: the sandbox options' values */
};

/* _hutch_values VERB OPTION's rows: a verb's own options with words (per
 * verb), or the sandbox options with values (any verb). */
static void bash_choices(const char *lng, char shrt, bool value, const char *help,
                         const struct hutch_option *so, const char *words, void *ud)
{
	struct bash_ctx *c = ud;

	if (c->verb && words) {
		fprintf(c->f, "\t\"%s|--%s\"", c->verb, lng);
		if (shrt)
			fprintf(c->f, "|\"%s|-%c\"", c->verb, shrt);
		fputs(") echo \"", c->f);
		complete_words(words, c->f);
		fputs("\"; return ;;\n", c->f);
	} else if (!c->verb && so && has_values(so)) {
		fprintf(c->f, "\t*\"|--%s\") echo \"", lng);
		option_values(so, c->f);
		fputs("\" ;;\n", c->f);
	}
}

/* _hutch_dyn WORDS ID: the words, each source replaced by its list. */
static void bash_sources(FILE *f)
{
	fputs("_hutch_dyn() {\n\tlocal w\n\tfor w in $1; do\n\t\tcase $w in\n", f);
	for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++)
		fprintf(f, "\t\t%s) %s ;;\n", sources[i].name, sources[i].cmd);
	fputs("\t\t*) echo \"$w\" ;;\n\t\tesac\n\tdone\n}\n", f);
}

static void bash_tables(const struct hutch_cli_verb *const *all, FILE *f)
{
	fputs("_hutch_opts() {\n\tcase $1 in\n", f);
	for (size_t i = 0; all[i]; i++) {
		fprintf(f, "\t\"%s\") echo \"", all[i]->name);
		for_each_option(all[i], bash_word, f);
		fputs("\" ;;\n", f);
	}
	fputs("\tesac\n}\n_hutch_valued() {\n\tcase $1 in\n", f);
	for (size_t i = 0; all[i]; i++) {
		fprintf(f, "\t\"%s\") case $2 in __none__", all[i]->name);
		for_each_option(all[i], bash_valued, f);
		fputs(") return 0 ;; esac ;;\n", f);
	}
	fputs("\tesac\n\treturn 1\n}\n_hutch_idpos() {\n\tcase $1 in\n", f);
	for (size_t i = 0; all[i]; i++)
		if (all[i]->id_pos)
			fprintf(f, "\t\"%s\") echo %zu ;;\n", all[i]->name,
			        all[i]->id_pos == HUTCH_CLI_MANY ? (size_t)9999 : all[i]->id_pos);
	fputs("\t*) echo 0 ;;\n\tesac\n}\n_hutch_posvals() {\n\tcase $1 in\n", f);
	for (size_t i = 0; all[i]; i++)
		if (all[i]->pos_complete) {
			fprintf(f, "\t\"%s\") echo \"", all[i]->name);
			complete_words(all[i]->pos_complete, f);
			fputs("\" ;;\n", f);
		}
	fputs("\toci\\ *) echo @oci ;;\n\tesac\n}\n_hutch_values() {\n\tcase \"$1|$2\" in\n", f);
	for (size_t i = 0; all[i]; i++) {
		struct bash_ctx c = { f, all[i]->name };
		for_each_option(all[i], bash_choices, &c);
	}
	{
		struct bash_ctx c = { f, NULL };
		for_each_option(&hutch_verb_create, bash_choices, &c);
	}
	fputs("\tesac\n}\n", f);
	bash_sources(f);
}

/* The walk over the words typed so far: the verb ("pool start" counts as
 * one), how many positionals, whether "--" ended the options. */
static const char bash_main[] =
        "_hutch() {\n"
        "\tlocal -a words=(\"${COMP_WORDS[@]}\")\n"
        "\tlocal cword=$COMP_CWORD\n"
        "\t_hutch_rejoin\n"
        "\tlocal cur=${words[cword]} prev=${words[cword-1]}\n"
        "\tlocal verb='' w i=1 npos=0 dashdash=0 first=''\n"
        "\tCOMPREPLY=()\n"
        "\t_hutch_complete\n"
        "\t_hutch_trim\n"
        "\treturn 0\n"
        "}\n"
        /* bash splits words at COMP_WORDBREAKS (= and :): ls -f status=r is
         * hutch ls -f status = r to it. The words are taken again from
         * the line (as bash-completion's _get_comp_words_by_ref -n =:
         * does), and the replies trimmed of what bash keeps before the
         * word it replaces (bash only: zsh splits no words at = or :). */
        "_hutch_rejoin() {\n"
        "\t[[ -n ${BASH_VERSION-} && -n ${COMP_LINE-} && -n ${COMP_POINT-} ]] || return 0\n"
        "\tlocal line=${COMP_LINE:0:COMP_POINT}\n"
        "\tread -ra words <<< \"$line\"\n"
        "\t[[ $line == *[[:space:]] || ${#words[@]} -eq 0 ]] && words+=('')\n"
        "\tcword=$(( ${#words[@]} - 1 ))\n"
        "}\n"
        "_hutch_trim() {\n"
        "\t[[ -n ${BASH_VERSION-} ]] || return 0\n"
        "\tlocal typed=${COMP_WORDS[COMP_CWORD]} k\n"
        "\t[[ $cur == \"$typed\" || $cur != *\"$typed\" ]] && return 0\n"
        "\tlocal keep=${cur%\"$typed\"}\n"
        "\tfor k in \"${!COMPREPLY[@]}\"; do COMPREPLY[k]=${COMPREPLY[k]#\"$keep\"}; done\n"
        "}\n"
        "_hutch_complete() {\n"
        "\twhile (( i < cword )); do\n"
        "\t\tw=${words[i]}\n"
        "\t\tif [[ -z $verb ]]; then\n"
        "\t\t\tverb=$w\n"
        "\t\t\tif [[ -n $(_hutch_subs \"$w\") ]]; then\n"
        "\t\t\t\t(( i + 1 < cword )) || break\n"
        "\t\t\t\t(( i++ )); verb=\"$w ${words[i]}\"\n"
        "\t\t\tfi\n"
        "\t\telif [[ $w == -- ]]; then dashdash=1\n"
        "\t\telif (( ! dashdash )) && [[ $w == -* ]]; then\n"
        "\t\t\t_hutch_valued \"$verb\" \"$w\" && (( i++ ))\n"
        "\t\telse (( npos++ )) || first=$w\n"
        "\t\tfi\n"
        "\t\t(( i++ ))\n"
        "\tdone\n"
        "\tif [[ -z $verb ]]; then\n"
        "\t\tCOMPREPLY=( $(compgen -W \"$_hutch_verbs\" -- \"$cur\") ); return 0\n"
        "\tfi\n"
        "\tif [[ -n $(_hutch_subs \"$verb\") ]]; then\n"
        "\t\tCOMPREPLY=( $(compgen -W \"$(_hutch_subs \"$verb\")\" -- \"$cur\") ); return 0\n"
        "\tfi\n"
        "\t(( dashdash )) && return 0\n"
        "\tif _hutch_valued \"$verb\" \"$prev\"; then\n"
        "\t\tCOMPREPLY=( $(compgen -W \"$(_hutch_dyn \"$(_hutch_values \"$verb\" \"$prev\")\" "
        "\"$first\")\" -- \"$cur\") )\n"
        "\t\treturn 0\n"
        "\tfi\n"
        "\tif [[ $cur == -* ]]; then\n"
        "\t\tCOMPREPLY=( $(compgen -W \"$(_hutch_opts \"$verb\")\" -- \"$cur\") ); return 0\n"
        "\tfi\n"
        "\tif (( npos < $(_hutch_idpos \"$verb\") )); then\n"
        "\t\tCOMPREPLY=( $(compgen -W \"$(_hutch_dyn @sandboxes)\" -- \"$cur\") )\n"
        "\telif [[ -n $(_hutch_posvals \"$verb\") ]]; then\n"
        "\t\tCOMPREPLY=( $(compgen -W \"$(_hutch_dyn \"$(_hutch_posvals \"$verb\")\" "
        "\"$first\")\" -- \"$cur\") )\n"
        "\telif [[ $verb == cp && $cur != */* ]]; then\n"
        "\t\tCOMPREPLY=( $(compgen -W \"$(hutch ls -q 2>/dev/null | sed 's/$/:/')\" "
        "-- \"$cur\") $(compgen -f -- \"$cur\") )\n"
        "\telif [[ $verb == cp ]]; then\n"
        "\t\tCOMPREPLY=( $(compgen -f -- \"$cur\") )\n"
        "\tfi\n"
        "\treturn 0\n"
        "}\n"
        "complete -F _hutch hutch\n";

static void print_bash(const struct hutch_cli_verb *const *all, FILE *f)
{
	fprintf(f, "# hutch %s completion for bash, generated by 'hutch completion bash'\n",
	        HUTCH_VERSION);
	fputs("_hutch_verbs='", f);
	for (size_t i = 0; all[i]; i++)
		if (!group_len(all[i]->name))
			fprintf(f, "%s ", all[i]->name);
	/* A group that is a verb too (snapshot) is listed once, as the verb. */
	for (size_t i = 0; all[i]; i++)
		if (group_first(all, i) && !is_verb(all, all[i]->name, group_len(all[i]->name)))
			fprintf(f, "%.*s ", (int)group_len(all[i]->name), all[i]->name);
	fputs("oci'\n_hutch_subs() {\n\tcase $1 in\n", f);
	for (size_t i = 0; all[i]; i++)
		if (group_first(all, i))
			fprintf(f, "\t%.*s) echo \"%s\" ;;\n", (int)group_len(all[i]->name),
			        all[i]->name,
			        group_subs(all, all[i]->name, group_len(all[i]->name)));
	fputs("\toci) echo \"", f);
	print_oci_commands(f);
	fputs("\" ;;\n\tesac\n}\n", f);
	bash_tables(all, f);
	fputs(bash_main, f);
}

/* ---- fish ---- */

/* A help text's first line, single-quoted for fish. */
static void fish_quote(const char *s, FILE *f)
{
	fputc('\'', f);
	for (; s && *s && *s != '\n'; s++) {
		if (*s == '\'' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

/* Words for fish's -a, single-quoted: sources as command substitutions. */
static void fish_words(const char *words, FILE *f)
{
	char *text = NULL, *save = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);

	if (!m)
		return;
	complete_words(words, m);
	fclose(m);
	fputs(" -a '", f);
	for (char *w = strtok_r(text, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		const char *out = w;
		for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++)
			if (!strcmp(w, sources[i].name))
				out = sources[i].fish;
		fprintf(f, "%s%s", w == text ? "" : " ", out == w ? "" : "(");
		for (const char *c = out; *c; c++) {
			if (*c == '\'' || *c == '\\')
				fputc('\\', f);
			fputc(*c, f);
		}
		fputs(out == w ? "" : ")", f);
	}
	fputc('\'', f);
	free(text);
}

struct fish_ctx {
	FILE *f;
	const char *cond;
};

static void fish_opt(const char *lng, char shrt, bool value, const char *help,
                     const struct hutch_option *so, const char *words, void *ud)
{
	struct fish_ctx *c = ud;

	fprintf(c->f, "complete -c hutch -n %s -l %s", c->cond, lng);
	if (shrt)
		fprintf(c->f, " -s %c", shrt);
	/* -x: the listed values only; -r: any value, files offered. */
	if ((so && has_values(so)) || words)
		fputs(" -x", c->f);
	else if (value)
		fputs(" -r", c->f);
	if (so && has_values(so)) {
		char buf[512];
		FILE *m = fmemopen(buf, sizeof(buf), "w");
		if (m) {
			option_values(so, m);
			fputc('\0', m);
			fclose(m);
			buf[sizeof(buf) - 1] = '\0';
			fish_words(buf, c->f);
		}
	} else if (words) {
		fish_words(words, c->f);
	}
	fputs(" -d ", c->f);
	fish_quote(help, c->f);
	fputc('\n', c->f);
}

static void print_fish(const struct hutch_cli_verb *const *all, FILE *f)
{
	char cond[128];

	fprintf(f, "# hutch %s completion for fish, generated by 'hutch completion fish'\n",
	        HUTCH_VERSION);
	fputs("complete -c hutch -f\n", f);
	for (size_t i = 0; all[i]; i++) {
		const char *name = all[i]->name;
		struct fish_ctx c = { f, cond };
		int len = (int)group_len(name);

		if (group_first(all, i) && !is_verb(all, name, (size_t)len))
			fprintf(f, "complete -c hutch -n __fish_use_subcommand -a %.*s -d '%s'\n",
			        len, name, group_subs(all, name, (size_t)len));
		if (len) {
			snprintf(cond, sizeof(cond),
			         "'__fish_seen_subcommand_from %.*s; and "
			         "__fish_seen_subcommand_from %s'",
			         len, name, name + len + 1);
			fprintf(f,
			        "complete -c hutch -n '__fish_seen_subcommand_from %.*s; and not "
			        "__fish_seen_subcommand_from %s' -a %s -d ",
			        len, name, group_subs(all, name, (size_t)len), name + len + 1);
		} else {
			snprintf(cond, sizeof(cond), "'__fish_seen_subcommand_from %s'", name);
			fprintf(f, "complete -c hutch -n __fish_use_subcommand -a %s -d ", name);
		}
		fish_quote(all[i]->about, f);
		fputc('\n', f);
		for_each_option(all[i], fish_opt, &c);
		if (all[i]->id_pos)
			fprintf(f,
			        "complete -c hutch -n %s -a '(hutch ls -q 2>/dev/null)' -d "
			        "sandbox\n",
			        cond);
		if (all[i]->pos_complete) {
			fprintf(f, "complete -c hutch -n %s", cond);
			fish_words(all[i]->pos_complete, f);
			fputc('\n', f);
		}
	}
	fputs("complete -c hutch -n '__fish_seen_subcommand_from cp' -F\n", f);
	fputs("complete -c hutch -n __fish_use_subcommand -a oci -d 'an OCI runtime (as runc)'\n"
	      "complete -c hutch -n '__fish_seen_subcommand_from oci' -a '",
	      f);
	print_oci_commands(f);
	fputs(" (hutch oci list -q 2>/dev/null)'\n", f);
}

static int cmd_completion(struct hutch_cli_args *a)
{
	const char *shell = a->npos ? a->pos[0] : NULL;

	if (!shell)
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "missing shell: hutch completion bash|zsh|fish");
	if (!strcmp(shell, "bash")) {
		print_bash(a->verbs, stdout);
	} else if (!strcmp(shell, "zsh")) {
		printf("#compdef hutch\n# zsh runs hutch's bash completion through bashcompinit\n"
		       "autoload -U +X bashcompinit && bashcompinit\n");
		print_bash(a->verbs, stdout);
	} else if (!strcmp(shell, "fish")) {
		print_fish(a->verbs, stdout);
	} else {
		return hutch_cli_fail(HUTCH_EXIT_USAGE,
		                      "unknown shell '%s': hutch completion bash|zsh|fish", shell);
	}
	return 0;
}

const struct hutch_cli_verb hutch_verb_completion = {
	.name = "completion",
	.synopsis = "bash|zsh|fish",
	.about = "Print a completion script for the shell, generated from hutch's own option\n"
	         "tables: verbs, options, instance types, network modes and the ids of live\n"
	         "sandboxes. Load it with\n"
	         "  source <(hutch completion bash)      (bash; or save it as\n"
	         "      /usr/share/bash-completion/completions/hutch)\n"
	         "  source <(hutch completion zsh)       (zsh)\n"
	         "  hutch completion fish | source       (fish)\n",
	.max_pos = 1,
	.pos_complete = "bash zsh fish",
	.run = cmd_completion,
};
