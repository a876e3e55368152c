/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for runtime/state.c's gc on a private temporary runtime dir (no
 * root needed): the full gc reaps dead sandbox dirs, and the gc every create
 * runs (hutch_state_gc_auto) skips only when the runtime dir has as many
 * subdirectories as after the last full gc, and reaps as soon as a dead
 * sandbox changed that count.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "error.h"
#include "fdutil.h"
#include "state.h"

static char rt[] = "/tmp/hutch-test-state-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(rt) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return hutch_rm_rf_at(AT_FDCWD, rt);
}

/* A sandbox dir as a crashed supervisor leaves it: lock free, no state. */
static void make_dead(const char *id)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", rt, id);
	assert_int_equal(mkdir(path, 0711), 0);
	snprintf(path, sizeof(path), "%s/%s/lock", rt, id);
	assert_int_equal(hutch_write_file_at(AT_FDCWD, path, "", 0600), 0);
}

/* A live one: its lock held through the returned fd. */
static int make_live(const char *id)
{
	char path[512];
	int fd;

	make_dead(id);
	snprintf(path, sizeof(path), "%s/%s/lock", rt, id);
	fd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	return fd;
}

static bool exists(const char *id)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", rt, id);
	return access(path, F_OK) == 0;
}

/* A pinned slot (a pod's container runs with its ids) is never handed out,
 * even once the sandbox that held it is gone; unpinned, it is again. */
static void test_slot_pin(void **state)
{
	struct hutch_err err = { 0 };
	char dir[512];
	unsigned slot = 99;
	int held, pin, fd;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/uids", rt);
	held = hutch_slot_acquire(dir, 1, &slot, &err);
	assert_true(held >= 0);
	assert_int_equal(slot, 0);
	pin = hutch_slot_pin(dir, 0, &err);
	assert_true(pin >= 0);
	close(held); /* the pod's sandbox ends; its container still runs */
	fd = hutch_slot_acquire(dir, 1, &slot, &err);
	assert_int_equal(fd, -EBUSY);
	assert_non_null(strstr(err.msg, "in use"));
	/* Two containers of one pod pin it together (shared). */
	fd = hutch_slot_pin(dir, 0, &err);
	assert_true(fd >= 0);
	close(pin);
	assert_int_equal(hutch_slot_acquire(dir, 1, &slot, &err), -EBUSY);
	close(fd);
	fd = hutch_slot_acquire(dir, 1, &slot, &err);
	assert_true(fd >= 0);
	close(fd);
	/* An unwritable slots dir fails naming the pin's path. */
	snprintf(dir, sizeof(dir), "%s/no/such", rt);
	assert_int_equal(hutch_slot_pin(dir, 3, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "3.pin"));
}

static void test_gc(void **state)
{
	struct hutch_err err = { 0 };
	int live;

	(void)state;
	live = make_live("aaaaaaaaaaaa");
	make_dead("bbbbbbbbbbbb");
	/* No mark yet: a full gc. */
	assert_int_equal(hutch_state_gc_auto(rt, &err), 1);
	assert_true(exists("aaaaaaaaaaaa"));
	assert_false(exists("bbbbbbbbbbbb"));

	/* Nothing changed: skipped, and nothing to do anyway. */
	assert_int_equal(hutch_state_gc_auto(rt, &err), 0);

	/* A sandbox created after the last gc crashed: the count changed. */
	make_dead("cccccccccccc");
	assert_int_equal(hutch_state_gc_auto(rt, &err), 1);
	assert_false(exists("cccccccccccc"));

	/* A crash masked by a clean end in between (same count): skipped
	 * until the rescan interval; the explicit gc is always complete.
	 * Start again from an empty runtime dir. */
	close(live);
	assert_int_equal(hutch_rm_rf_at(AT_FDCWD, rt), 0);
	assert_int_equal(mkdir(rt, 0711), 0);
	assert_int_equal(hutch_state_gc(rt, &err), 0);
	live = make_live("eeeeeeeeeeee");
	assert_int_equal(hutch_state_gc_auto(rt, &err), 0); /* count changed: full, nothing dead */
	make_dead("ffffffffffff");
	{
		char path[512];
		snprintf(path, sizeof(path), "%s/eeeeeeeeeeee", rt);
		close(live);
		assert_int_equal(hutch_rm_rf_at(AT_FDCWD, path), 0); /* ended cleanly */
	}
	assert_int_equal(hutch_state_gc_auto(rt, &err), 0);
	assert_true(exists("ffffffffffff"));
	assert_int_equal(hutch_state_gc(rt, &err), 1);
	assert_false(exists("ffffffffffff"));
}

/* Another user's or a group-writable marker is not trusted: full gc. */
static void test_gc_mark_untrusted(void **state)
{
	struct hutch_err err = { 0 };
	char path[512];

	(void)state;
	assert_int_equal(hutch_state_gc(rt, &err), 0);
	make_dead("111111111111");
	snprintf(path, sizeof(path), "%s/.gc", rt);
	/* Forge the count the runtime dir has now, but make it 0666. */
	{
		struct stat st;
		char text[32];
		assert_int_equal(stat(rt, &st), 0);
		snprintf(text, sizeof(text), "%llu\n", (unsigned long long)st.st_nlink);
		assert_int_equal(hutch_write_file_at(AT_FDCWD, path, text, 0600), 0);
		assert_int_equal(chmod(path, 0666), 0);
	}
	assert_int_equal(hutch_state_gc_auto(rt, &err), 1);
	assert_false(exists("111111111111"));
}

/* A sandbox retired by its supervisor (DELETE / answered, teardown not
 * finished): out of ls while the lock is held, reaped by gc once free. */
static void test_gc_retired(void **state)
{
	struct hutch_err err = { 0 };
	struct hutch_paths p, q;
	char(*ids)[HUTCH_ID_LEN + 1] = NULL;
	size_t n;
	int live;

	(void)state;
	live = make_live("222222222222");
	assert_int_equal(hutch_paths_init(rt, "222222222222", &p), 0);
	assert_int_equal(hutch_state_retire(&p, &q), 0);
	assert_false(exists("222222222222"));
	assert_true(exists(".dead-222222222222"));
	assert_string_equal(strrchr(q.lock, '/'), "/lock");
	assert_int_equal(access(q.lock, F_OK), 0);
	assert_int_equal(hutch_state_list(rt, &ids, &n), 0);
	assert_int_equal(n, 0);
	free(ids);
	/* Its supervisor still finishes: gc leaves it alone. */
	assert_int_equal(hutch_state_gc(rt, &err), 0);
	assert_true(exists(".dead-222222222222"));
	/* It died before removing it: gc does. */
	close(live);
	assert_int_equal(hutch_state_gc(rt, &err), 1);
	assert_false(exists(".dead-222222222222"));
}

/* A whole id is looked up, a prefix matched against the listing; both
 * give the same answers. */
static void test_resolve(void **state)
{
	char id[HUTCH_ID_LEN + 1];
	int fd;

	(void)state;
	fd = make_live("abcdef012345");
	make_dead("abcdef999999");
	assert_int_equal(hutch_state_resolve(rt, "abcdef012345", id), 0);
	assert_string_equal(id, "abcdef012345");
	assert_int_equal(hutch_state_resolve(rt, "abcdef0", id), 0);
	assert_string_equal(id, "abcdef012345");
	assert_int_equal(hutch_state_resolve(rt, "abcdef", id), -ENOTUNIQ);
	assert_int_equal(hutch_state_resolve(rt, "abcdef012346", id), -ENOENT);
	assert_int_equal(hutch_state_resolve(rt, "abcdef99", id), 0);
	assert_string_equal(id, "abcdef999999");
	assert_int_equal(hutch_state_resolve(rt, "0", id), -ENOENT);
	assert_int_equal(hutch_state_resolve(rt, "ABCDEF012345", id), -EINVAL);
	assert_int_equal(hutch_state_resolve(rt, "abcdef0123456", id), -EINVAL);
	/* Not a sandbox's: .dead- and .new- names are never ids. */
	assert_int_equal(hutch_state_resolve(rt, ".dead-abcdef012345", id), -EINVAL);
	close(fd);
	assert_int_equal(hutch_rm_rf_at(AT_FDCWD, rt), 0);
	assert_int_equal(mkdir(rt, 0700), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_pin),          cmocka_unit_test(test_gc),
		cmocka_unit_test(test_gc_mark_untrusted), cmocka_unit_test(test_gc_retired),
		cmocka_unit_test(test_resolve),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
