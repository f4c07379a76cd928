#!/usr/bin/env bash
# Functional tests on this host: each tests/func/t_*.sh is one test; exit 0
# pass, 77 skip (with the reason on its last line), anything else fail.
set -u
build="${1:-build}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
. "$here/tests/lib/report.sh"
report_init "$build" func
export GW="$here/$build/nvmf-gateway" TOP="$here" BUILD="$here/$build"
rc=0
for t in "$here"/tests/func/t_*.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .sh)
	log="$here/$build/results/func-$name.log"
	timeout 600 bash "$t" > "$log" 2>&1; st=$?
	case $st in
	0) report PASS "$name" ;;
	77) report SKIP "$name" "$(tail -1 "$log")" ;;
	*) tail -40 "$log"; report FAIL "$name" "exit $st, log $log"; rc=1 ;;
	esac
done
exit $rc
