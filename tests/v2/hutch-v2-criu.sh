#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Full snapshots (CRIU) on pure cgroup v2: tests/integration/test_criu.py as
# root from a plain system service, with a CRIU brought in by hand, for
# `../shared/v2vm/v2vm run --src . --context service --script
# tests/v2/hutch-v2-criu.sh` (scripts/test-v2 --criu PATH puts the binary at
# v2criu/criu and the libraries ldd names, less libc's, in v2criu/lib/).
# Debian 12's own criu (3.17.1) passes 'criu check' on the VM's 6.1 but
# cannot dump for hutch: it does not know --network-lock skip, added in
# CRIU 3.18 (docs/snapshots.md "Full snapshots on pure cgroup v2").
# Prints "SUITE criu PASS|FAIL <pytest's last line>"; the exit status is
# the number of FAILs (2: no CRIU, criu check or the build failed).
set -u
if [ ! -x v2criu/criu ]; then
	echo "SUITE criu FAIL no v2criu/criu in the tree (scripts/test-v2 --criu PATH puts it there)"
	exit 2
fi
cp -n v2criu/lib/* /usr/local/lib/ 2>/dev/null
ldconfig
install -m755 v2criu/criu /usr/local/sbin/criu
/usr/local/sbin/criu --version
if ! /usr/local/sbin/criu check; then
	echo "SUITE criu FAIL criu check failed on $(uname -r)"
	exit 2
fi
t0=$(date +%s)
{ cmake -S . -B build -DHUTCH_TESTS=OFF >/dev/null && cmake --build build -j "$(nproc)" >/dev/null; } || {
	echo "SUITE criu FAIL the build"
	exit 2
}
echo "== built in $(($(date +%s) - t0)) s"
export HUTCH_RUNTIME_DIR=/run/hutch-v2-criu HUTCH_IMAGE_STORE=/var/tmp/hutch-v2-criu-store
export HUTCH_BIN=$PWD/build/hutch HUTCH_HELPERS_DIR=$PWD/build/tests
export HUTCH_TEST_CRIU=/usr/local/sbin/criu HUTCH_TEST_SLOWDOWN=${HUTCH_TEST_SLOWDOWN:-3}
out=${V2VM_OUT:-/tmp}
t0=$(date +%s)
python3 -m pytest -q -p no:cacheprovider -rfEs --junitxml="$out/criu.xml" \
	tests/integration/test_criu.py 2>&1 | tee "$out/criu.log"
rc=${PIPESTATUS[0]}
last=$(grep -E '(passed|failed|error)' "$out/criu.log" | tail -1 | tr -d '=' | sed 's/^ *//')
if [ "$rc" = 0 ]; then
	echo "SUITE criu PASS $last ($(($(date +%s) - t0)) s)"
	exit 0
fi
echo "SUITE criu FAIL exit $rc: $last ($(($(date +%s) - t0)) s)"
exit 1
