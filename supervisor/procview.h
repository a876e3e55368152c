/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The /proc views of a live sandbox outlive its runtime dir's lxcfs
 * (procview.c): struct sup's procview_pidfd (its first value the
 * creator's, sandbox.c) and w_procview are written here.
 */
#ifndef HUTCH_PROCVIEW_H
#define HUTCH_PROCVIEW_H

struct sup;

/* Watch the lxcfs whose views init bound (s->procview_pidfd; none: no
 * views, nothing to do). From the loop's setup; 0 or -errno. */
int hutch_procview_watch(struct sup *s);
/* The sandbox ended: no more watching, the pidfd closed. */
void hutch_procview_done(struct sup *s);

#endif
