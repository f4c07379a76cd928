#!/usr/bin/env bash
# Runs every Check unit-test binary of a build folder; one result line per
# binary, plus Check's own summary lines.  A binary that exits 77 skipped
# (e.g. no io_uring on this host) and says why on its last line; a case
# left out where the host cannot run it says so on a line of its own
# ("SKIP binary/case: why"), shown here.
set -u
build="${1:-build}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
. "$here/tests/lib/report.sh"
report_init "$build" unit
rc=0
for t in "$build"/tests/unit/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	out=$(CK_FORK=yes CK_DEFAULT_TIMEOUT=60 "$t" 2>&1); st=$?
	echo "$out" | grep -E '^[0-9]+%: Checks|:[EF]:|^SKIP ' || true
	# Check's own counts, so the summary counts test cases, not binaries.
	line=$(echo "$out" | grep -E '^[0-9]+%: Checks: ' | tail -1)
	if [ $st -eq 77 ]; then
		report SKIP "$name" "$(echo "$out" | tail -1)"
	elif [ $st -eq 0 ] && [ -n "$line" ]; then
		report PASS "$name" "$(echo "$line" | sed 's/^[0-9]*%: //')"
	else
		echo "$out" | tail -30
		report FAIL "$name" "exit $st"
		rc=1
	fi
done
exit $rc
