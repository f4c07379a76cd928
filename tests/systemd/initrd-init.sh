#!/bin/busybox sh
# /init of the systemd guest's initramfs (image.sh): loads what the root
# disk needs (virtio_blk, ext4), mounts /dev/vda and hands over to systemd.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
while read -r m; do
	insmod "/modules/$m" || echo "initrd: insmod $m failed"
done < /modules/order
for _ in $(seq 100); do
	[ -b /dev/vda ] && break
	sleep 0.1
done
mount -t ext4 -o rw /dev/vda /newroot || { echo "initrd: cannot mount /dev/vda"; poweroff -f; }
umount /proc /sys
mount --move /dev /newroot/dev 2> /dev/null || umount /dev
exec switch_root /newroot /sbin/init
