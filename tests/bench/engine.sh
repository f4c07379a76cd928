#!/usr/bin/env bash
# The NVMe/TCP engine against the kernel's own host, in one guest run (issue
# 20): the Linux target (nvmet, a 4 KiB-block namespace on a loop device over
# a sparse file on guest tmpfs), then for each point, one after the other
# with the same queue depth and duration:
#   bench   the gateway's `bench` subcommand (one I/O queue, its default);
#   benchpoll  the same with the busy-poll window, `--poll-us 50`;
#   nbd     fio on /dev/nbdN attached by `nvmf-gateway nbd ... auto` (one
#           NBD connection, one NVMe I/O queue: the command's defaults);
#   kernel  fio on /dev/nvmeXn1 of `nvme connect -t tcp` (one I/O queue per
#           vCPU, 2: nvme-cli's default).
#   backend fio on nvmet's backing loop device, no network at all: the
#           target's storage path alone, the ceiling of every way above
#           (measured 2.7-10x the kernel host's: the storage is not
#           what limits any of them).
#   nbdmem  (128k points only) fio on /dev/nbdN of `nvmf-gateway nbd --mem`:
#           the kernel's NBD path with no NVMe-oF behind it, over the first
#           256 MiB: what any NBD server can reach here, the ceiling of
#           the nbd row.
#   qnbd    (128k points only) the same ceiling with a server we did not
#           write: fio on the /dev/nbdN of `qemu-nbd -c` over a 256 MiB
#           file on guest tmpfs.
#   knbd    the peer stack, what a host with a kernel initiator would build
#           instead of the gateway: `nvme connect -t tcp`, then `qemu-nbd
#           -c /dev/nbdN --cache=none --aio=native /dev/nvmeXn1`; fio on
#           that /dev/nbdN (one NBD connection, as the nbd way).
# fio runs io_uring, direct=1, time based; latencies are submission to
# completion (fio's total latency, bench's own).  Points: 4k randread QD32
# and QD1, 128k read QD8, 128k write QD8 (last, over the first 256 MiB).
# Guest-side steps are tests/bench/engine_guest.sh.  CPU per I/O: the whole
# guest's busy time over the run (/proc/stat; it includes nvmet, the kernel
# hosts and fio), the gateway process's own (getrusage for bench,
# /proc/PID/stat for nbd) and fio's (its usr+sys); and, on the host, the CPU
# that processes other than qemu took during the run (a busy host starves
# the vCPUs, and the serial paths lose most).  Prints one table and the
# ratios bench/kernel and nbd/kernel (IOPS, so also MiB/s), then the issue's
# guest goals, met or not.  Figures only, no assertion.  Under TCG the
# absolute numbers say little; the ratios are the point.  Not part of make
# test; boots the VM, so:
#   flock /tmp/nvmf-vm.lock tests/bench/engine.sh [BUILD]
# Env: BENCH_TIME seconds per run (default 10); ENGINE_KEEP=DIR copies the
# raw results (JSON, queue settings, gateway logs) there; ENGINE_GW_LOG=debug
# puts the gateway's debug lines (pipes, splices, polls) in those logs, and
# prints where the nbd way's requests spent their time in the gateway;
# ENGINE_WAYS=REGEX runs only those ways (no table then); ENGINE_ONLY=REGEX
# runs only the points whose name matches (e.g. 128k); ENGINE_BACKEND=epoll
# (or io_uring) sets the gateway's reactor backend in the guest;
# ENGINE_ENV='VAR=VALUE ...' exports those in the guest for every way (an
# A/B of a gateway knob: NVMF_GATEWAY_SPLICE_READS=none);
# ENGINE_CPU=max,-erms,-fsrm sets the guest's CPU model (below: TCG's `rep
# movsb`); ENGINE_PROFILE=1 profiles every run guest-wide (perf at 97 Hz, which
# slows the run a little) and prints, per point and way, the busy CPU per
# I/O split into the target's part and the initiator's
# (tests/bench/perf_split.py), then what 1.5x the kernel host would leave
# bench's initiator.  Every run prints whether 1.5x is out of reach even
# for an initiator that cost no CPU, and for one that cost only the floor
# of any user-space initiator, measured in the same guest before the runs
# (tests/bench/floor.c: a copy of 128 KiB at the 128K points, a sleep
# until woken at QD1).  The write region is written once before the runs,
# so that no way pays tmpfs's first allocation of it.
set -u
build="${1:-build}"
top="$(cd "$(dirname "$0")/../.." && pwd)"
T=${BENCH_TIME:-10}
export VM_CACHE=${VM_CACHE:-/var/tmp/nvmf-gateway-vm}
# ENGINE_CPU: qemu's -cpu for the guest (default: VM_CPU, else max).  Under
# TCG (qemu 7.2 here) `rep movsb` is emulated one byte per pass (224 us per
# 128 KiB in the guest, against 30 for `rep movsq` and 55-64 for a loop of
# 8-byte moves), and with ERMS and no FSRM the guest kernel copies to and
# from user memory with it while its own memcpy (memcpy_orig, 8-byte
# moves) does not: every payload byte a user-space initiator moves costs it
# 3.5-7x what the kernel host's cost it.  ENGINE_CPU=max,-erms,-fsrm takes
# that emulator artefact away from every way alike (a qemu whose max has
# FSRM would otherwise put `rep movsb` back in both copies); the header
# prints the guest's erms and fsrm flags (README "Other benchmarks").
export VM_CPU=${ENGINE_CPU:-${VM_CPU:-max}}
. "$top/tests/interop/vm.sh"
cd "$top" || exit 1
GW="$top/$build/nvmf-gateway"
FLOOR="$top/$build/tests/bench/floor"
[ -x "$GW" ] && [ -x "$FLOOR" ] ||
	{ echo "engine.sh: build the gateway and its bench tools first (make all)" >&2; exit 1; }
nqn=nqn.2014-08.org.nvmf-gateway:bench
state=$(mktemp -d /tmp/nvmf-bench.XXXXXX) || exit 1
trap 'vm_stop; rm -rf "$state"' EXIT
out="$state/share/res"
# name rw bs qd region: writes last, over a region that fits in guest RAM.
points=("4k-randread-qd32 randread 4k 32 -" "4k-randread-qd1 randread 4k 1 -"
	"128k-read-qd8 read 128k 8 -" "128k-write-qd8 write 128k 8 256M")
if [ -n "${ENGINE_ONLY:-}" ]; then
	sel=()
	for p in "${points[@]}"; do [[ ${p%% *} =~ $ENGINE_ONLY ]] && sel+=("$p"); done
	[ ${#sel[@]} -gt 0 ] || { echo "engine.sh: no point matches ENGINE_ONLY=$ENGINE_ONLY" >&2; exit 1; }
	points=("${sel[@]}")
fi

vm_start "$state" > /dev/null || exit 1
mkdir -p "$out"
# The write point's region is written once before any way runs: the first
# write of a page of the sparse file on tmpfs allocates and zeroes it, which
# the first way at the write point (bench) paid alone before (the guest's
# shared memory grew by the region during its run and not after).  Reads of
# that region now copy pages where they found holes before 2026-12-06.
wregion=
for p in "${points[@]}"; do [[ $p == *\ write\ * ]] && wregion=${p##* }; done
[[ -z $wregion || $wregion =~ ^[0-9]+M$ ]] || { echo "engine.sh: write region $wregion is not in MiB" >&2; exit 1; }
vm_exec ". tests/interop/nvmet.sh && nvmet_subsys $nqn 1G 4096 &&
	${wregion:+dd if=/dev/zero of=\"\$NVMET_WORK/$nqn.img\" bs=1M count=${wregion%M} conv=notrunc status=none &&}
	nvmet_port 1 tcp 10.0.2.15 4420 && nvmet_link $nqn 1" || exit 1
vm_exec "grep -m1 '^flags' /proc/cpuinfo | grep -o -w -E 'erms|fsrm' | tr '\n' ' '" > "$out/cpuflags" || exit 1
# Two costs every user-space initiator pays of its own CPU, measured in
# this guest for the bound at the end (tests/bench/floor.c): a copy of 128
# KiB (a payload is copied at least once in the ways considered there) and
# a sleep in one system call until woken (a QD1 I/O of an initiator that
# sleeps).
vm_exec "'$FLOOR' copy 128k 3 && '$FLOOR' wait 3" > "$out/floor.raw" ||
	{ echo "engine.sh: floor failed" >&2; exit 1; }
# Only the two result lines (the agent's output has stderr in it too),
# checked now rather than after the runs.
grep -E '^(copy|wait) [0-9]+ ops=[0-9]+ cpu_us=[0-9.]+' "$out/floor.raw" > "$out/floor"
[ "$(grep -c . "$out/floor")" = 2 ] || { echo "engine.sh: floor printed no result:" >&2; cat "$out/floor.raw" >&2; exit 1; }

# Host busy jiffies (all CPUs) and qemu's utime+stime: what else ran on
# the host during a run (another benchmark leaves qemu's vCPUs less than
# they think they have, and the serial paths lose most).
host_cpu() {
	local _ u n s q sq st f
	read -r _ u n s _ _ q sq st _ < /proc/stat
	f=$(cat "/proc/$(_vm_pid)/stat") || return 1
	read -r -a f <<< "${f##*) }"
	echo "$((u + n + s + q + sq + st)) $((f[11] + f[12])) $(date +%s.%N)"
}

# run WAY NAME RW BS QD REGION
run() {
	local way=$1 region=${6#-} h0 h1 r
	[[ $way != nbdmem && $way != qnbd ]] || [ "$region" ] || region=256M
	h0=$(host_cpu)
	VM_EXEC_TIMEOUT=$((T + 180)) vm_exec "export GW=$GW EG_NQN=$nqn EG_OUT=$out EG_T=$T
		NBD_GW_LOG=${ENGINE_GW_LOG:-info} EG_PROFILE=${ENGINE_PROFILE:-}
		${ENGINE_BACKEND:+export NVMF_GATEWAY_REACTOR_BACKEND=$ENGINE_BACKEND}
		${ENGINE_ENV:+export $ENGINE_ENV}
		. tests/interop/nvmet.sh && . tests/bench/engine_guest.sh &&
		eg_$way $2 $3 $4 $5 $region"
	r=$?
	h1=$(host_cpu)
	echo "$h0 $h1 $(getconf CLK_TCK)" > "$out/$2.$way.host"
	return $r
}
rc=0
for p in "${points[@]}"; do
	ways="bench benchpoll nbd kernel knbd backend"
	[[ $p == *qd1\ * ]] || ways+=" bench2q bench2r kernel2j"
	[[ $p == 128k* ]] && ways+=" nbdmem qnbd"
	for way in $ways; do
		[[ $way =~ ${ENGINE_WAYS:-.} ]] || continue
		# shellcheck disable=SC2086 # the point's fields
		run $way $p || { echo "engine.sh: $way ${p%% *} failed" >&2; rc=1; }
	done
done
[ -z "${ENGINE_KEEP:-}" ] || { mkdir -p "$ENGINE_KEEP" && cp -r "$out/." "$ENGINE_KEEP/"; }
[ $rc = 0 ] || { echo "engine.sh: a run failed" >&2; exit 1; }
# With ENGINE_GW_LOG=debug, the nbd way's log has where its requests spent
# their time inside the gateway, on its own clock (nbd/stages.c): what fio's
# latency has beyond their sum was spent in the kernel's NBD client and
# block layer, and in fio.  The few reads of the attach are left out.
for f in "$out"/*.nbd.log; do
	[ -e "$f" ] || continue
	awk -v n="$(basename "$f" .nbd.log)" 'match($0, /[0-9]+ (reads|writes), us per request in the gateway: .*/) {
		s = substr($0, RSTART); if (s + 0 >= 100) print "  " n ": " s }' "$f"
done | { grep . && echo; } | sed '1i the gateway'"'"'s own split of /dev/nbdN requests (us per request, mean and worst; ENGINE_GW_LOG=debug):'
if [ -n "${ENGINE_WAYS:-}" ]; then
	for f in "$out"/*.json; do
		python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1].split("/")[-1], "iops", round(j["iops"] if "iops" in j else max(j["jobs"][0]["read"]["iops"], j["jobs"][0]["write"]["iops"])))' "$f"
	done
	exit 0
fi

python3 - "$out" "$T" "${points[@]%% *}" <<'PY'
import json, os, sys
out, T, names = sys.argv[1], sys.argv[2], sys.argv[3:]

def load(name, way):
    c = json.load(open(f"{out}/{name}.{way}.cpu"))
    j = json.load(open(f"{out}/{name}.{way}.json"))
    tick_us = 1e6 / c["hz"]
    if way.startswith("bench"):
        assert j["errors"] == 0, f"{name}: bench errors"
        ios, r = j["ios"], dict(iops=j["iops"], mibs=j["mibps"], mean=j["lat_us"]["mean"],
                                p99=j["lat_us"]["p99"], fio=None, target=j.get("target_us"),
                                cmds=j.get("cmds_per_io"), qd=j["qd"] * j["queues"])
    else:
        job = j["jobs"][0]
        assert job["error"] == 0, f"{name}: fio error {job['error']}"
        d = job["write"] if job["write"]["total_ios"] else job["read"]
        ios, lat = d["total_ios"], d["lat_ns"]
        r = dict(iops=d["iops"], mibs=d["bw"] / 1024, mean=lat["mean"] / 1e3,
                 p99=lat["percentile"]["99.000000"] / 1e3,
                 fio=(job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] * 1e3 / ios)
    r["guest"] = c["busy"] * tick_us / ios if ios else float("nan")
    r["gw"] = c["gw"] * tick_us / ios if c["gw"] is not None and ios else None
    r["busy"] = c["busy"] / c["total"] if c["total"] else float("nan")
    b0, q0, t0, b1, q1, t1, hz = map(float, open(f"{out}/{name}.{way}.host").read().split())
    r["other"] = (b1 - b0 - (q1 - q0)) / hz / (t1 - t0)
    return r

def f(v, w, p=0):
    return f"{'-':>{w}}" if v is None else f"{v:{w}.{p}f}"

flags = open(f"{out}/cpuflags").read().split()
print(f"NVMe/TCP to nvmet in one TCG guest (2 vCPUs, -cpu {os.environ.get('VM_CPU', 'max')}: guest flags"
      f" {' '.join(flags) or 'neither erms nor fsrm'}), {T} s per run; fio: io_uring, direct=1")
print(f"{'point':17} {'way':9} {'IOPS':>8} {'MiB/s':>8} {'mean us':>8} {'p99 us':>8} "
      f"{'guest':>7} {'busy':>5} {'gw':>7} {'fio':>7} {'other':>5}  ratio to kernel")
res = {}
for name in names:
    rows = {w: load(name, w) for w in ("bench", "benchpoll", "bench2q", "bench2r", "nbd", "kernel", "kernel2j",
                                "knbd", "backend", "nbdmem", "qnbd")
            if os.path.exists(f"{out}/{name}.{w}.cpu")}
    res[name] = rows
    k = rows["kernel"]["iops"]
    for w, r in rows.items():
        ratio = f"{r['iops'] / k:5.2f}" if w != "kernel" and k else ""
        print(f"{name if w == 'bench' else '':17} {w:9} {r['iops']:8.0f} {r['mibs']:8.1f} "
              f"{r['mean']:8.1f} {r['p99']:8.0f} {f(r['guest'], 7, 1)} {r['busy']:5.2f} "
              f"{f(r['gw'], 7, 1)} {f(r['fio'], 7, 1)} {r['other']:5.2f}  {ratio}")
print("(ratio: IOPS, the same as MiB/s; guest: busy CPU us per I/O of the whole guest,"
      " all vCPUs; busy: its share\n of the run's CPU time; gw: the gateway process's CPU"
      " us per I/O; fio: fio's usr+sys us per I/O;\n other: host CPUs used by processes"
      " other than qemu during the run, of", os.cpu_count(), "- above ~0.2 the run was"
      " disturbed)")
for w in ("nbd", "kernel"):
    print(f"{w + ' queue:':13} {open(f'{out}/{names[0]}.{w}.queue').read().strip()}")

print("\ngoals (issue 20), in this run:")
for name in names:
    if name.startswith("128k"):
        r = res[name]["nbd"]["iops"] / res[name]["kernel"]["iops"]
        print(f"  nbd 128K vs kernel >= 0.8 ({name:15})  {r:5.2f}  {'met' if r >= 0.8 else 'not met'}")
        if "nbdmem" in res[name]:
            m = res[name]["nbdmem"]["iops"] / res[name]["kernel"]["iops"]
            print(f"    NBD alone (--mem) vs kernel ({name:15})  {m:5.2f}  (the ceiling of any NBD server)")
        if "qnbd" in res[name]:
            m = res[name]["qnbd"]["iops"] / res[name]["kernel"]["iops"]
            print(f"    NBD alone (qemu-nbd) vs kernel ({name:15})  {m:5.2f}  (the same, a server we did not write)")
print("\nthe peer stack (kernel NVMe/TCP host + qemu-nbd -c, knbd) against the gateway's /dev/nbdN:")
for name in names:
    if "knbd" in res[name]:
        r = res[name]["nbd"]["iops"] / res[name]["knbd"]["iops"]
        print(f"  nbd vs knbd ({name:16})  {r:5.2f}")
bk = {n: res[n]["backend"]["iops"] / res[n]["kernel"]["iops"] for n in names if "backend" in res[n]}
if bk:
    low = min(bk, key=bk.get)
    print(f"    nvmet's backing device alone vs kernel, lowest   {bk[low]:5.2f}  ({low}: the storage's"
          " ceiling; below it, the network path limits)")
for way in ("bench", "benchpoll", "bench2q", "bench2r"):
    b = {n: res[n][way]["iops"] / res[n]["kernel"]["iops"] for n in names if way in res[n]}
    if not b:
        continue
    low = min(b, key=b.get)
    # The two-queue ways do not run at QD1, where one I/O has nothing to spread.
    print(f"  {way} vs kernel >= 1.5 at every point {'':{9 - len(way)}}  {b[low]:5.2f}  "
          f"{'met' if b[low] >= 1.5 else 'not met'} (lowest: {low}"
          f"{'' if len(b) == len(names) else '; ' + str(len(b)) + ' of ' + str(len(names)) + ' points'})")
# Two threads against two: bench2r's reactors against the kernel host from
# two fio jobs (the kernel's own initiator spreads the same way).
for name in names:
    if "bench2r" in res[name] and "kernel2j" in res[name]:
        r = res[name]["bench2r"]["iops"] / res[name]["kernel2j"]["iops"]
        print(f"    bench2r vs kernel2j ({name:15})  {r:5.2f}  (both on two threads)")

# Could any initiator reach 1.5x here?  Take bench's own CPU away entirely
# (the gw column: all its user and kernel time, system calls and copies
# included) and keep what the rest of the guest spent per I/O in its run.
# At QD1 the chain is serial: what is left of the latency is at least its
# mean less that CPU.  Deeper, the rest's CPU per I/O must fit in the
# vCPUs' time per I/O at 1.5x the kernel host's rate (its all-vCPU time
# per I/O / 1.5).  A bound beyond it means that not even an initiator
# costing nothing would reach the goal in this run.
# need: per point, what 1.5x the kernel host allows each I/O.
need = {n: res[n]["kernel"]["mean"] / 1.5 if "qd1" in n
        else res[n]["kernel"]["guest"] / res[n]["kernel"]["busy"] / 1.5 for n in names}
print("\nwere bench's own CPU zero (the rest of the guest as in its run), against what 1.5x the"
      " kernel host needs:")

# One line of either bound: bench's CPU replaced by `floor` us (0: none),
# with `why` naming the floor and the ratio it leaves.
def bound(name, way, floor=0.0, why=None):
    qd1 = "qd1" in name
    r = res[name][way]
    left = (r["mean"] if qd1 else r["guest"]) - r["gw"] + floor
    tail = ""
    if why:
        tail = f" (+{why}; " + (f"at most {1.5 * need[name] / left:4.2f}x" if left > 0 else "no limit") + ")"
    if left > 0:
        atmost[(name, way, bool(why))] = 1.5 * need[name] / left
    print(f"  {name:17} {way:9} {'latency' if qd1 else 'CPU per I/O'} {left:7.1f} us, needs"
          f" <= {need[name]:7.1f}: {'out of reach' if left > need[name] else 'not excluded'}{tail}")

atmost = {}  # (point, way, floored): the most a bound leaves, ratio to the kernel host

def bench_ways(name):
    return [w for w in ("bench", "benchpoll", "bench2q", "bench2r") if w in res[name] and res[name][w]["gw"] is not None]

for name in names:
    for way in bench_ways(name):
        bound(name, way)

# The same bound with bench's CPU taken down to a floor instead of zero:
# what any user-space initiator spends of its own per I/O at the least
# (tests/bench/floor.c, measured in this guest before the runs): at 128K
# one copy of the payload (the ways considered: a copy, a zerocopy send,
# which loopback copies; TCP_ZEROCOPY_RECEIVE is not), at QD1 one sleep
# until woken.  At QD1 the bound holds for an initiator that sleeps, with
# the rest of the guest as in bench's run: mean - gw is what bench's I/O
# spent outside its own CPU, and the floor's sleep replaces bench's CPU
# (the part of it spent going to sleep may overlap the target's work, as
# bench's own did; it is 13-16 us of the 360-480 here).  Not for
# benchpoll, which does not sleep.  "at most": the ratio to the kernel
# host such an initiator could reach (deep points: both vCPUs busy all the
# time).
fl = {}
for line in open(f"{out}/floor"):
    w = line.split()
    kv = dict(x.split("=") for x in w[2:])
    fl[w[0]] = float(kv["cpu_us"])
    if w[0] == "wait" and float(kv["slept"]) < 0.9:
        print(f"(the floor's waiter slept in only {kv['slept']} of its rounds: its sleep is cheaper than measured)")
floor_of = {"4k-randread-qd1": ("wait", "a sleep until woken"), "128k-read-qd8": ("copy", "a 128K copy"),
            "128k-write-qd8": ("copy", "a 128K copy")}
print(f"\nthe same with bench's own CPU at the floor of any user-space initiator (measured in this guest:"
      f" a copy\nof 128K {fl['copy']:.1f} us, a sleep until woken {fl['wait']:.1f} us):")
for name in names:
    if name not in floor_of:
        continue
    fm, what = floor_of[name]
    for way in bench_ways(name):
        if not ("qd1" in name and way == "benchpoll"):
            bound(name, way, fl[fm], what)

# ENGINE_GOALS=FILE (tests/bench/all): the guest goals appended as
# tab-separated lines for its one summary: where, goal, value, op, target,
# and a limit measured in this run with what it is ("-": none).  nbd's
# limit is the kernel's NBD path alone (nbdmem: no NVMe-oF behind it);
# bench's is the floor bound above for the way that did best.
if os.environ.get("ENGINE_GOALS"):
    with open(os.environ["ENGINE_GOALS"], "a") as g:
        def goal(what, v, op, target, lim=None, limwhat="-"):
            g.write("\t".join(("guest", what, f"{v:.2f}", op, str(target),
                                "-" if lim is None else f"{lim:.2f}", limwhat)) + "\n")
        for name in names:
            k = res[name]["kernel"]["iops"]
            if name.startswith("128k") and "nbd" in res[name]:
                m = res[name].get("nbdmem")
                goal(f"/dev/nbdN {name} vs kernel host", res[name]["nbd"]["iops"] / k, ">=", 0.8,
                     m and m["iops"] / k, "the kernel's NBD path alone (nbdmem), vs kernel host")
        for name in names:
            k = res[name]["kernel"]["iops"]
            ways = [w for w in ("bench", "benchpoll", "bench2q", "bench2r") if w in res[name]]
            if not ways:
                continue
            best = max(ways, key=lambda w: res[name][w]["iops"])
            # The limit is the highest bound of any way: each is computed
            # with the rest of the guest as in that way's own run, and a
            # goal is out of reach only if no way's bound reaches it.  A
            # way's floor bound where it applies (not to benchpoll at QD1,
            # which does not sleep), else its weaker zero-CPU one.
            lims = {}
            for w in ways:
                fb = (name, w, True) in atmost
                if (name, w, fb) in atmost:
                    lims[w] = (atmost[(name, w, fb)], fb)
            lw = max(lims, key=lambda w: lims[w][0]) if lims else None
            goal(f"bench {name} vs kernel host (best: {best})", res[name][best]["iops"] / k, ">=", 1.5,
                 lims[lw][0] if lw else None,
                 f"the most {lw} could reach {'at the floor' if lims[lw][1] else 'with zero CPU'}"
                 if lw else "-")

# Where bench's latency goes, as its engine sees it (bench's target_us:
# per command, from the reap of the send that put our last PDU for it in
# the socket to the read that brought the target's next PDU for it).  Not a
# bound: that end includes our own wake-up and, at depth, the bytes queued
# ahead of the PDU in our socket (a read's data behind earlier reads'),
# which a quicker initiator would shorten.  The rest of the latency is our
# own: a write's data waiting to go out is most of it at 128K.
print("\nwhere bench's latency goes (each command's time with the target as its engine saw it, an"
      " overestimate: it\n includes our wake-ups and what was queued ahead in our socket):")
for name in names:
    for way in bench_ways(name):
        r = res[name][way]
        if not r.get("target"):
            continue
        print(f"  {name:17} {way:9} {r['target']:8.1f} us with the target of {r['mean']:8.1f} us"
              f" ({r['target'] / r['mean']:4.2f}; {r['cmds']:.2f} commands per I/O)")

# ENGINE_PROFILE: each part's share of the run's busy samples, times the
# run's guest busy CPU per I/O (the profile covers the run's middle).
parts = ("target", "init.user", "init.send", "init.recv", "init.copy", "init.kern", "other")
prof = {(n, w): json.load(open(f"{out}/{n}.{w}.prof.json"))
        for n in names for w in res[n] if os.path.exists(f"{out}/{n}.{w}.prof.json")}
if prof:
    print("\nwhere the guest's CPU goes, us per I/O (ENGINE_PROFILE: perf cpu-clock, 97 Hz per vCPU)")
    print(f"{'point':17} {'way':9} {'guest':>7} " + " ".join(f"{p:>9}" for p in parts) + f" {'idle':>5}")
    for (n, w), pj in prof.items():
        sm = pj["samples"]
        busy = sum(v for k, v in sm.items() if k != "idle")
        g = res[n][w]["guest"]
        pj["us"] = {p: sm.get(p, 0) / busy * g if busy else float("nan") for p in parts}
        print(f"{n:17} {w:9} {g:7.1f} " + " ".join(f"{pj['us'][p]:9.1f}" for p in parts)
              + f" {sm.get('idle', 0) / (busy + sm.get('idle', 0)):5.2f}")
    print("(target: samples whose call chain holds nvmet or the loop device, with the delivery of"
          " its replies\n into the initiator's socket that runs under it; init.*: the initiator's"
          " user space, its kernel\n time under a TCP send (with the loopback and the target"
          " socket's receive under it), under a\n TCP receive, in byte copies, and the rest;"
          " other: every other busy sample; idle: share of all)")
    # At a deep point 1.5x the kernel host's IOPS leaves each I/O 1/1.5 of
    # the kernel host's all-vCPU time; with the guest busy all of it, what
    # the target and the rest take in bench's run leaves the initiator:
    print("\nat 1.5x the kernel host, with both vCPUs busy all the time, what is left per I/O for"
          " bench's initiator\nonce the target and the rest have taken what they take in bench's run:")
    for n in names:
        if "qd1" in n or (n, "bench") not in prof or (n, "kernel") not in prof:
            continue
        b, ku = prof[(n, "bench")]["us"], prof[(n, "kernel")]["us"]
        left = need[n] - b["target"] - b["other"]
        init = sum(b[p] for p in parts if p.startswith("init."))
        print(f"  {n:15} {left:7.1f} us; bench's initiator takes {init:7.1f} (its copy {b['init.copy']:.1f},"
              f" send {b['init.send']:.1f}, receive {b['init.recv']:.1f});\n"
              f"  {'':15} the kernel host's initiator {sum(ku[p] for p in parts if p.startswith('init.')):7.1f}"
              f" (send {ku['init.send']:.1f}, receive {ku['init.recv']:.1f}, copy {ku['init.copy']:.1f})")
PY
