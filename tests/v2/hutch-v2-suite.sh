#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The integration suite's key cases on pure cgroup v2, for
# `../shared/v2vm/v2vm run --src . --dest /srv/hutch --context service
#  --script tests/v2/hutch-v2-suite.sh` (scripts/test-v2 --suite runs it):
# as root, from where it is started (scripts/test-v2: a plain system
# service, a CI agent's place), pytest over the files whose tests go through
# cgroups, systemd and delegation, where v2 differs (lifecycle, limits,
# sleep and wake, isolation attacks, network modes, files, processes,
# pools); then the rootless files, whose throw-away users each get a systemd
# user session (loginctl enable-linger: user@UID.service, /run/user/UID)
# and create their sandboxes with limits, through that user manager
# (HUTCH_TEST_USER_SESSION=1, see tests/integration/test_rootless.py).
# The tree must not be under /root (0700): the users run build/hutch.
# Emulation (TCG) is slow: HUTCH_TEST_SLOWDOWN scales the few bounds that
# time the host, never a sleep. JUnit files and durations go to $V2VM_OUT.
# --checks: tests/v2/hutch-v2-checks.sh first, in the same boot (it builds
# hutch; its FAILs count too).
# Each pytest run prints "SUITE <name> PASS|FAIL <pytest's last line>";
# the exit status is the number of FAILs (2: the build failed).
set -u
fails=0
if [ "${1:-}" = --checks ]; then
	bash tests/v2/hutch-v2-checks.sh
	fails=$?
fi
case "$PWD" in /root | /root/*)
	echo "SUITE setup FAIL the tree is under /root (0700): run v2vm with --dest /srv/hutch"
	exit 2
	;;
esac
out=${V2VM_OUT:-/tmp}
if [ ! -x build/hutch ] || [ ! -d build/tests ]; then
	echo "== building hutch and the test helpers"
	t0=$(date +%s)
	{ cmake -S . -B build -DHUTCH_TESTS=OFF >/dev/null && cmake --build build -j "$(nproc)" >/dev/null; } || {
		echo "SUITE build FAIL"
		exit 2
	}
	echo "== built in $(($(date +%s) - t0)) s"
fi
chmod -R a+rX build
export HUTCH_BIN=$PWD/build/hutch HUTCH_HELPERS_DIR=$PWD/build/tests
export HUTCH_TEST_SLOWDOWN=${HUTCH_TEST_SLOWDOWN:-3}
echo "== context ${V2VM_CONTEXT:-?}: $(cat /proc/self/cgroup)"
echo "== user@.service: $(systemctl show -p Delegate,DelegateControllers user@0.service 2>/dev/null | tr '\n' ' ')"
grep -h -i '^Delegate' /lib/systemd/system/user@.service /lib/systemd/system/user@.service.d/*.conf 2>/dev/null

# suite NAME PYTEST-ARGS...: one pytest run, its summary line, its JUnit file.
suite() {
	local name=$1 t0 rc last
	shift
	t0=$(date +%s)
	python3 -m pytest -q -p no:cacheprovider -rfE --durations=15 \
		--junitxml="$out/$name.xml" "$@" 2>&1 | tee "$out/$name.log"
	rc=${PIPESTATUS[0]}
	last=$(grep -E '(passed|failed|error)' "$out/$name.log" | tail -1 | tr -d '=' | sed 's/^ *//')
	if [ "$rc" = 0 ]; then
		echo "SUITE $name PASS $last ($(($(date +%s) - t0)) s)"
	else
		echo "SUITE $name FAIL exit $rc: $last ($(($(date +%s) - t0)) s)"
		fails=$((fails + 1))
	fi
}

# The choice, and what is left out (measured under TCG, whole files: 25 min
# as root): the files whose tests go through the cgroup tree, systemd's
# units and freezing (limits, OOM, pids, CPU quota, stats, sleep and wake,
# TTLs and timeouts, crash cleanup, pools' scopes, the doctor), and of the
# isolation attacks, network modes (all, allow), files and processes the
# cases that make and remove sandboxes. Left out: option and request
# parsing (*usage_errors, *bad_body, *cli_errors, *file_errors,
# *invalid_requests, *syntax_refused: no cgroup in them), the long ones
# that time the emulator, not v2 (a 1 GiB stream: 217 s, a full tmpfs:
# 86 s, pip in a venv: 57 s, logs --follow: 39 s, pool claim races: 98 s,
# fault injection at every step: 170 s, 200 create/run cycles: 62 s),
# the TTLs of 2 s (test_ttl_expiry*: under TCG a stream may start after its
# TTL ran out: seen 12-05), and image pulls (no network
# in the VM).
T=tests/integration
skip="usage_errors or bad_body or cli_errors or file_errors or invalid_requests"
skip="$skip or syntax_refused or one_gib_stream or full_tmpfs or slow_download"
skip="$skip or venv_and_pip or cli_logs_follow or claimed_once or only_matching_creations"
skip="$skip or claim_rejects or 200_cycles or ttl_expiry"
skip="$skip or set_timeout_extends_past_the_ttl"
suite root -k "not ($skip)" $T/test_lifecycle.py $T/test_limits.py $T/test_session.py \
	$T/test_stats.py $T/test_timeout.py $T/test_crash.py $T/test_smoke.py $T/test_pool.py \
	$T/test_isolation.py $T/test_files.py $T/test_procs.py \
	$T/test_network.py::TestAll $T/test_network.py::TestAllow \
	$T/test_network.py::test_rm_leaves_nothing $T/test_network.py::test_kill9_supervisor_then_gc_leaves_nothing \
	$T/test_network.py::test_table_stays_until_the_last_sandbox_goes \
	$T/test_cli.py::test_doctor_json $T/test_cli.py::test_doctor_names_a_firewall_that_drops_forwarding \
	$T/test_image_sandbox.py
# pasta (rootless --network all) wants an interface with a default route;
# the VM has only lo: a dummy one while the rootless files run (netfake's
# routes are more specific; nothing leaves the VM). The image files run
# here on Debian 12's 6.1, where overlayfs takes the layers by path, not by
# fd (rootfs/overlay.c; lowerdir+ by fd is 6.13+): measured under TCG,
# test_image_sandbox.py's cases without netfake 281 s as root, the rootless
# image file 133 s. Left out for now: test_pool_of_an_image as a user (its
# create got another sandbox than the pool's ready one in the VM: the test
# started its pool --no-limits, and a user session's create has limits,
# another pool key; the test now matches them and passed alone in the VM,
# 12-05 03:13; it joins this list after a whole pass).
dummy=""
if ! ip -4 route show default | grep -q .; then
	dummy=v2dummy0
	ip link add "$dummy" type dummy && ip addr add 192.0.2.1/24 dev "$dummy" &&
		ip link set "$dummy" up && ip route add default via 192.0.2.254 dev "$dummy"
fi
# test_rootless_snapshot.py's positive case (a user's snapshot, spawn,
# fork and rollback through its delegated cgroup's freeze) runs only
# here (and its shell twin in hutch-v2-checks.sh, which CI runs): passed
# in the VM on 12-07 (service context, 160 s under TCG at host load 10-12).
# test_rootless_owners.py: appuser's owners given back through the overlay,
# whose first landing failed on this kernel only (docs/snapshots.md
# "Kernels and cost"); 104 s setup + its case under TCG, 12-07.
HUTCH_TEST_USER_SESSION=1 suite rootless $T/test_rootless.py $T/test_rootless_net.py \
	$T/test_rootless_image.py $T/test_rootless_snapshot.py $T/test_rootless_owners.py \
	--deselect $T/test_rootless_image.py::test_pool_of_an_image
[ -z "$dummy" ] || ip link del "$dummy"
left=$(find /sys/fs/cgroup -name "hutch-*" 2>/dev/null)
[ -z "$left" ] || {
	echo "SUITE leftovers FAIL hutch cgroups left: $left"
	fails=$((fails + 1))
}
echo "== $fails FAIL"
exit $fails
