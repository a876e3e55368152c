/* SPDX-License-Identifier: Apache-2.0 */
/*
 * time() without glibc's IFUNC. The hutch link (CMakeLists.txt:
 * --wrap=time) sends every call of time(), hutch's own and the static
 * libnl's, to __wrap_time(), so hutch imports no time symbol. glibc's
 * time() is an IFUNC: with BIND_NOW (full RELRO) the dynamic loader runs
 * its resolver at every start of every hutch process, on a window of
 * libc's text nothing else of the start touches, a page fault (issue 31:
 * CLI start). The value is the same: glibc's time() reads the vDSO's
 * second of the last tick, which is CLOCK_REALTIME_COARSE's.
 */
#include <time.h>

time_t __wrap_time(time_t *t);

time_t __wrap_time(time_t *t)
{
	struct timespec ts = { 0 };

	(void)clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
