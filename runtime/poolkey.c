/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The warm pool's key; see poolkey.h. FNV-1a over the text of every option
 * the table marks HUTCH_OPT_POOL_KEY, in table order, each value followed
 * by a separator; which options a pool cannot serve comes from the table
 * too (HUTCH_OPT_NO_POOL).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "options.h"
#include "poolkey.h"

static void fnv1a(void *ud, const char *s)
{
	uint64_t *h = ud;

	for (; *s; s++) {
		*h ^= (unsigned char)*s;
		*h *= 0x100000001b3ull;
	}
	*h ^= 0xff; /* field separator */
}

void hutch_pool_key(const struct hutch_config *cfg, char *buf, size_t size)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const struct hutch_option *opts;
	size_t n;

	opts = hutch_options(&n);
	for (size_t i = 0; i < n; i++)
		if (opts[i].flags & HUTCH_OPT_POOL_KEY)
			hutch_option_text(&opts[i], cfg, fnv1a, &h);
	/* Sandboxes without a cgroup (--no-limits, a CLI flag and not an
	 * option) are a pool of their own: a creation with limits never takes
	 * one, nor the reverse. Absent from the text when unset, so the keys
	 * of limited pools stay what they were. */
	if (cfg->no_limits)
		fnv1a(&h, "no-limits");
	/* The same for --change-lists off (init decides at its start). */
	if (!cfg->change_lists)
		fnv1a(&h, "no-change-lists");
	/* The same for --net-log off (the supervisor decides at setup). */
	if (!cfg->net_log)
		fnv1a(&h, "no-net-log");
	/* And --nat-log on (init sets the log up at its start). */
	if (cfg->nat_log)
		fnv1a(&h, "nat-log");
	/* The same for --workspace tmpfs (the default, disk, is absent). */
	if (!strcmp(cfg->workspace, "tmpfs"))
		fnv1a(&h, "workspace-tmpfs");
	snprintf(buf, size, "%s-%s-%016llx", cfg->type->name, hutch_net_mode_name(cfg->net.mode),
	         (unsigned long long)h);
}

bool hutch_pool_can_serve(const struct hutch_config *cfg)
{
	const struct hutch_option *opts;
	size_t n;

	if (cfg->pool_key[0])
		return false;
	opts = hutch_options(&n);
	for (size_t i = 0; i < n; i++)
		if ((opts[i].flags & HUTCH_OPT_NO_POOL) && hutch_option_is_set(&opts[i], cfg))
			return false;
	return true;
}
