/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The constructors of the static libraries hutch links (nettle, liblzma),
 * run at the first use of those libraries rather than at the
 * start of every hutch process (issue 31: CLI start). The hutch
 * executable's link (base/libinit.ld) moves their .init_array entries out
 * of the start into a table of their own and leaves out their .fini_array
 * entries; hutch_libinit_run() runs the table.
 */
#ifndef HUTCH_LIBINIT_H
#define HUTCH_LIBINIT_H

/* Run the static libraries' constructors, once per process (a forked child
 * inherits their effect): before the first libarchive reader or writer
 * (liblzma's CRC64 is dispatched by its constructor).
 * nettle needs no call: its functions initialise themselves at their first
 * use. Without base/libinit.ld (the unit tests, the fuzzers) the table is
 * empty and the constructors ran at the start as usual: a no-op. */
void hutch_libinit_run(void);

#endif
