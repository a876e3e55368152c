/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netpolicy: the network option (none / all / allow(hosts)), its parsing and
 * validation (the cloud's rules), and the wiring on both sides of clone().
 */
#ifndef HUTCH_NETPOLICY_H
#define HUTCH_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

enum hutch_net_mode {
	HUTCH_NET_NONE = 0,
	HUTCH_NET_ALL,
	HUTCH_NET_ALLOW,
};

#define HUTCH_NET_HOST_MAX  253
#define HUTCH_NET_HOSTS_MAX 256

struct hutch_net_host {
	char name[HUTCH_NET_HOST_MAX + 1]; /* DNS name or IP literal */
	uint16_t port;                     /* 0 = default (443) */
	bool is_ip;
};

struct hutch_net_policy {
	enum hutch_net_mode mode;
	size_t nhosts;
	struct hutch_net_host *hosts;
};

/* Parse "none", "all" or "allow:HOST[,HOST...]"; entries are name, name:port,
 * ip or ip:port. A scheme, a path or '*' is refused naming the entry. */
int hutch_net_policy_parse(const char *spec, struct hutch_net_policy *ret, struct hutch_err *err);
/* Validate one host entry; fills ret. */
int hutch_net_host_parse(const char *entry, struct hutch_net_host *ret, struct hutch_err *err);
void hutch_net_policy_done(struct hutch_net_policy *p);
const char *hutch_net_mode_name(enum hutch_net_mode mode);
/* True if this build can enforce the mode. */
bool hutch_net_mode_is_implemented(enum hutch_net_mode mode);

#endif
