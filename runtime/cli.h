/* SPDX-License-Identifier: Apache-2.0 */
/* Exit codes of the hutch CLI (documented in README and hutch(1)). */
#ifndef HUTCH_CLI_H
#define HUTCH_CLI_H

#include <stdbool.h>

#define HUTCH_EXIT_USAGE       64  /* bad command line or option value */
#define HUTCH_EXIT_NOT_FOUND   65  /* no such sandbox */
#define HUTCH_EXIT_GONE        66  /* the sandbox expired or was deleted */
#define HUTCH_EXIT_NOT_CAPABLE 69  /* not root, or the kernel lacks a feature */
#define HUTCH_EXIT_FAILURE     70  /* anything else went wrong in hutch */
#define HUTCH_EXIT_TIMEOUT     124 /* the command ran past --timeout */

/* doctor.c: run every host check, print a report; returns an exit code. */
int hutch_doctor(bool json);

#endif
