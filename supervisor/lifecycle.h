/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How a sandbox ends, in one place. States (struct sup.state): running
 * (sleeping is running with a frozen cgroup, idle.c), closing (on_destroy
 * runs, or the teardown), gone (torn down; the last answers are served).
 * The reason ("deleted", "expired", "crashed", or none when creation
 * failed) is stored once, in struct sup.end.
 *
 * Teardown has two phases: what a client can observe happens before the
 * DELETE / answer (hutch_sup_teardown(): init sent its SIGKILL, the
 * tombstone written and the state dir retired while it dies, then init
 * and every process dead), the rest after it
 * (hutch_sup_teardown_finish(): egress, host link, cgroups, the retired
 * dir), so that rm pays only for the first.
 */
#ifndef HUTCH_LIFECYCLE_H
#define HUTCH_LIFECYCLE_H

struct sup;

/* Close the sandbox: on_destroy first when there is one and the sandbox
 * is ready, then the teardown. Idempotent. */
void hutch_sup_end(struct sup *s, const char *reason);
/* After each batch of events: carry out what the setup steps and
 * on_destroy decided (they are decided inside the command engine's
 * callbacks, where tearing down is not safe). */
void hutch_sup_after_events(struct sup *s);
/* init died: the sandbox crashed, or on_destroy cannot finish. */
void hutch_sup_init_died(struct sup *s);
/* The first phase (above); reason NULL writes no tombstone. Idempotent. */
void hutch_sup_teardown(struct sup *s, const char *reason);
/* The second phase; idempotent. */
void hutch_sup_teardown_finish(struct sup *s);

#endif
