#!/bin/bash
# guest-agent.sh SHARE: PID 1 of the test guest, inside the chroot on the
# host's root.  Runs the command files that vm_exec (vm.sh) drops in
# SHARE/cmd, one at a time in name order: SHARE/cmd/ID runs with its output
# in SHARE/out/ID, then its exit status lands in SHARE/out/ID.rc.  The first
# line of a command file is "#limit SECONDS".  SHARE/cmd/stop powers off.
# There is no inotify for host-side changes over 9p, hence the polling.
set -u
share=$1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The root is read-only: anything that writes into $HOME gets tmpfs.
export HOME=/tmp TERM=dumb
mkdir -p /run/lock
cd "$share" || exit 1

# read -t on a fifo that nobody writes is a sleep without forking.
mkfifo /run/agent.tick && exec {tick}<> /run/agent.tick

echo "agent ready on $(uname -r)" > ready.new && mv ready.new ready
while :; do
	for f in cmd/*; do
		[ -f "$f" ] || continue
		id=${f#cmd/}
		if [ "$id" = stop ]; then
			sync
			echo o > /proc/sysrq-trigger
			sleep 60 # the power-off completes asynchronously
		fi
		read -r _ limit < "$f"
		# timeout runs the command in its own process group and kills the
		# group only on expiry, so a backgrounded job outlives the call.
		timeout -k 5 "$limit" bash "$f" < /dev/null >> "out/$id" 2>&1
		echo $? > "out/$id.rc.new" && mv "out/$id.rc.new" "out/$id.rc"
		rm -f "$f"
	done
	read -r -t 0.1 -u "$tick" || : # 142 on a timeout
done
