/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervisor's own log (hutch events ID): what it did and why, one
 * timestamped line each: the creation with its timings, setup steps,
 * idle sleep and wake, the claim from a warm pool, why the sandbox ended
 * and how long its teardown took. It lives in the state directory as
 * events.log while the sandbox runs and is moved next to the tombstone
 * ($RT/.gone/<id>.events, pruned with it after 7 days) when it ends, so
 * that it can be read after the sandbox is gone. Bounded: past
 * HUTCH_EVENTS_MAX bytes one last line says so and nothing more is kept.
 */
#ifndef HUTCH_EVENTS_H
#define HUTCH_EVENTS_H

struct sup;

#define HUTCH_EVENTS_MAX    (64u << 10)
#define HUTCH_EVENTS_SUFFIX ".events" /* in $RT/.gone/ */

void hutch_event(struct sup *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The sandbox has ended: keep the log next to the tombstone (before its
 * retired state directory is removed). */
void hutch_events_keep(struct sup *s);

#endif
