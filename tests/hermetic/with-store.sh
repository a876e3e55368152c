#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# with-store.sh STORE|- CMD...: run CMD (as root) in a private mount
# namespace where /var/lib/hutch, the machine's default image store, is
# STORE (bind-mounted read-only: a write fails loudly; '-': an empty one). The machine's own /var/lib and
# /var/lib/hutch are never touched: /var/lib is an overlay with a throw-away
# upper layer inside the namespace only. Proves that a suite passes
# "whatever the machine's store holds" (issue 26), e.g.
#   tests/hermetic/with-store.sh /var/tmp/me/store-default \
#       python3 -m pytest -q tests/integration/test_files.py
set -eu
[ $# -ge 2 ] || { echo "usage: $0 STORE|- CMD..." >&2; exit 64; }
store=$1
shift
[ "$store" = - ] || [ -d "$store/images" ] || { echo "$0: $store is not an image store" >&2; exit 64; }
work=$(mktemp -d /var/tmp/hutch-with-store.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/upper" "$work/work" "$work/empty"
unshare -m --propagation private sh -eu -c '
	work=$1 store=$2
	shift 2
	mount -t overlay hutch-with-store \
		-o "lowerdir=/var/lib,upperdir=$work/upper,workdir=$work/work" /var/lib
	mkdir -p /var/lib/hutch
	[ "$store" = - ] && store=$work/empty
	mount --bind "$store" /var/lib/hutch
	mount -o remount,bind,ro /var/lib/hutch # a write to it fails loudly
	echo "with-store: /var/lib/hutch is $store here: $(ls "$store/images" 2>/dev/null | tr "\n" " ")" >&2
	exec "$@"
' with-store "$work" "$store" "$@"
