# Shared by the suite runners: every test outcome is one line in
# $RESULTS/<suite>.res ("PASS name", "FAIL name", "SKIP name: why"), which
# tests/summary.sh adds up.  Sourced, not run.
report_init() {
	RESULTS="$1/results"; SUITE="$2"
	mkdir -p "$RESULTS"; : > "$RESULTS/$SUITE.res"
}
report() {	# report PASS|FAIL|SKIP name [why]
	local st="$1" name="$2"; shift 2
	echo "$st $name${*:+: $*}" >> "$RESULTS/$SUITE.res"
	printf '%-4s %s/%s%s\n' "$st" "$SUITE" "$name" "${*:+ ($*)}"
}
report_failed() { grep -q '^FAIL' "$RESULTS/$SUITE.res"; }
