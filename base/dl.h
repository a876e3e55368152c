/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A shared library loaded at run time into a table of function pointers:
 * the libraries only a few processes need (libmicrohttpd, libssl) stay out
 * of the CLI's start, where the dynamic loader would map and relocate
 * them for every command.
 */
#ifndef HUTCH_DL_H
#define HUTCH_DL_H

#include <stddef.h>

#include "error.h"

/* One function: its exported name and its slot's offset in the table. */
struct hutch_dl_sym {
	const char *name;
	size_t offset;
};

/* dlopen() soname (RTLD_NOW | RTLD_LOCAL: an unresolvable symbol fails
 * here, not at a call) and write each symbol's address into table at its
 * offset. The library stays loaded for the life of the process. Returns 0,
 * or a negative errno with err filled ("load WHAT: " and dlerror()'s
 * text, or the missing name) and the table's slots NULL. */
int hutch_dl_load(const char *soname, const char *what, const struct hutch_dl_sym *syms, size_t n,
                  void *table, struct hutch_err *err);

#endif
