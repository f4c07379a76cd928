# Shared by the suite runners: every test outcome is one line in
# $RESULTS/<suite>.res ("PASS name", "FAIL name", "SKIP name: why"), which
# tests/summary.sh adds up.  Sourced, not run.
# The seconds since the previous report (or report_init) go to stdout and to
# $RESULTS/<suite>.times, so that the slow cases of a CI run can be found
# (REPORT_DT=SECONDS instead, for a runner that runs cases side by side).
report_init() {
	RESULTS="$1/results"; SUITE="$2"
	mkdir -p "$RESULTS"; : > "$RESULTS/$SUITE.res"; : > "$RESULTS/$SUITE.times"
	_report_t0=$SECONDS
}
report() {	# report PASS|FAIL|SKIP name [why]
	local st="$1" name="$2" dt=${REPORT_DT:-$((SECONDS - ${_report_t0:-$SECONDS}))}
	shift 2
	_report_t0=$SECONDS
	echo "$st $name${*:+: $*}" >> "$RESULTS/$SUITE.res"
	echo "$dt $name" >> "$RESULTS/$SUITE.times"
	printf '%-4s %s/%s%s [%d s]\n' "$st" "$SUITE" "$name" "${*:+ ($*)}" "$dt"
}
report_failed() { grep -q '^FAIL' "$RESULTS/$SUITE.res"; }
