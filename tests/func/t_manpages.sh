#!/usr/bin/env bash
# The man pages cannot drift from the code: every subcommand of main.c's
# table, every long and short option of the getopt tables in gateway/
# (struct option entries, SESSION_LONGOPTS and QOS_LONGOPTS included) is in
# nvmf-gateway(8), and every key the configuration parser accepts (the
# F_*(..., "key", ...) field tables of gateway/config_schema.c) is in
# nvmf-gateway.conf(5).  Both pages format without a warning
# (groff -ww, man --warnings).
set -u
: "${TOP:?run by tests/func/run.sh}"
. "$TOP/tests/lib/func.sh"
m8="$TOP/man/nvmf-gateway.8" m5="$TOP/man/nvmf-gateway.conf.5"
[ -f "$m8" ] && [ -f "$m5" ] || fail "no man pages in $TOP/man"
cd "$TOP" || exit 1

# In roff a '-' of an option is written '\-'; compare on plain text.
plain8=$(sed 's/\\-/-/g' "$m8")
plain5=$(sed 's/\\-/-/g' "$m5")

cmds=$(grep -ohE '\{ *"[a-z][a-z-]*", *cmd_[a-z_]+ *\}' gateway/main.c | sed -E 's/\{ *"([^"]+)".*/\1/' | sort -u)
longs=$(grep -ohE '\{ *"[a-z][a-z0-9-]*", *(required|no|optional)_argument' gateway/*.c gateway/*.h |
	sed -E 's/\{ *"([^"]+)".*/\1/' | sort -u)
shorts=$(grep -ohE '(required|no|optional)_argument, *0, *'"'"'[A-Za-z0-9]'"'" gateway/*.c gateway/*.h |
	sed -E "s/.*'(.)'/\1/" | sort -u)
keys=$(grep -ohE 'F_[A-Z0-9]+\( *([A-Z]+, *)?"[a-z_][a-z0-9_]*"' gateway/config_schema.c |
	sed -E 's/.*"([^"]+)"/\1/' | sort -u)
nc=$(echo "$cmds" | wc -w) nl=$(echo "$longs" | wc -w) ns=$(echo "$shorts" | wc -w) nk=$(echo "$keys" | wc -w)
echo "from the code: $nc commands, $nl long options, $ns short options, $nk config keys"
# A pattern that stopped matching would make everything pass: the code
# has at least these many today.
[ "$nc" -ge 6 ] && [ "$nl" -ge 40 ] && [ "$ns" -ge 15 ] && [ "$nk" -ge 40 ] ||
	fail "extraction found too few names; did the code's tables change form?"

missing=()
for c in $cmds; do
	grep -qE "^\.SS $c\$" <<< "$plain8" || missing+=("nvmf-gateway(8): command '$c' (no .SS $c)")
done
for o in $longs; do
	grep -qE -- "--$o([^a-z0-9-]|\$)" <<< "$plain8" || missing+=("nvmf-gateway(8): option --$o")
done
for o in $shorts; do
	grep -qE -- "(^|[^a-z0-9-])-$o([^A-Za-z0-9-]|\$)" <<< "$plain8" || missing+=("nvmf-gateway(8): option -$o")
done
for k in $keys; do
	# A key is documented where it heads a .TP entry: ".BR key (type...)".
	grep -qE "^\.BR $k \"? *\(" <<< "$plain5" || missing+=("nvmf-gateway.conf(5): key $k")
done
if [ ${#missing[@]} -gt 0 ]; then
	printf 'missing: %s\n' "${missing[@]}"
	fail "${#missing[@]} names of the code are not in the man pages"
fi
echo "every command, option and key is documented"

command -v groff > /dev/null || skip "coverage passed, but no groff to check formatting (package groff-base)"
for p in "$m8" "$m5"; do
	w=$(groff -man -ww -z "$p" 2>&1)
	[ -z "$w" ] || { echo "$w"; fail "groff warnings in $p"; }
	if command -v man > /dev/null; then
		w=$(MANWIDTH=80 man --warnings -l "$p" 2>&1 > /dev/null)
		[ -z "$w" ] || { echo "$w"; fail "man --warnings in $p"; }
	fi
done
echo "man pages: OK"
