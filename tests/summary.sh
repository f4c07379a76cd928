#!/usr/bin/env bash
# Adds up the result files of every suite and prints the closing line.
set -u
pass=0; fail=0; skip=0
for d in "$@"; do
	for f in "$d"/*.res; do
		[ -e "$f" ] || continue
		p=$(grep -c '^PASS' "$f"); x=$(grep -c '^FAIL' "$f"); s=$(grep -c '^SKIP' "$f")
		printf '%-28s %4d passed %4d failed %4d skipped\n' "$(basename "$(dirname "$(dirname "$f")")")/$(basename "$f" .res)" "$p" "$x" "$s"
		grep '^SKIP' "$f" | sed 's/^/    /'
		grep '^FAIL' "$f" | sed 's/^/    /'
		pass=$((pass + p)); fail=$((fail + x)); skip=$((skip + s))
	done
done
echo "total: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
