#!/usr/bin/env bash
# Runs every Check unit-test binary of a build folder; one result line per
# binary, plus Check's own summary lines.  A binary that exits 77 skipped
# (e.g. no io_uring on this host) and says why on its last line; a case
# left out where the host cannot run it says so on a line of its own
# ("SKIP binary/case: why"), shown here.
# UNIT_JOBS=N runs up to N binaries at once (make test runs 2: the long
# ones wait on deadlines and peers, not on the CPU).  Each binary's
# resources are its own (mkdtemp, ports the kernel picks, namespaces named
# by pid); output is shown per binary, whole, as each one ends.
set -u
build="${1:-build}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
. "$here/tests/lib/report.sh"
report_init "$build" unit
jobs=${UNIT_JOBS:-1}
rc=0
tmpd=$(mktemp -d /tmp/unit-run.XXXXXX)
trap 'rm -rf "$tmpd"' EXIT
declare -A run_name=() run_t0=()

# finish PID: report the binary that PID ran.
finish() {
	local pid=$1 name=${run_name[$1]} st out line
	st=$(cat "$tmpd/$pid.st" 2> /dev/null || echo 125)
	out=$(cat "$tmpd/$pid.out" 2> /dev/null)
	REPORT_DT=$(( SECONDS - ${run_t0[$pid]} ))
	echo "$out" | grep -E '^[0-9]+%: Checks|:[EF]:|^SKIP ' || true
	# Check's own counts, so the summary counts test cases, not binaries.
	line=$(echo "$out" | grep -E '^[0-9]+%: Checks: ' | tail -1)
	if [ "$st" -eq 77 ]; then
		report SKIP "$name" "$(echo "$out" | tail -1)"
	elif [ "$st" -eq 0 ] && [ -n "$line" ]; then
		report PASS "$name" "$(echo "$line" | sed 's/^[0-9]*%: //')"
	else
		echo "$out" | tail -30
		report FAIL "$name" "exit $st"
		rc=1
	fi
	unset "run_name[$pid]" "run_t0[$pid]" REPORT_DT
}
reap_one() {
	local pid
	wait -n -p pid
	[ -n "${pid:-}" ] || { echo "run.sh: wait -n gave no binary (bash 5.1 or later needed)" >&2; exit 2; }
	finish "$pid"
}
for t in "$build"/tests/unit/test_*; do
	[ -x "$t" ] || continue
	while [ ${#run_name[@]} -ge "$jobs" ]; do reap_one; done
	# $BASHPID read first: in the redirection of the binary itself it is
	# already the binary's own pid.
	( me=$BASHPID; CK_FORK=yes CK_DEFAULT_TIMEOUT=60 "$t" > "$tmpd/$me.out" 2>&1
	  echo $? > "$tmpd/$me.st" ) &
	run_name[$!]=$(basename "$t") run_t0[$!]=$SECONDS
done
while [ ${#run_name[@]} -gt 0 ]; do reap_one; done
exit $rc
