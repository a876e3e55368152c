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

/* dlopen() soname (RTLD_NOW | RTLD_LOCAL: an unresolvable symbol fails
 * here, not at a call) and write the address of each of the n symbols into
 * table at its offset. names are the symbols' exported names one after the
 * other, each ended by its NUL ("SSL_new\0SSL_free\0", from an X-macro
 * list), offsets their slots' offsets in the same order: a string pool and
 * numbers, no pointer in the caller's tables for the dynamic loader to
 * relocate at every start of every hutch process (issue 31: CLI start).
 * The library stays loaded for the life of the process. Returns 0, or a
 * negative errno with err filled ("load WHAT: " and dlerror()'s text, or
 * the missing name) and the table's slots NULL. */
int hutch_dl_load(const char *soname, const char *what, const char *names, const size_t *offsets,
                  size_t n, void *table, struct hutch_err *err);

#endif
