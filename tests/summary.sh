#!/usr/bin/env bash
# Adds up the result files of every suite and prints the closing line.
# Usage: summary.sh [--steps FILE] [--expect RESFILE]... DIR...
#   DIR/*.res      the suites' result lines (tests/lib/report.sh)
#   --steps FILE   "NAME STATUS [SECONDS]" lines, one per step of make test:
#                  a step that exited non-zero fails the run even with no
#                  FAIL line (a build error, a runner that died)
# Also prints each step's time and the slowest cases (DIR/*.times), so that
# a run near the CI time limit shows where the time went.
#   --expect RES   a result file that must exist and hold at least one
#                  result: a suite that never ran, or ran nothing, fails
# Exit 0 only when something passed, nothing failed, every step exited 0
# and every expected suite reported.
set -u
steps=; expect=()
while [ $# -gt 0 ]; do
	case $1 in
	--steps) steps=$2; shift 2 ;;
	--expect) expect+=("$2"); shift 2 ;;
	*) break ;;
	esac
done
pass=0; fail=0; skip=0; bad=0
seen=" "
for d in "$@"; do
	d=${d%/}
	case $seen in *" $d "*) continue ;; esac	# a folder named twice counts once
	seen="$seen$d "
	for f in "$d"/*.res; do
		[ -e "$f" ] || continue
		p=$(grep -c '^PASS' "$f"); x=$(grep -c '^FAIL' "$f"); s=$(grep -c '^SKIP' "$f")
		printf '%-28s %4d passed %4d failed %4d skipped\n' "$(basename "$(dirname "$(dirname "$f")")")/$(basename "$f" .res)" "$p" "$x" "$s"
		grep '^SKIP' "$f" | sed 's/^/    /'
		grep '^FAIL' "$f" | sed 's/^/    /'
		pass=$((pass + p)); fail=$((fail + x)); skip=$((skip + s))
	done
done
for f in ${expect[@]+"${expect[@]}"}; do
	if ! [ -s "$f" ] || ! grep -qE '^(PASS|FAIL|SKIP)' "$f"; then
		echo "NO RESULTS $f: the suite did not run, or reported nothing"
		bad=$((bad + 1))
	fi
done
if [ -n "$steps" ]; then
	if ! [ -s "$steps" ]; then
		echo "NO STEPS: $steps is missing or empty"
		bad=$((bad + 1))
	fi
	times=
	while read -r name st secs; do
		times="$times $name ${secs:-?}s"
		[ "$st" = 0 ] && continue
		echo "STEP FAILED $name: exit $st"
		bad=$((bad + 1))
	done < "${steps:-/dev/null}" 2> /dev/null
	echo "step times:$times"
fi
slow=$(for d in $seen; do cat "$d"/*.times 2> /dev/null; done | sort -rn | head -12 | awk '{printf " %s %ss", $2, $1}')
[ -n "$slow" ] && echo "slowest cases:$slow"
extra=
[ "$bad" -gt 0 ] && extra=", $bad step(s) failed or without results"
echo "total: $pass passed, $fail failed, $skip skipped$extra"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ] && [ "$bad" -eq 0 ]
