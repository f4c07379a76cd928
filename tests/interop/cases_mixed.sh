# Sourced by tests/interop/run.sh when both transports run: one target
# reached over an RDMA path and a TCP path at once (issue 5's mixed path
# list, issue 6's multipath).  The daemon in the guest must bring up both
# controllers as one volume, spread I/O over both (round-robin), and keep
# fio's verify clean while the RDMA path's port drops the subsystem and
# gets it back.
mx_conf=/tmp/gw-mixed.conf
mx_sock=/tmp/gw-mixed.sock

t_mixed_paths() {
	T=240 g "set -u; . tests/interop/nvmet.sh
cat > $mx_conf <<EOF
gateway = { reactors = 2; state_dir = \"/tmp/gw-state\"; control = \"/tmp/gw-mixed.ctl\"; };
targets = ( { name = \"mx\"; subnqn = \"$nqn512\"; multipath = \"round-robin\"; reconnect_delay = 1;
              paths = ( { transport = \"rdma\"; traddr = \"10.0.2.15\"; trsvcid = \"4420\"; },
                        { transport = \"tcp\"; traddr = \"10.0.2.15\"; trsvcid = \"4420\"; } ); } );
exports = ( { name = \"mx\"; target = \"mx\"; nsid = 1; nbd = { listen = \"unix:$mx_sock\"; }; } );
EOF
NVMF_GATEWAY_LOG=info $GW run -f -c $mx_conf > /tmp/gw-mixed.log 2>&1 & gp=\$!
for i in \$(seq 100); do test -S $mx_sock && break; sleep 0.2; done
grep -q 'mx/path0: connecting -> live' /tmp/gw-mixed.log && grep -q 'mx/path1: connecting -> live' /tmp/gw-mixed.log || { cat /tmp/gw-mixed.log; kill \$gp; exit 1; }
fio --name=mx --ioengine=nbd --uri='nbd+unix:///mx?socket=$mx_sock' --rw=randwrite --bs=16k --iodepth=8 \
    --size=32M --time_based --runtime=14 --verify=crc32c --verify_backlog=32 --verify_fatal=1 \
    --verify_state_save=0 --output=/tmp/gw-mixed-fio.txt & fp=\$!
sleep 3; nvmet_unlink $nqn512 2; sleep 4; nvmet_link $nqn512 2
wait \$fp; fr=\$?
sleep 2
kill -TERM \$gp; wait \$gp; gr=\$?
cat /tmp/gw-mixed-fio.txt | grep -E 'err=|verify|WRITE:' ; grep -E 'path|lost|live again' /tmp/gw-mixed.log
echo fio=\$fr gateway=\$gr
[ \$fr = 0 ] && [ \$gr = 0 ] && grep -q 'err= 0' /tmp/gw-mixed-fio.txt &&
grep -q 'mx/path0: lost' /tmp/gw-mixed.log && grep -q 'path 0 live again' /tmp/gw-mixed.log &&
! grep -q 'mx/path1: lost' /tmp/gw-mixed.log"
}
case_ multipath-rdma-tcp t_mixed_paths
