#!/usr/bin/env bash
# `check` accepts every shipped example and reports each error of a broken
# file as FILE:LINE: message, exiting 1.
set -u
: "${GW:?run by tests/func/run.sh}" "${TOP:?}"
. "$TOP/tests/lib/func.sh"

n=0
for f in "$TOP"/etc/*.conf; do
	[ -e "$f" ] || fail "no etc/*.conf"
	out=$("$GW" check -c "$f" 2>&1); st=$?
	echo "$out"
	[ $st -eq 0 ] || fail "$f: exit $st"
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$f: not one line"
	case $out in *OK*) ;; *) fail "$f: no OK in summary" ;; esac
	n=$((n + 1))
done
echo "$n example files pass"

tmp_dir gw-check
bad="$tmp/broken.conf"
cat > "$bad" <<'CONF'
gateway = { reactors = 0; };
targets = ( { name = "t1"; subnqn = "nqn.2026-01.org.example:t1";
  paths = ( { transport = "tcp"; traddr = "127.0.0.1"; tos = 300; } ); } );
exports = ( { name = "e1"; target = "t2"; fuse = true; } );
CONF
out=$("$GW" check -c "$bad" 2>&1); st=$?
echo "$out"
[ $st -eq 1 ] || fail "broken file: exit $st, want 1"
for want in \
	"$bad:1: gateway.reactors = 0 is out of range 1..256" \
	"$bad:3: targets[0].paths[0].tos = 300 is out of range -1..255" \
	"$bad:4: exports[0].target: unknown target 't2'"; do
	printf '%s\n' "$out" | grep -qxF "$want" || fail "missing: $want"
done
[ "$(printf '%s\n' "$out" | grep -c "^$bad:[0-9]*: ")" -eq 3 ] ||
	fail "want exactly 3 FILE:LINE: lines"
echo "broken file: 3 errors reported"
