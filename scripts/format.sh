#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Format the C sources with clang-format (STYLE.md §9), or with --check fail
# when one is not formatted.
set -eu
cd "$(dirname "$0")/.."
# Tracked and new (untracked, not ignored) files: a file not yet added
# must be formatted before its first commit too.
FILES=$(git ls-files --cached --others --exclude-standard '*.c' '*.h' 2>/dev/null ||
	find runtime rootfs netpolicy tests -name '*.[ch]')
if [ "${1:-}" = "--check" ]; then
	bad=0
	for f in $FILES; do
		if ! clang-format "$f" | cmp -s - "$f"; then
			echo "not formatted: $f (run scripts/format.sh)"
			bad=1
		fi
	done
	exit $bad
fi
# shellcheck disable=SC2086
clang-format -i $FILES
