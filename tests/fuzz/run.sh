#!/usr/bin/env bash
# Runs every libFuzzer binary built from tests/fuzz/fuzz_NAME.c for SECONDS
# on a copy of its seed corpus tests/fuzz/corpus/NAME/ (the seeds stay
# untouched); one result line per fuzzer in BUILD/results/fuzz.res.  A
# crash, sanitizer report, leak, timeout or missing binary is a FAIL; the
# input that did it is kept in BUILD/work/NAME/artifacts/ and reproduces
# with: BUILD/fuzz_NAME FILE
# Usage: tests/fuzz/run.sh [BUILD [SECONDS]]
set -u
build="${1:-build-fuzz}"
secs="${2:-60}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
. "$here/tests/lib/report.sh"
report_init "$build" fuzz
rc=0
for src in "$here"/tests/fuzz/fuzz_*.c; do
	[ -e "$src" ] || continue
	name=$(basename "$src" .c)
	short=${name#fuzz_}
	bin="$build/$name"
	if [ ! -x "$bin" ]; then
		report FAIL "$name" "not built"
		rc=1
		continue
	fi
	work="$build/work/$short"
	rm -rf "$work"
	mkdir -p "$work/corpus" "$work/artifacts"
	seeds=0
	if [ -d "$here/tests/fuzz/corpus/$short" ]; then
		cp -r "$here/tests/fuzz/corpus/$short/." "$work/corpus/"
		seeds=$(find "$work/corpus" -type f | wc -l)
	fi
	log="$build/$name.log"
	"$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/artifacts/" "$work/corpus" > "$log" 2>&1
	st=$?
	found=$(find "$work/artifacts" -type f | wc -l)
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	if [ "$st" -eq 0 ] && [ "$found" -eq 0 ] && [ -n "$runs" ]; then
		report PASS "$name" "${runs} runs in ${secs} s from $seeds seeds"
	else
		grep -E 'ERROR|SUMMARY|==[0-9]+==|abort|runtime error|completed|without' "$log" | head -20
		tail -5 "$log"
		report FAIL "$name" "exit $st, $found artifact(s) in $work/artifacts, log $log"
		rc=1
	fi
done
exit $rc
