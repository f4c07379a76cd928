#!/usr/bin/env bash
# Functional tests on this host: each tests/func/t_*.sh is one test; exit 0
# pass, 77 skip (with the reason on its last line), anything else fail.
# Usage: run.sh [BUILD [SUITE [BACKEND [PATTERN...]]]]
#   SUITE    result file name (default func): BUILD/results/SUITE.res
#   BACKEND  auto (default: the environment's choice), io_uring or epoll:
#            exported as NVMF_GATEWAY_REACTOR_BACKEND to every gateway
#   PATTERN  test name globs (t_nbd*); default every test
# Each test's wall time goes to BUILD/results/SUITE.times.
set -u
build="${1:-build}"
suite="${2:-func}"
backend="${3:-auto}"
shift $(( $# < 3 ? $# : 3 ))
here="$(cd "$(dirname "$0")/../.." && pwd)"
. "$here/tests/lib/report.sh"
report_init "$build" "$suite"
export GW="$here/$build/nvmf-gateway" TOP="$here" BUILD="$here/$build"
case $backend in
auto) ;;
io_uring|epoll) export NVMF_GATEWAY_REACTOR_BACKEND="$backend" ;;
*) echo "run.sh: unknown backend $backend" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || set -- 't_*'
times="$here/$build/results/$suite.times"; : > "$times"
rc=0
for t in "$here"/tests/func/t_*.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .sh)
	sel=
	for p in "$@"; do
		# shellcheck disable=SC2254
		case $name in $p) sel=1 ;; esac
	done
	[ -n "$sel" ] || continue
	log="$here/$build/results/$suite-$name.log"
	t0=$(date +%s)
	timeout 600 bash "$t" > "$log" 2>&1; st=$?
	echo "$name $(( $(date +%s) - t0 ))" >> "$times"
	case $st in
	0) report PASS "$name" ;;
	77) report SKIP "$name" "$(tail -1 "$log")" ;;
	*) tail -40 "$log"; report FAIL "$name" "exit $st, log $log"; rc=1 ;;
	esac
done
exit $rc
