#!/usr/bin/env bash
# limits.sh GW TR (in the guest): issue 14 defect 6 against the kernel
# target.  A subsystem of its own with 20 namespaces (files), namespace N
# in ANA group N, on two ports of its own (trsvcid 4451/4452) that both
# have ANA groups 1 to 128, nvmet's most: the ANA log page is 4192 bytes,
# more than one 4 KiB read (nvmet ignores the log page offset and fills
# what fits; the gateway used to refuse the page as malformed and never
# came up).  Group 20 is inaccessible on the first port and optimized on
# the second: with round-robin, a verified write/read loop on the export
# of namespace 20 must send nothing to path 0 (group 20 is not among the
# first 16 groups, which the gateway used to treat as optimized).
set -u
GW=${1:?usage: limits.sh GW TR} tr=${2:?}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
IO="$here/../func/resil/io.py"
PY=/usr/bin/python3
nqn=nqn.2014-08.org.nvmf-gateway:interop-limits
case $tr in tcp) pa=51 pb=52 ;; rdma) pa=61 pb=62 ;; *) echo "transport $tr?"; exit 2 ;; esac
NGRP=128 NNS=20 GRP=20
W=/tmp/limits-$tr
rm -rf "$W" && mkdir -p "$W" "$NVMET_WORK" && cd "$W" || exit 1
export NVMF_GATEWAY_LOG=info NVMF_GATEWAY_STATE_DIR=/tmp/gw-state
S=$NVMET/subsystems/$nqn
GP= VP=
fail() {
	echo "FAIL: $*"
	echo "--- gateway log"; grep -v '^ *$' "$W/gw.log" 2> /dev/null | tail -60
	exit 1
}
# Everything made here goes, in the order configfs lets it go, so that
# the other cases see nvmet's ANA log as before.
cleanup() {
	[ -n "$VP" ] && kill "$VP" 2> /dev/null && wait "$VP"
	[ -n "$GP" ] && kill -TERM "$GP" 2> /dev/null && wait "$GP"
	local p g n
	for p in $pa $pb; do
		[ -e "$NVMET/ports/$p/subsystems/$nqn" ] && nvmet_unlink "$nqn" "$p"
	done
	for n in $(seq $NNS); do
		[ -d "$S/namespaces/$n" ] || continue
		printf 0 > "$S/namespaces/$n/enable"
		rmdir "$S/namespaces/$n"
	done
	[ -d "$S" ] && rmdir "$S"
	for p in $pa $pb; do
		[ -d "$NVMET/ports/$p" ] || continue
		(cd "$NVMET/ports/$p/ana_groups" && rmdir $(seq 2 $NGRP) 2> /dev/null)
		rmdir "$NVMET/ports/$p"
	done
	rm -f "$NVMET_WORK"/limits-*.img
}
trap cleanup EXIT

step() { echo "$(date +%T) $*"; }
step "ports $pa and $pb with ANA groups 1 to $NGRP"
for p in "$pa:4451" "$pb:4452"; do
	nvmet_port "${p%:*}" "$tr" 10.0.2.15 "${p#*:}" || fail "port ${p%:*}"
	# One mkdir for all: each process start is slow in the TCG guest.
	(cd "$NVMET/ports/${p%:*}/ana_groups" && mkdir $(seq 2 $NGRP)) || fail "ANA groups"
done
step "subsystem with $NNS namespaces"
mkdir "$S" && _nvmet_set "$S/attr_allow_any_host" 1 || fail "subsystem"
for n in $(seq $NNS); do
	f=$NVMET_WORK/limits-$n.img
	truncate -s 8M "$f" && mkdir "$S/namespaces/$n" &&
		_nvmet_set "$S/namespaces/$n/device_path" "$f" &&
		_nvmet_set "$S/namespaces/$n/buffered_io" 1 &&
		_nvmet_set "$S/namespaces/$n/ana_grpid" "$n" &&
		_nvmet_set "$S/namespaces/$n/enable" 1 || fail "namespace $n"
done
_nvmet_set "$NVMET/ports/$pa/ana_groups/$GRP/ana_state" inaccessible || fail "ana state"
_nvmet_set "$NVMET/ports/$pb/ana_groups/$GRP/ana_state" optimized || fail "ana state"
nvmet_link "$nqn" $pa && nvmet_link "$nqn" $pb || fail "link"
step "gateway"

path() { echo "{ transport = \"$tr\"; traddr = \"10.0.2.15\"; trsvcid = \"$1\"; }"; }
cat > "$W/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "/tmp/gw-state"; metrics = "unix:$W/metrics.sock"; };
targets = ( { name = "t1"; subnqn = "$nqn"; multipath = "round-robin"; reconnect_delay = 2;
    paths = ( $(path 4451), $(path 4452) ); } );
exports = ( { name = "e1"; target = "t1"; nsid = $GRP; nbd = { listen = "unix:$W/e1.sock"; }; } );
CONF
"$GW" check -c "$W/gw.conf" || fail "config"
"$GW" run -f -c "$W/gw.conf" > "$W/gw.log" 2>&1 &
GP=$!
for _ in $(seq 300); do
	[ -S "$W/e1.sock" ] && break
	kill -0 "$GP" 2> /dev/null || fail "gateway exited"
	sleep 0.2
done
[ -S "$W/e1.sock" ] || fail "gateway did not start"
grep 'ANA log page is at least' "$W/gw.log" || fail "the ANA log was not read past 4 KiB"
for p in 0 1; do
	grep -q "t1/path$p: .*-> live" "$W/gw.log" || fail "path $p did not come up"
done
grep "nsid $GRP (ANA group $GRP)" "$W/gw.log" || fail "no ANA state for group $GRP in the log"

io_of() { # reads + writes + errors of path $1
	curl -fsS --unix-socket "$W/metrics.sock" http://x/metrics |
		awk -v p="path=\"$1\"" '($1 ~ /^nvmf_gateway_path_(reads|writes|errors)_total\{/ && index($1, p)) { s += $2 } END { print s + 0 }'
}
step "verify loop on nsid $GRP"
"$PY" "$IO" verify "$W/e1.sock" 600 "$W/stop" > "$W/verify.out" 2> "$W/verify.err" &
VP=$!
# Python starts slowly in the TCG guest: time the loop by the gateway's
# own counters, 200 I/Os on the optimized path (or 240 s) and then 5 s.
for _ in $(seq 240); do [ "$(io_of 1)" -gt 200 ] && break; sleep 1; done
sleep 5
touch "$W/stop"
wait "$VP"
vst=$?
VP=
cat "$W/verify.out" "$W/verify.err"
[ $vst = 0 ] || fail "the verify loop saw errors"
a=$(io_of 0) b=$(io_of 1)
echo "nsid $GRP (group $GRP): path 0 (inaccessible) $a, path 1 (optimized) $b"
[ "$b" -gt 0 ] || fail "the optimized path carried nothing"
[ "$a" = 0 ] || fail "the inaccessible path carried $a I/Os"
kill -TERM "$GP"
wait "$GP" || fail "gateway exit status $? after SIGTERM"
GP=
echo pass
