#!/bin/bash
# Fails when a source file includes a layer above its own (README "Layers"):
#   gateway/base  <-  transports (tcp/, rdma/, auth/ are leaves of it)
#   <-  gateway/volume  <-  nbd/, fuse/ (exporters: base and volume only)
#   <-  gateway/*.c (the daemon and its commands: anything).
# Also fails on io_uring used outside the reactor (gateway/base/reactor*):
# modules ask the reactor for operations, so that its epoll backend can
# stand behind the same calls (issue 18).
# Prints file:line of each offending #include "..." and exits 1.
# Usage: tests/check-layers.sh [TOP]   (default: the current directory)
set -u
cd "${1:-.}" || exit 2

srcs=$(find gateway transports nbd fuse -name '*.[ch]' | sort)
# shellcheck disable=SC2086
awk '
function layer(p) {
	if (p ~ /^gateway\/base\/[^\/]+$/) return "base"
	if (p ~ /^gateway\/volume\/[^\/]+$/) return "volume"
	if (p ~ /^gateway\/[^\/]+$/) return "daemon"
	if (p ~ /^transports\/(tcp|rdma|auth)\/[^\/]+$/) { split(p, a, "/"); return a[2] }
	if (p ~ /^transports\/[^\/]+$/) return "transports"
	if (p ~ /^(nbd|fuse)\/[^\/]+$/) { split(p, a, "/"); return a[1] }
	return "unknown"
}
BEGIN {
	# What each layer may include besides itself.  A wire (tcp, rdma)
	# uses the transport core and auth (Connect authenticates), never
	# the other wire.
	may["base"] = " "
	may["transports"] = " base auth "
	may["auth"] = " base transports "
	may["tcp"] = may["rdma"] = " base transports auth "
	may["volume"] = " base transports "
	may["nbd"] = may["fuse"] = " base volume "
	may["daemon"] = " base transports tcp rdma auth volume nbd fuse "
	bad = 0
}
FNR == 1 {
	from = layer(FILENAME)
	if (from == "unknown") {
		print FILENAME ": in no layer (add its folder to tests/check-layers.sh)"
		bad = 1
	}
}
/^[ \t]*#[ \t]*include[ \t]*"/ {
	n++
	inc = $0
	sub(/^[^"]*"/, "", inc)
	sub(/".*/, "", inc)
	to = layer(inc)
	if (from != "unknown" && to != from && index(may[from], " " to " ") == 0) {
		allow = may[from]
		gsub(/^ +| +$/, "", allow)
		printf "%s:%d: includes \"%s\": %s may include only itself%s%s\n", FILENAME, FNR, inc,
			from, allow == "" ? "" : " and ", allow
		bad = 1
	}
}
END {
	if (bad) { print "check-layers: FAIL (an include runs upward)"; exit 1 }
	print "check-layers: ok (" n " includes)"
}' $srcs
layers=$?
# shellcheck disable=SC2086
# Calls, types and constants, not prose ("kernel.io_uring_disabled").
uring=$(grep -nE '\bio_uring_[a-z0-9_]+[[:space:]]*\(|struct io_uring|IORING_|liburing\.h' $srcs |
	grep -v '^gateway/base/reactor[^/]*:')
if [ -n "$uring" ]; then
	printf '%s\n' "$uring"
	echo "check-layers: FAIL (io_uring outside gateway/base/reactor*: ask the reactor for the operation)"
	exit 1
fi
exit $layers
