/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hooks of a bundle's config.json (spec-hooks.c), for the parser
 * (spec.c) and for start and delete, which read them back from the
 * container's state.json (create keeps them there: a config.json changed
 * after create changes nothing). Pure; errors name the field.
 *
 * Hooks come from whoever wrote config.json (containerd, podman, their
 * hooks directories): the engine that calls the runtime, as trusted as
 * that caller, never the container's code. hooks.c runs them.
 */
#ifndef HUTCH_OCI_SPEC_HOOKS_H
#define HUTCH_OCI_SPEC_HOOKS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "error.h"

#define HUTCH_OCI_MAX_HOOKS        32      /* per phase */
#define HUTCH_OCI_HOOK_TIMEOUT_MAX 2000000 /* seconds (its milliseconds fit an int) */

/* The phases, in the runtime-spec's order of a container's life. */
enum hutch_oci_hook_phase {
	HUTCH_OCI_HOOK_PRESTART,         /* deprecated: with createRuntime, before it */
	HUTCH_OCI_HOOK_CREATE_RUNTIME,   /* create: the runtime's namespaces */
	HUTCH_OCI_HOOK_CREATE_CONTAINER, /* create: the container's namespaces */
	HUTCH_OCI_HOOK_START_CONTAINER,  /* start: the container's, before its process */
	HUTCH_OCI_HOOK_POSTSTART,        /* start: the runtime's, after; failure logged */
	HUTCH_OCI_HOOK_POSTSTOP,         /* delete: the runtime's; failure logged */
	HUTCH_OCI_HOOK_PHASES
};

/* The phases' names as config.json spells them, by the enum. */
extern const char *const hutch_oci_hook_names[HUTCH_OCI_HOOK_PHASES];

struct hutch_oci_hook {
	char *path;         /* absolute */
	char **args, **env; /* NULL-terminated, or NULL (args: just path) */
	size_t nargs, nenv;
	unsigned int timeout; /* seconds; 0: none given (waited for) */
};

struct hutch_oci_hooks {
	struct hutch_oci_hook *hooks[HUTCH_OCI_HOOK_PHASES]; /* each malloc'ed, or NULL */
	size_t n[HUTCH_OCI_HOOK_PHASES];
	size_t total;
};

/* config.json's "hooks" (NULL or null: none) into ret; on failure err
 * names the field and nothing is left to free. */
int hutch_oci_hooks_parse(const cJSON *obj, struct hutch_oci_hooks *ret, struct hutch_err *err);
void hutch_oci_hooks_done(struct hutch_oci_hooks *h);

#endif
