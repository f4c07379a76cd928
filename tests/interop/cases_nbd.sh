# cases_nbd.sh: the kernel NBD device cases of the interop suite, sourced by
# run.sh once the guest and its target are up (uses g, case_, GW, nqn512).
# /dev/nbdN is attached by the gateway inside the guest to a namespace of
# the guest's own nvmet; the scripts are tests/interop/nbd_*.sh.
nqnnbd=nqn.2014-08.org.nvmf-gateway:interop-nbd
nbd_size=$((256 * 1024 * 1024))
nbd_setup() { g ". tests/interop/nvmet.sh && nvmet_subsys $nqnnbd 256M 4096 && nvmet_link $nqnnbd 1"; }
case_ nbd-setup nbd_setup
nbd_case() {
	local script=$1
	shift
	T=600 g "bash tests/interop/$script $GW $*"
}
case_ nbd-ext4 nbd_case nbd_fs.sh $nqnnbd $nbd_size
case_ nbd-fio-verify nbd_case nbd_fio.sh $nqnnbd
case_ nbd-lvm nbd_case nbd_lvm.sh $nqnnbd
case_ nbd-vs-kernel-host nbd_case nbd_nvme_cmp.sh $nqnnbd
case_ nbd-gateway-restart nbd_case nbd_restart.sh $nqnnbd
case_ nbd-detach-and-busy nbd_case nbd_detach.sh $nqnnbd $nqn512
# Issue 19: the namespace grown under a mounted ext4 and fio (nvmet's
# revalidate_size): /dev/nbdN resized live, then reattached at the new size.
case_ nbd-resize-live nbd_case nbd_resize.sh
# The same over RDMA (soft-RoCE): the namespace event and the resize do not
# depend on the transport, the attach and reattach do.
[[ " $transports " != *" rdma "* ]] || case_ nbd-resize-live-rdma nbd_case nbd_resize.sh rdma
case_ nbd-ioctl nbd_case nbd_ioctl.sh $nqnnbd $nbd_size
# The export over TCP on loopback to a real client (libnbd): read replies
# from memory by default, out of pipes when asked, exact against nvmet.
case_ nbd-tcp-local nbd_case nbd_tcp.sh $nqnnbd
