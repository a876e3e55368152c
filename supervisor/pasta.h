/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

struct sup;

/* Watch pasta (rootless mode all) in the loop: its end, a restart's
 * readiness and deadline (usernet-plan.c decides). Nothing without pasta. */
int hutch_sup_pasta_watch(struct sup *s);
/* The sandbox was thawed (idle wake, oci resume): what pasta did while it
 * was frozen is acted on now (a restart, or a new deadline). */
void hutch_sup_pasta_thawed(struct sup *s);
/* The sandbox ends: pasta's end kept for the thaw needs no restart (the
 * teardown stops whatever pasta there is). */
void hutch_sup_pasta_ending(struct sup *s);
