/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ports published out of a sandbox (-p, "publish", bind_port): the spec
 * [HOST_ADDR:]HOST_PORT:SANDBOX_PORT[/tcp] as docker writes it, parsed and
 * checked.
 * The host address is loopback (127.0.0.1) unless one is named; a
 * wildcard address (0.0.0.0, ::) is taken only when written out. HOST_PORT
 * 0 lets the kernel choose. The option type is publish.c. Pure: no
 * syscalls; unit-tested and fuzzed.
 */
#ifndef HUTCH_PORTSPEC_H
#define HUTCH_PORTSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define HUTCH_PUBLISH_MAX   32 /* -p per sandbox */
#define HUTCH_PORT_ADDR_MAX 46 /* INET6_ADDRSTRLEN */
#define HUTCH_PORTSPEC_MAX  128

/* The option's --help text (options.c). */
#define HUTCH_PUBLISH_HELP                                                              \
	"publish a sandbox port on the host: [HOST_ADDR:]HOST_PORT:SANDBOX_PORT (TCP; " \
	"HOST_ADDR 127.0.0.1 unless named; HOST_PORT 0: any free port; repeatable)"

struct hutch_port_spec {
	char host_addr[HUTCH_PORT_ADDR_MAX]; /* numeric, as inet_ntop() writes it */
	bool ipv6;
	uint16_t host_port; /* 0: the kernel chooses */
	uint16_t sandbox_port;
};

/* Parse one spec; err names the problem and the form, and the option as
 * the caller knows it (name: "publish" in the API, "--publish" in the CLI). */
int hutch_port_spec_parse_as(const char *name, const char *s, struct hutch_port_spec *ret,
                             struct hutch_err *err);
int hutch_port_spec_parse(const char *s, struct hutch_port_spec *ret, struct hutch_err *err);
/* "127.0.0.1:8080" or "[::1]:8080" (host_port as given, or port when not 0). */
void hutch_port_spec_host(const struct hutch_port_spec *p, uint16_t port, char *buf, size_t size);

#endif
