#!/usr/bin/env python3
"""For t_nbd_qos_drain: queues COUNT 4 KiB reads on the NBD socket SOCK
(an export limited to 1 IOPS, so they wait for QoS tokens in the
gateway), prints "QUEUED" once two have been answered (the rest are then
in the gateway's queue), then keeps taking replies until every read has
one or the connection ends, and prints "answered N of COUNT"."""
import sys
import time

import nbd

sock, count = sys.argv[1], int(sys.argv[2])
h = nbd.NBD()
h.connect_unix(sock)
done = []


def reply(err, i):
    done.append(i if err.value == 0 else -1)
    return 1


bufs = [nbd.Buffer(4096) for _ in range(count)]
for i in range(count):
    h.aio_pread(bufs[i], i * 4096, completion=lambda err, i=i: reply(err, i))
give_up = time.monotonic() + 60
while len(done) < 2 and time.monotonic() < give_up:
    h.poll(100)
print("QUEUED", flush=True)
try:
    while len(done) < count:
        h.poll(1000)
except nbd.Error as e:
    print("connection: %s" % e, flush=True)
ok = sum(1 for i in done if i >= 0)
print("answered %d of %d" % (ok, count), flush=True)
