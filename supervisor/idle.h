/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Idle sleep (DESIGN §1, idle_timeout_seconds): after that many seconds
 * with no request being served, the supervisor freezes the sandbox's cgroup
 * (v1 freezer or v2 cgroup.freeze); the next request thaws it before it is
 * dispatched. Background processes alone do not keep a sandbox awake;
 * GET /health and GET /status neither wake it nor count as activity, so that
 * watching a sandbox does not keep it awake.
 */
#ifndef HUTCH_IDLE_H
#define HUTCH_IDLE_H

#include <stdbool.h>

struct sup;

/* Arm the idle timer (once the sandbox is ready); no-op when the timeout is 0.
 * Returns 0 or -errno. */
int hutch_idle_start(struct sup *s);
/* Thaw the sandbox if it sleeps; arrival_sec (monotonic) is when the waking
 * request came, for the wake-up time reported in /status. */
void hutch_idle_wake(struct sup *s, double arrival_sec);
/* Activity now (a request's arrival, the loop's start): the idle time
 * counts from here. */
void hutch_idle_touch(struct sup *s);
/* A request or a relayed connection is being served: no sleep until its
 * hutch_idle_end(), which is activity too. */
void hutch_idle_begin(struct sup *s);
void hutch_idle_end(struct sup *s);
/* oci pause froze the cgroup (paused) or resume thawed it: not idle
 * sleep's to freeze or thaw while paused. */
void hutch_idle_paused(struct sup *s, bool paused);
/* The sandbox ends: thaw it, asleep or paused, so that its tasks can die. */
void hutch_idle_wake_to_end(struct sup *s);

#endif
