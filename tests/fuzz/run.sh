#!/usr/bin/env bash
# Runs every libFuzzer binary built from tests/fuzz/fuzz_NAME.c for SECONDS
# on a copy of its seed corpus tests/fuzz/corpus/NAME/ (the seeds stay
# untouched), JOBS fuzzers at a time (an input slower than 60 s is a
# hang, generous for a loaded machine); one result line per fuzzer in
# BUILD/results/fuzz.res, with its executions and coverage.  A crash,
# sanitizer report, leak, timeout or missing binary is a FAIL; the input
# that did it is kept in BUILD/work/NAME/artifacts/ and reproduces with:
# BUILD/fuzz_NAME FILE
# With FUZZ_MERGE=1 the inputs of the grown corpus that add coverage to
# the seeds are added to them (-merge=1): what is kept in the tree.  FUZZ_ONLY=regex picks fuzzers.
# Usage: tests/fuzz/run.sh [BUILD [SECONDS [JOBS]]]
set -u
build="${1:-build-fuzz}"
secs="${2:-20}"
jobs="${3:-2}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
. "$here/tests/lib/report.sh"

# One fuzzer; run by xargs, so it only appends to the result file.
run_one() {
	local name="$1" short="${1#fuzz_}"
	local bin="$build/$name" work="$build/work/${1#fuzz_}" log="$build/$name.log"
	RESULTS="$build/results"; SUITE=fuzz
	if [ ! -x "$bin" ]; then
		report FAIL "$name" "not built"
		return 1
	fi
	rm -rf "$work"
	mkdir -p "$work/corpus" "$work/artifacts"
	local seeds=0
	if [ -d "$here/tests/fuzz/corpus/$short" ]; then
		cp -r "$here/tests/fuzz/corpus/$short/." "$work/corpus/"
		seeds=$(find "$work/corpus" -type f | wc -l)
	fi
	"$bin" -max_total_time="$secs" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/artifacts/" "$work/corpus" > "$log" 2>&1
	local st=$?
	local found runs cov ft
	found=$(find "$work/artifacts" -type f | wc -l)
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	# The last status line ("#N DONE cov: C ft: F corp: ...") has the coverage.
	cov=$(grep -oE '^#[0-9]+[[:space:]]+[A-Z]+[[:space:]]+cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
	ft=$(echo "$cov" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
	cov=$(echo "$cov" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
	if [ "$st" -eq 0 ] && [ "$found" -eq 0 ] && [ -n "$runs" ]; then
		if [ "${FUZZ_MERGE:-0}" = 1 ]; then
			# The seeds stay (named, readable); only inputs that add
			# coverage to them join the tree.
			local seeddir="$here/tests/fuzz/corpus/$short"
			mkdir -p "$seeddir"
			"$bin" -merge=1 -rss_limit_mb=2048 "$seeddir" "$work/corpus" >> "$log" 2>&1
		fi
		report PASS "$name" "${runs} runs in ${secs} s from $seeds seeds, cov ${cov:-?} ft ${ft:-?}"
	else
		{
			echo "---- $name ----"
			grep -E 'ERROR|SUMMARY|==[0-9]+==|abort|runtime error|completed|without' "$log" | head -20
			tail -5 "$log"
		} >&2
		report FAIL "$name" "exit $st, $found artifact(s) in $work/artifacts, log $log"
		return 1
	fi
}

if [ "${1:-}" = --one ]; then
	build="$2" secs="$3"
	run_one "$4"
	exit
fi

report_init "$build" fuzz
names=()
for src in "$here"/tests/fuzz/fuzz_*.c; do
	[ -e "$src" ] || continue
	name=$(basename "$src" .c)
	[[ "$name" =~ ${FUZZ_ONLY:-.} ]] && names+=("$name")
done
printf '%s\n' "${names[@]}" |
	xargs -P "$jobs" -I{} bash "$here/tests/fuzz/run.sh" --one "$build" "$secs" {}
# xargs' status says little (123 for any failure); the result file says all.
! report_failed
