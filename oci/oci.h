/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hutch as an OCI runtime (runtime-spec 1.x, the command line runc and crun
 * implement): `hutch oci [GLOBAL OPTIONS] create|start|state|kill|delete|
 * features|run ...`, also reached when the binary is called hutch-runc
 * (containerd's runc shim BinaryName, podman --runtime). A container is a
 * hutch sandbox (supervisor/container.h) built from the bundle.
 */
#ifndef HUTCH_OCI_H
#define HUTCH_OCI_H

#include <stddef.h>

/* argv[0] is "oci" or the program's name; returns the exit status. */
int hutch_oci_main(int argc, char **argv);
/* The i-th command's name ("create", ...), NULL past the last (for
 * hutch completion). */
const char *hutch_oci_command(size_t i);

#endif
