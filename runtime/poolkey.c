/* SPDX-License-Identifier: Apache-2.0 */
/* The warm pool's key; see poolkey.h. FNV-1a over the fixed options. */
#include <stdint.h>
#include <stdio.h>

#include "poolkey.h"

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h ^ 0xff; /* field separator */
}

void hutch_pool_key(const struct hutch_config *cfg, char *buf, size_t size)
{
	uint64_t h = 0xcbf29ce484222325ull;
	char port[8];

	h = fnv1a(h, cfg->type->name);
	h = fnv1a(h, cfg->network_spec);
	for (size_t i = 0; i < cfg->nhost_ports; i++) {
		snprintf(port, sizeof(port), "%u", cfg->host_ports[i]);
		h = fnv1a(h, port);
	}
	h = fnv1a(h, cfg->resolver);
	h = fnv1a(h, cfg->net_pool);
	snprintf(buf, size, "%s-%s-%016llx", cfg->type->name, hutch_net_mode_name(cfg->net.mode),
	         (unsigned long long)h);
}

bool hutch_pool_can_serve(const struct hutch_config *cfg)
{
	return !cfg->setup_script && !cfg->on_create && !cfg->pool_key[0];
}
