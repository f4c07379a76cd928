#!/bin/bash
# target.sh start|stop (test-nvmet.service): the kernel target on
# 127.0.0.1:4420 with two subsystems (disk0 256 MiB, disk1 64 MiB), each
# on a loop device over a file on tmpfs; and the soft-RoCE device rxe0, so
# that /dev/infiniband/rdma_cm and uverbs0 exist when the gateway starts.
set -u
export NVMET_WORK=/run/nvmet
. /opt/sysd/nvmet.sh
NQN=nqn.2026-12.io.nvmf-gateway.sysd
case "${1:-}" in
start)
	modprobe -a configfs nvmet nvmet-tcp loop rdma_rxe rdma_ucm ib_uverbs || exit 1
	mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config || exit 1
	ip link set eth0 up
	# Retried: one boot of the loaded host had it fail once.
	for _ in $(seq 20); do
		[ -z "$(rdma link show 2> /dev/null)" ] || break
		rdma link add rxe0 type rxe netdev eth0 && break
		sleep 1
	done
	for _ in $(seq 100); do
		ls /dev/infiniband/uverbs* > /dev/null 2>&1 && break
		sleep 0.2
	done
	ls /dev/infiniband/uverbs* > /dev/null 2>&1 ||
		echo "target: no rxe0 uverbs device (the RDMA device checks will fail)"
	nvmet_subsys "$NQN:disk0" 256M 512 && nvmet_subsys "$NQN:disk1" 64M 512 &&
		nvmet_port 1 tcp 127.0.0.1 4420 &&
		nvmet_link "$NQN:disk0" 1 && nvmet_link "$NQN:disk1" 1 || exit 1
	echo "target: $NQN:disk0 and :disk1 on 127.0.0.1:4420"
	;;
stop)
	nvmet_teardown
	echo "target: removed"
	;;
*) echo "usage: target.sh start|stop" >&2; exit 2 ;;
esac
