/* SPDX-License-Identifier: Apache-2.0 */
/* hutch cp (cli-cp.c): copy files and directories into and out of a sandbox. */
#ifndef HUTCH_CLI_CP_H
#define HUTCH_CLI_CP_H

/* argv[0] is "cp"; returns the exit code (usage in cli-cp.c, hutch(1)). */
int hutch_cli_cp(int argc, char **argv);

#endif
