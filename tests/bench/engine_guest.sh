# shellcheck shell=bash
# engine_guest.sh: guest-side runs of tests/bench/engine.sh, sourced in the
# guest after tests/interop/nvmet.sh.  Needs in the environment: GW (the
# gateway binary), EG_NQN (the nvmet subsystem, namespace 1), EG_OUT (the
# result folder, on the share), EG_T (seconds per run); EG_ADDR, EG_PORT
# (default 10.0.2.15 4420).  Each way of one point, NAME RW BS QD [SIZE]
# (SIZE: the region used, default the whole namespace), leaves in EG_OUT
#   NAME.WAY.json   the tool's own JSON (bench -o json, or fio's)
#   NAME.WAY.cpu    the CPU of the run: guest busy and total jiffies over it
#                   (/proc/stat, every vCPU) and the gateway's utime+stime
#   NAME.WAY.queue  the block device's queue settings (nbd, kernel)
# and returns non-zero, with a message, on the first step that fails:
#   eg_bench ...    the gateway's `bench` (its CPU from getrusage, /usr/bin/time)
#   eg_benchpoll .. the same with `--poll-us 50`
#   eg_bench2q ...  the same with 2 I/O queues, half the depth each
#   eg_bench2r ...  the same with 2 reactors, a queue each: two threads
#   eg_kernel2j ..  eg_kernel with 2 fio jobs, half the depth each: two
#                   threads, to set bench2r against
#   eg_nbd ...      fio on /dev/nbdN of `$GW nbd ... auto` (nbd_lib.sh's
#                   nbd_start; stopped with SIGTERM, exit code 0 checked);
#                   the gateway's CPU from /proc/PID/stat around fio
#   eg_kernel ...   fio on /dev/nvmeXn1 of `nvme connect -t tcp`
#   eg_backend ...  fio on nvmet's backing loop device: no network
#   eg_nbdmem ...   fio on /dev/nbdN of `$GW nbd --mem 256M auto`: the
#                   kernel's NBD path with no NVMe-oF behind it, the
#                   ceiling of any NBD server here (SIZE must fit in 256M)
#   eg_qnbd ...     the same ceiling with qemu-nbd -c over a tmpfs file
#   eg_knbd ...     qemu-nbd -c exporting the kernel host's /dev/nvmeXn1
# fio: io_uring, direct=1, time based, total latency percentiles.
# With EG_PROFILE=1, each way also leaves NAME.WAY.prof.json: a guest-wide
# perf profile (cpu-clock, call chains) of the run's middle EG_T-2
# seconds, split by tests/bench/perf_split.py into the target's work, the
# initiator's and the rest.

EG_ADDR=${EG_ADDR:-10.0.2.15}
EG_PORT=${EG_PORT:-4420}
EG_HZ=$(getconf CLK_TCK)

# Busy and total jiffies of all vCPUs (idle and iowait are not busy).
eg_stat() {
	local _ u n s i w q sq st
	read -r _ u n s i w q sq st _ < /proc/stat
	echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}

# utime+stime of PID, in clock ticks.
eg_pid_cpu() {
	local s f
	s=$(cat "/proc/$1/stat") || return 1
	read -r -a f <<< "${s##*) }" # the fields after "(comm) ": state is f[0]
	echo $((f[11] + f[12]))
}

# eg_cpu FILE STAT0 STAT1 GW_TICKS|null
eg_cpu() {
	local b0 t0 b1 t1
	read -r b0 t0 <<< "$2"
	read -r b1 t1 <<< "$3"
	echo "{\"hz\": $EG_HZ, \"busy\": $((b1 - b0)), \"total\": $((t1 - t0)), \"gw\": $4}" > "$1"
}

# eg_queue DEV: what decides how a request reaches the driver (for a
# multipath head, /dev/nvmeXnY, that of its path device nvmeXcZnY).
eg_queue() {
	local d=${1#/dev/} p k
	if [[ $d =~ ^nvme([0-9]+)n([0-9]+)$ ]] && [ ! -e "/sys/block/$d/mq" ]; then
		for p in /sys/block/nvme"${BASH_REMATCH[1]}"c*n"${BASH_REMATCH[2]}"; do
			[ -e "$p" ] && d=${p##*/}
			break
		done
	fi
	printf '%s: ' "$d"
	for k in max_sectors_kb max_hw_sectors_kb max_segments nr_requests scheduler \
		read_ahead_kb logical_block_size; do
		printf '%s=%s ' "$k" "$(cat "/sys/block/$d/queue/$k" 2> /dev/null)"
	done
	printf 'hw_queues=%s\n' "$(find "/sys/block/$d/mq" -mindepth 1 -maxdepth 1 2> /dev/null | wc -l)"
}

# eg_prof_start O / eg_prof_stop O: around a way's run (its s0 and s1).
# perf starts 1 s in, past a bench's connect, and stops 1 s before the
# run's end; the split is done here, where the guest's symbols are.  97 Hz
# per vCPU: unwinding a chain is dear under emulation, and a faster rate
# slowed the kernel host at QD1 by almost half.  The data stays on guest tmpfs
# (writing it to the share would load the host during the run).
eg_prof_start() {
	[ "${EG_PROFILE:-}" = 1 ] || return 0
	(sleep 1 && exec perf record -q -a -g -F 97 -e cpu-clock -o /tmp/eg.perf.data \
		-- sleep $((EG_T - 2))) > "$1.perf.log" 2>&1 &
	EG_PROF_PID=$!
}
eg_prof_stop() {
	[ "${EG_PROFILE:-}" = 1 ] || return 0
	wait "$EG_PROF_PID" || { echo "engine: perf record for $1 failed"; cat "$1.perf.log"; return 1; }
	perf script -i /tmp/eg.perf.data -F comm,tid,ip,sym,dso 2>> "$1.perf.log" |
		python3 tests/bench/perf_split.py > "$1.prof.json"
	rm -f /tmp/eg.perf.data
}

eg_fio() { # DEV NAME RW BS QD [SIZE]; EG_FIO_JOBS jobs (default 1), reported as one
	local jobs=${EG_FIO_JOBS:-1} split=() bytes
	if [ "$jobs" -gt 1 ]; then
		# Each job its own slice of the region, as bench's reactors.
		bytes=$(numfmt --from=iec "${6:-$(blockdev --getsize64 "$1")}") || return 1
		split=(--size=$((bytes / jobs)) --offset_increment=$((bytes / jobs)))
	fi
	fio --name="$2" --filename="$1" --ioengine=io_uring --direct=1 --rw="$3" --bs="$4" \
		--iodepth="$5" --runtime="$EG_T" --time_based --lat_percentiles=1 \
		--numjobs="$jobs" --group_reporting \
		${6:+--size="$6"} "${split[@]}" --output-format=json
}

eg_bench() { # NAME RW BS QD [SIZE]; EG_BENCH_WAY, EG_BENCH_ARGS: see eg_benchpoll
	local o=$EG_OUT/$1.${EG_BENCH_WAY:-bench} s0 s1 u s
	s0=$(eg_stat)
	eg_prof_start "$o"
	# shellcheck disable=SC2086 # the extra options, split
	NVMF_GATEWAY_STATE_DIR=/tmp/gw-state /usr/bin/time -f '%U %S' -o "$o.time" \
		"$GW" bench -t tcp -a "$EG_ADDR" -s "$EG_PORT" -n "$EG_NQN" -w "$2" -b "$3" \
		-d "$4" -T "$EG_T" ${5:+--size "$5"} ${EG_BENCH_ARGS:-} -o json > "$o.json" ||
		{ echo "engine: bench $1 failed"; cat "$o.time"; return 1; }
	s1=$(eg_stat)
	eg_prof_stop "$o"
	read -r u s < "$o.time"
	eg_cpu "$o.cpu" "$s0" "$s1" "$(awk -v u="$u" -v s="$s" -v hz="$EG_HZ" 'BEGIN { printf "%.0f", (u + s) * hz }')"
}

# The same with the reactor's busy-poll window (--poll-us 50): the engine
# trades a vCPU for its wakeups, as SPDK's host does all the time.
eg_benchpoll() {
	EG_BENCH_WAY=benchpoll EG_BENCH_ARGS="--poll-us 50" eg_bench "$@"
}

# Two I/O queues (-j 2) with half the depth each, the same I/Os in flight:
# nvmet works each queue on its own CPU, as for the kernel host's two
# queues (nvme-cli makes one per vCPU).
eg_bench2q() {
	EG_BENCH_WAY=bench2q EG_BENCH_ARGS="-j 2" eg_bench "$1" "$2" "$3" $(($4 / 2)) ${5:+"$5"}
}

eg_nbd() { # NAME RW BS QD [SIZE]
	local o=$EG_OUT/$1.nbd s0 s1 g0 g1 r
	. tests/interop/nbd_lib.sh
	trap - ERR
	nbd_start "$EG_NQN" auto "$1" > "$o.log" 2>&1 ||
		{ echo "engine: nbd $1 did not attach"; cat "$o.log"; return 1; }
	eg_queue "$NBD_DEV" > "$o.queue"
	g0=$(eg_pid_cpu "$GW_PID") && s0=$(eg_stat)
	eg_prof_start "$o"
	eg_fio "$NBD_DEV" "$@" > "$o.json"
	r=$?
	s1=$(eg_stat) && g1=$(eg_pid_cpu "$GW_PID")
	eg_prof_stop "$o"
	nbd_stop >> "$o.log" 2>&1 ||
		{ echo "engine: nbd $1: the gateway did not stop cleanly"; cat "$o.log"; return 1; }
	[ $r = 0 ] || { echo "engine: fio on $NBD_DEV ($1) failed"; return 1; }
	eg_cpu "$o.cpu" "$s0" "$s1" $((g1 - g0))
}

# Two reactors, each with its own queue at half the depth: the engine's
# work on two threads.  Over loopback nvmet receives a connection's data on
# the CPU that sent it, so one sending thread shares its vCPU with the
# target's work for it, and two spread both.
eg_bench2r() {
	EG_BENCH_WAY=bench2r EG_BENCH_ARGS="--reactors 2" eg_bench "$1" "$2" "$3" $(($4 / 2)) ${5:+"$5"}
}

# eg_kconnect: connects the kernel's own host to EG_NQN and prints its
# /dev/nvmeXn1; eg_kdisconnect undoes it.
eg_kconnect() {
	nvme connect -t tcp -a "$EG_ADDR" -s "$EG_PORT" -n "$EG_NQN" > /dev/null || return 1
	nvme_host_dev "$EG_NQN" || { eg_kdisconnect; return 1; }
}
eg_kdisconnect() { nvme disconnect -n "$EG_NQN" > /dev/null; }

eg_kernel() { # NAME RW BS QD [SIZE]; EG_KERNEL_WAY, EG_FIO_JOBS: see eg_kernel2j
	local o=$EG_OUT/$1.${EG_KERNEL_WAY:-kernel} s0 s1 dev r
	dev=$(eg_kconnect) || return 1
	eg_queue "$dev" > "$o.queue"
	s0=$(eg_stat)
	eg_prof_start "$o"
	eg_fio "$dev" "$@" > "$o.json"
	r=$?
	s1=$(eg_stat)
	eg_prof_stop "$o"
	eg_kdisconnect
	[ $r = 0 ] || { echo "engine: fio on $dev ($1) failed"; return 1; }
	eg_cpu "$o.cpu" "$s0" "$s1" null
}

# The kernel host from two fio jobs at half the depth each (group
# reporting: one result): two submitting threads, as bench2r has two
# reactors (nvme-cli makes a queue per vCPU, and a job uses its CPU's).
eg_kernel2j() {
	EG_KERNEL_WAY=kernel2j EG_FIO_JOBS=2 eg_kernel "$1" "$2" "$3" $(($4 / 2)) ${5:+"$5"}
}

# fio on nvmet's own backing device (the loop device over tmpfs), no
# network: the target's storage path alone, what no initiator can pass.
eg_backend() { # NAME RW BS QD [SIZE]
	local o=$EG_OUT/$1.backend s0 s1 dev r
	dev=$(cat "$NVMET/subsystems/$EG_NQN/namespaces/1/device_path") || return 1
	eg_queue "$dev" > "$o.queue"
	s0=$(eg_stat)
	eg_prof_start "$o"
	eg_fio "$dev" "$@" > "$o.json"
	r=$?
	s1=$(eg_stat)
	eg_prof_stop "$o"
	[ $r = 0 ] || { echo "engine: fio on $dev ($1) failed"; return 1; }
	eg_cpu "$o.cpu" "$s0" "$s1" null
}

eg_nbdmem() { # NAME RW BS QD SIZE
	local o=$EG_OUT/$1.nbdmem s0 s1 g0 g1 r pid dev=
	"$GW" nbd --mem 256M auto > "$o.log" 2>&1 &
	pid=$!
	for _ in $(seq 300); do
		dev=$(grep -oE '/dev/nbd[0-9]+ attached' "$o.log" | head -1 | cut -d' ' -f1) || true
		[ -n "$dev" ] && break
		kill -0 "$pid" 2> /dev/null || break
		sleep 0.2
	done
	[ -n "$dev" ] || { echo "engine: nbd --mem did not attach"; cat "$o.log"; kill "$pid"; return 1; }
	eg_queue "$dev" > "$o.queue"
	g0=$(eg_pid_cpu "$pid") && s0=$(eg_stat)
	eg_prof_start "$o"
	eg_fio "$dev" "$@" > "$o.json"
	r=$?
	s1=$(eg_stat) && g1=$(eg_pid_cpu "$pid")
	eg_prof_stop "$o"
	kill -TERM "$pid"
	wait "$pid" || { echo "engine: nbd --mem: exit status $?"; cat "$o.log"; return 1; }
	[ $r = 0 ] || { echo "engine: fio on $dev (nbd --mem, $1) failed"; return 1; }
	eg_cpu "$o.cpu" "$s0" "$s1" $((g1 - g0))
}

# A kernel NBD device no process of ours holds (qemu-nbd -c takes a named
# one): the first whose pid file is absent.
eg_free_nbd() {
	local d
	for d in /sys/block/nbd*; do
		[ -e "$d/pid" ] || { echo "/dev/${d##*/}"; return 0; }
	done
	return 1
}

# eg_qemu_nbd NAME WAY IMAGE QEMU-NBD-ARGS -- RW BS QD [SIZE]: fio on the
# /dev/nbdN that `qemu-nbd -c` attaches to IMAGE (qemu-nbd is both the NBD
# server and the one that hands the kernel its socket); qemu-nbd's CPU
# from /proc/PID/stat around fio.
eg_qemu_nbd() {
	local name=$1 img=$3 o=$EG_OUT/$1.$2 s0 s1 g0 g1 r dev pid="" args=()
	shift 3
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	dev=$(eg_free_nbd) || { echo "engine: no free /dev/nbdN for qemu-nbd"; return 1; }
	qemu-nbd -c "$dev" -f raw "${args[@]}" "$img" > "$o.log" 2>&1 ||
		{ echo "engine: qemu-nbd -c $dev $img failed"; cat "$o.log"; return 1; }
	for _ in $(seq 100); do
		pid=$(cat "/sys/block/${dev#/dev/}/pid" 2> /dev/null) && [ -n "$pid" ] && break
		sleep 0.1
	done
	[ -n "$pid" ] || { echo "engine: qemu-nbd -c $dev: no pid"; qemu-nbd -d "$dev"; return 1; }
	eg_queue "$dev" > "$o.queue"
	g0=$(eg_pid_cpu "$pid") && s0=$(eg_stat)
	eg_prof_start "$o"
	eg_fio "$dev" "$name" "$@" > "$o.json"
	r=$?
	s1=$(eg_stat) && g1=$(eg_pid_cpu "$pid")
	eg_prof_stop "$o"
	qemu-nbd -d "$dev" >> "$o.log" 2>&1
	for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
	[ $r = 0 ] || { echo "engine: fio on $dev (qemu-nbd, $name) failed"; return 1; }
	eg_cpu "$o.cpu" "$s0" "$s1" $((g1 - g0))
}

# The kernel's NBD path with a server we did not write and no NVMe-oF
# behind it: qemu-nbd on a 256 MiB file in guest RAM (tmpfs, through the
# page cache: O_DIRECT is refused there).  Beside nbdmem, the NBD ceiling
# measured with someone else's server.
eg_qnbd() { # NAME RW BS QD SIZE
	local img=/dev/shm/eg-qnbd.img r
	truncate -s 256M "$img" || return 1
	eg_qemu_nbd "$1" qnbd "$img" -- "${@:2}"
	r=$?
	rm -f "$img"
	return $r
}

# What a host with a kernel NVMe/TCP initiator would build instead of the
# gateway: `nvme connect`, then qemu-nbd exporting the namespace to
# /dev/nbdN (cache=none, aio=native: the kernel host's block device
# directly, as the gateway reaches the target directly).  The peer stack
# of the nbd way.
eg_knbd() { # NAME RW BS QD [SIZE]
	local dev r
	dev=$(eg_kconnect) || return 1
	eg_qemu_nbd "$1" knbd "$dev" --cache=none --aio=native -- "${@:2}"
	r=$?
	eg_kdisconnect
	return $r
}
