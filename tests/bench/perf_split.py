#!/usr/bin/env python3
"""perf_split.py: splits a guest-wide profile (perf script -F
comm,tid,ip,sym,dso with call chains, on stdin) by whose work each sample
is, for tests/bench/engine.sh's ENGINE_PROFILE.  Prints JSON: the sample
count per part and each part's most frequent leaf symbols.

The question it answers is where a way's time goes at one point, so that a
goal against the kernel host can be set against what no initiator avoids:

  target     any sample whose chain holds nvmet or the loop device: the
             target's own work, and what runs under it on loopback (the
             delivery of its replies into the initiator's socket up to
             the socket's wakeup), which every NVMe/TCP initiator pays
  init.user  the initiator's user space: the gateway, fio, qemu-nbd
  init.copy  the initiator's kernel time in a byte copy (leaf symbol)
  init.send  the rest of its kernel time under a TCP send (tcp_sendmsg):
             segmenting, the loopback, and the target socket's receive
             that runs under it up to nvmet's callback
  init.recv  the rest under a TCP receive (tcp_recvmsg, tcp_read_sock)
  init.kern  the rest of the initiator's kernel time: its system calls,
             io_uring, the block layer, the kernel's nvme-tcp host (its
             kworkers too), the NBD driver, the scheduler
  other      every other busy sample (softirq threads, RCU, timers)
  idle       the idle loop; perf's own samples are left out entirely

A sample is the target's before it is anyone else's: the chain decides,
not the thread it ran on.
"""
import collections
import json
import re
import sys

COPY = re.compile(r"(copy_user|copy_to_iter|copy_from_iter|copy_page|memcpy|memmove|"
                  r"rep_movs|csum_partial_copy|skb_copy_datagram)")
# The block loop driver's functions, not the network's loopback_xmit.
TARGET = re.compile(r"^(nvmet_|lo_rw|lo_complete|lo_read|lo_write|do_req_filebacked|"
                    r"loop_queue|loop_process|loop_handle|loop_workfn|loop_rootcg)")
KHOST = re.compile(r"^(nvme_tcp_|nvme_|blk_mq_|nbd_)")
SEND = re.compile(r"^(tcp_sendmsg|tcp_sendmsg_locked|tcp_push|__tcp_push_pending_frames)$")
RECV = re.compile(r"^(tcp_recvmsg|tcp_recvmsg_locked|tcp_read_sock|tcp_splice_read)$")
INIT_COMM = re.compile(r"^(fio|nvmf-gateway|gw-reactor-|qemu-nbd|iou-)")


def classify(comm, frames):
    """frames: [(sym, kernel?)], leaf first."""
    syms = [s for s, _ in frames]
    if comm == "swapper" or "do_idle" in syms:
        return "idle"
    if any(TARGET.match(s) for s in syms):
        return "target"
    leaf_sym, kernel_leaf = frames[0] if frames else ("?", False)
    initiator = INIT_COMM.match(comm) or any(KHOST.match(s) for s in syms)
    if not initiator:
        return "other"
    if not kernel_leaf:
        return "init.user"
    if COPY.search(leaf_sym):
        return "init.copy"
    if any(SEND.match(s) for s in syms):
        return "init.send"
    if any(RECV.match(s) for s in syms):
        return "init.recv"
    return "init.kern"


def main():
    counts = collections.Counter()
    leaves = collections.defaultdict(collections.Counter)
    comm, frames = None, []

    def flush():
        if comm is None or comm == "perf":
            return
        part = classify(comm, frames)
        counts[part] += 1
        leaves[part][frames[0][0] if frames else "?"] += 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            comm, frames = None, []
        elif not line[0].isspace():
            flush()
            comm, frames = line.rsplit(None, 1)[0].strip(), []
        else:
            m = re.match(r"\s*([0-9a-f]+) (.*) \((.*)\)\s*$", line)
            if m:
                # Kernel text is in the top half of the address space.
                sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(2))
                frames.append((sym, len(m.group(1)) == 16 and m.group(1)[0] in "89abcdef"))
    flush()
    json.dump({"samples": dict(counts),
               "top": {p: leaves[p].most_common(8) for p in leaves}}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
