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
# FUNC_JOBS=N runs up to N tests at once (make test runs 3: most tests
# wait on timers and peers, so three on this 2-core host take little more
# than one).  Each test's resources are its own (mktemp, free_port,
# namespaces named by pid); a test whose header says "# func: alone"
# (system-wide state: dpkg, make install in the tree) runs with no other.
jobs=${FUNC_JOBS:-1}
declare -A run_name=() run_t0=()
rc=0
# finish PID: report the test that PID ran.
finish() {
	local pid=$1 name=${run_name[$1]} st
	st=$(cat "$tmpd/$pid.st" 2> /dev/null || echo 125)
	log="$here/$build/results/$suite-$name.log"
	REPORT_DT=$(( SECONDS - ${run_t0[$pid]} ))
	case $st in
	0) report PASS "$name" ;;
	77) report SKIP "$name" "$(tail -1 "$log")" ;;
	*) tail -40 "$log"; report FAIL "$name" "exit $st, log $log"; rc=1 ;;
	esac
	unset "run_name[$pid]" "run_t0[$pid]" REPORT_DT
}
# reap_one: wait for any running test and report it.
reap_one() {
	local pid
	wait -n -p pid
	# No pid: nothing left to wait for, or a bash before 5.1 (no -p);
	# either way looping on would spin.
	[ -n "${pid:-}" ] || { echo "run.sh: wait -n gave no test (bash 5.1 or later needed)" >&2; exit 2; }
	finish "$pid"
}
tmpd=$(mktemp -d /tmp/func-run.XXXXXX)
trap 'rm -rf "$tmpd"' EXIT
for t in "$here"/tests/func/t_*.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .sh)
	sel=
	for p in "$@"; do
		# shellcheck disable=SC2254
		case $name in $p) sel=1 ;; esac
	done
	[ -n "$sel" ] || continue
	alone=
	grep -q '^# func: alone' "$t" && alone=1
	# A test that must run alone waits for every other; so does the
	# next test after it (it is the only one running until it ends).
	while [ ${#run_name[@]} -gt 0 ] && { [ -n "$alone" ] || [ ${#run_name[@]} -ge "$jobs" ]; }; do
		reap_one
	done
	log="$here/$build/results/$suite-$name.log"
	( timeout 600 bash "$t" > "$log" 2>&1; echo $? > "$tmpd/$BASHPID.st" ) &
	run_name[$!]=$name run_t0[$!]=$SECONDS
	if [ -n "$alone" ]; then reap_one; fi
done
while [ ${#run_name[@]} -gt 0 ]; do reap_one; done
exit $rc
