#!/usr/bin/env bash
# The bounded chaos step of `make test`: every seed in tests/chaos/seeds.fixed
# (seeds that once failed), then new random seeds while the time budget
# (CHAOS_BUDGET seconds, default 180, fixed seeds included; `make chaos` runs longer ones) allows another
# one, alternately with the epoll reactor forced and on auto (named
# new-seed-N-epoll and new-seed-N).  One result line per seed in
# BUILD/results/chaos.res.
set -u
build="${1:-build}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
. "$here/tests/lib/report.sh"
report_init "$build" chaos
budget=${CHAOS_BUDGET:-180}
per_seed=45 # a seed of CHAOS_SECONDS=25 takes about 35 s here; new ones start only with this left
start=$(date +%s)
rc=0
log="$here/$build/results/chaos.log"
: > "$log"
one() { # one SEED KIND [BACKEND]: BACKEND forced (epoll) or auto (none)
	local env=() name="$2-seed-$1"
	[ -n "${3:-}" ] && env=("NVMF_GATEWAY_REACTOR_BACKEND=$3") name="$name-$3"
	if env ${env[@]+"${env[@]}"} BUILD="$build" "$here/tests/chaos/run" "$1" >> "$log" 2>&1; then
		report PASS "$name"
	else
		grep -A12 "seed $1 \.\.\." "$log" | grep -E '^(FAIL|chaos:)' | tail -12
		report FAIL "$name" "reproduce: ${env[*]:+${env[*]} }BUILD=$build tests/chaos/run $1"
		rc=1
	fi
}
st=$(BUILD="$build" "$here/tests/chaos/run" --check 2>&1) || {
	report SKIP chaos "$st"
	exit 0
}
# The model's own rules first (no target: a fraction of a second).
if out=$(/usr/bin/python3 "$here/tests/chaos/chaos.py" --self-test 2>&1); then
	report PASS model-self-test
else
	echo "$out"
	report FAIL model-self-test "tests/chaos/chaos.py --self-test"
	rc=1
fi
for s in $(sed 's/#.*//' "$here/tests/chaos/seeds.fixed"); do one "$s" fixed; done
# New seeds alternate between the epoll backend and auto (io_uring here),
# so both reactors meet random schedules without a longer step.
be=epoll
while [ $(($(date +%s) - start + per_seed)) -le "$budget" ]; do
	one "$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')" new $be
	if [ -n "$be" ]; then be=; else be=epoll; fi
done
grep '^chaos: seeds run' "$log" | awk '{s+=$4; f+=$7; i+=$10} END {
	printf "chaos: %d seeds, %d faults injected, %d I/Os checked\n", s, f, i }'
echo "chaos: $(($(date +%s) - start)) s"
exit $rc
