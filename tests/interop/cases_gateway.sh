# Sourced by tests/interop/run.sh (its guest is up, nvmet serves $nqn512
# and $nqn4k on 10.0.2.15:4420).  The daemon, `nvmf-gateway run`, in the
# guest with two reactors: one export as an NBD socket and a FUSE file, and
# the kernel's own NVMe/TCP host in the same guest as the reference for the
# data (issue 2's cross-check: written one way, read the other).  gw_tr is
# the transport of both (default tcp), gw_sfx ends the case names.
gw_tr=${gw_tr:-tcp}
gw_sfx=${gw_sfx:-}

gw_conf=/tmp/gw-run.conf
gw_sock=/tmp/gw-d512.sock
gw_mnt=/tmp/gw-fuse
gw_ctl=/tmp/gw-run.control
gw_uri="nbd+unix:///d512?socket=$gw_sock"

t_run_start() {
	g "mkdir -p $gw_mnt && cat > $gw_conf <<EOF
gateway = { reactors = 2; state_dir = \"/tmp/gw-state\"; control = \"$gw_ctl\"; };
targets = ( { name = \"t512\"; subnqn = \"$nqn512\";
              paths = ( { transport = \"$gw_tr\"; traddr = \"10.0.2.15\"; trsvcid = \"4420\"; } ); } );
exports = ( { name = \"d512\"; target = \"t512\"; nsid = 1;
              nbd = { listen = \"unix:$gw_sock\"; device = \"auto\"; connections = 2; }; fuse = true; } );
fuse = { mountpoint = \"$gw_mnt\"; };
EOF
	$GW check -c $gw_conf &&
	$GW run -c $gw_conf > /tmp/gw-run.log 2>&1; r=\$?; cat /tmp/gw-run.log; [ \$r = 0 ] &&
	pgrep -f 'nvmf-gateway run -c $gw_conf' > /tmp/gw-run.pid && test -S $gw_sock &&
	stat -c %s $gw_mnt/d512 | grep -qx 268435456 &&
	dev=\$(grep -o 'attached as /dev/nbd[0-9]*' /tmp/gw-run.log | grep -o '/dev/nbd[0-9]*') &&
	echo \$dev > /tmp/gw-run.dev && blockdev --getsize64 \$dev | grep -qx 268435456 &&
	grep -q 'nbd[0-9]*: 2 connections: past the kernel.s 30 s request timeout' /tmp/gw-run.log"
}

# Gateway writes (NBD), the kernel host reads; the kernel host writes, the
# gateway reads (NBD and FUSE).
t_cross_kernel() {
	g "set -e; . tests/interop/nvmet.sh
	   head -c 32M /dev/urandom > /tmp/gw-run-a; head -c 16M /dev/urandom > /tmp/gw-run-b
	   nbdcopy /tmp/gw-run-a '$gw_uri'
	   nvme connect -t $gw_tr -a 10.0.2.15 -s 4420 -n $nqn512 > /dev/null
	   dev=\$(nvme_host_dev $nqn512)
	   trap 'nvme disconnect -n $nqn512 > /dev/null' EXIT
	   dd if=\$dev iflag=direct bs=1M count=32 status=none | cmp - /tmp/gw-run-a
	   dd if=/tmp/gw-run-b of=\$dev oflag=direct bs=1M seek=64 status=none
	   nbdcopy '$gw_uri' /tmp/gw-run-c
	   cmp -i 0:67108864 -n 16777216 /tmp/gw-run-b /tmp/gw-run-c
	   cmp -n 33554432 /tmp/gw-run-a /tmp/gw-run-c
	   dd if=$gw_mnt/d512 bs=1M skip=64 count=16 status=none | cmp - /tmp/gw-run-b
	   dd if=\$(cat /tmp/gw-run.dev) iflag=direct bs=1M skip=64 count=16 status=none | cmp - /tmp/gw-run-b
	   head -c 5000000 /dev/urandom > /tmp/gw-run-f
	   dd if=/tmp/gw-run-f of=$gw_mnt/d512 bs=64k oflag=seek_bytes seek=100000001 conv=notrunc,fsync status=none
	   nbdcopy '$gw_uri' /tmp/gw-run-c
	   cmp -i 0:100000001 -n 5000000 /tmp/gw-run-f /tmp/gw-run-c
	   dd if=\$dev iflag=direct bs=1M status=none | cmp -i 0:100000001 -n 5000000 /tmp/gw-run-f -
	   echo cross-check OK"
}

t_nbd_tools() {
	g "set -e
	   nbdinfo '$gw_uri' | tee /tmp/i.txt
	   grep -q 'export-size: 268435456' /tmp/i.txt
	   qemu-img compare -f raw -F raw '$gw_uri' $gw_mnt/d512
	   fio --name=v --ioengine=nbd --uri='$gw_uri' --rw=randwrite --bs=4k --iodepth=16 \
	       --numjobs=2 --offset_increment=64M --size=16M --verify=crc32c --do_verify=1 \
	       --verify_fatal=1 --verify_state_save=0 --output=/tmp/fio.txt
	   grep -q 'err= 0' /tmp/fio.txt
	   cd /tmp && fio --name=f --filename=$gw_mnt/d512 --ioengine=io_uring --direct=1 \
	       --rw=randwrite --bs=4k --iodepth=8 --offset=128M --size=8M --verify=crc32c \
	       --verify_fatal=1 --verify_state_save=0 --output=/tmp/fio2.txt
	   grep -q 'err= 0' /tmp/fio2.txt"
}

# ext4 on the daemon's /dev/nbdN: mkfs, files, fsck, remount, verify.
t_kdev_fs() {
	g "set -e; dev=\$(cat /tmp/gw-run.dev); m=/tmp/gw-kmnt; mkdir -p \$m
	   mkfs.ext4 -q -F -E nodiscard \$dev 64M
	   mount \$dev \$m; head -c 4M /dev/urandom > \$m/f1; cp /tmp/gw-run-a \$m/f2
	   (cd \$m && sha256sum f1 f2 > /tmp/gw-k.sum); umount \$m
	   fsck.ext4 -fn \$dev
	   mount \$dev \$m; (cd \$m && sha256sum -c /tmp/gw-k.sum); umount \$m"
}

# Live reload with the kernel device (issue 7): fio verifies on d512's
# /dev/nbdN while a reload adds export d4k (a second target, its own
# /dev/nbdN and FUSE file), and a SIGHUP with the original file removes it
# again (its device detached, its FUSE file gone).  d512 is untouched: no
# I/O error, the same cntlid, no reconnect.
t_run_reload() {
	g "set -e; ctl=$gw_ctl; dev=\$(cat /tmp/gw-run.dev); pid=\$(cat /tmp/gw-run.pid)
	   st() { $GW status -s \$ctl -o json | jq -r \"\$1\"; }
	   c0=\$(st '.targets[0].paths[0].cntlid'); [ \"\$c0\" -gt 0 ]
	   fio --name=rl --filename=\$dev --direct=1 --ioengine=libaio --rw=randwrite --bs=4k \
	       --iodepth=8 --offset=192M --size=16M --time_based --runtime=25 --verify=crc32c \
	       --verify_backlog=64 --verify_fatal=1 --verify_state_save=0 --output=/tmp/gw-rl.txt &
	   fp=\$!
	   sleep 2
	   cp $gw_conf /tmp/gw-run.conf.orig
	   cat > $gw_conf <<EOF
gateway = { reactors = 2; state_dir = \"/tmp/gw-state\"; control = \"$gw_ctl\"; };
targets = ( { name = \"t512\"; subnqn = \"$nqn512\";
              paths = ( { transport = \"$gw_tr\"; traddr = \"10.0.2.15\"; trsvcid = \"4420\"; } ); },
            { name = \"t4k\"; subnqn = \"$nqn4k\";
              paths = ( { transport = \"$gw_tr\"; traddr = \"10.0.2.15\"; trsvcid = \"4420\"; } ); } );
exports = ( { name = \"d512\"; target = \"t512\"; nsid = 1;
              nbd = { listen = \"unix:$gw_sock\"; device = \"auto\"; connections = 2; }; fuse = true; },
            { name = \"d4k\"; target = \"t4k\"; nsid = 1; nbd = { device = \"auto\"; }; fuse = true; } );
fuse = { mountpoint = \"$gw_mnt\"; };
EOF
	   $GW reload -s \$ctl
	   d4=''
	   for i in \$(seq 100); do
	       d4=\$(st '.exports[] | select(.name == \"d4k\") | .nbd_device // empty'); [ -n \"\$d4\" ] && break; sleep 0.2
	   done
	   echo \"d4k attached as \$d4\"; [ -b \"\$d4\" ]; [ \"\$d4\" != \"\$dev\" ]
	   blockdev --getsize64 \$d4 | grep -qx 268435456
	   stat -c %s $gw_mnt/d4k | grep -qx 268435456
	   head -c 4M /dev/urandom > /tmp/gw-rl-a
	   dd if=/tmp/gw-rl-a of=\$d4 oflag=direct bs=1M status=none
	   cmp -n 4194304 /tmp/gw-rl-a $gw_mnt/d4k
	   cp /tmp/gw-run.conf.orig $gw_conf
	   kill -HUP \$pid
	   for i in \$(seq 100); do [ \"\$(blockdev --getsize64 \$d4 2>/dev/null || echo 0)\" = 0 ] && break; sleep 0.2; done
	   [ \"\$(blockdev --getsize64 \$d4 2>/dev/null || echo 0)\" = 0 ]
	   for i in \$(seq 50); do [ ! -e $gw_mnt/d4k ] && break; sleep 0.2; done
	   [ ! -e $gw_mnt/d4k ]
	   st '.exports | map(.name) | join(\",\")' | grep -qx d512
	   wait \$fp; grep -E 'err=' /tmp/gw-rl.txt; grep -q 'err= 0' /tmp/gw-rl.txt
	   if grep -qi 'verify.*fail\|bad magic' /tmp/gw-rl.txt; then exit 1; fi
	   [ \"\$(st '.targets[0].paths[0].cntlid')\" = \"\$c0\" ]
	   [ \"\$(st '.targets[0].paths[0].reconnects')\" = 0 ]
	   [ \"\$(st '.exports[0].errors')\" = 0 ]
	   echo 'reload with the kernel device OK: d4k attached and detached, d512 untouched'"
}

# SIGTERM: the exporters close, the controller shuts down, exit 0.
t_run_stop() {
	g "pid=\$(cat /tmp/gw-run.pid); kill -TERM \$pid;
	   for i in \$(seq 200); do kill -0 \$pid 2>/dev/null || break; sleep 0.1; done
	   cat /tmp/gw-run.log | tail -5; ! kill -0 \$pid 2>/dev/null &&
	   ! grep -q ' $gw_mnt ' /proc/mounts && ! test -S $gw_sock &&
	   grep -q 'gateway: stopped' /tmp/gw-run.log &&
	   [ \"\$(blockdev --getsize64 \$(cat /tmp/gw-run.dev) 2>/dev/null || echo 0)\" = 0 ]"
}

case_ run-start$gw_sfx t_run_start
case_ run-cross-kernel$gw_sfx t_cross_kernel
case_ run-nbd-tools$gw_sfx t_nbd_tools
case_ run-kdev-ext4$gw_sfx t_kdev_fs
case_ run-reload-kdev$gw_sfx t_run_reload
case_ run-stop$gw_sfx t_run_stop
