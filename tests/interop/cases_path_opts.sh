# Sourced by tests/interop/run.sh inside its loop over transports ($tr,
# $sfx): the path options of the one-shot commands against nvmet.  bench
# --verify with --tos 106 and --host-traddr 10.0.2.15 (the guest's own
# address, the one the route would pick too: what is checked is that the
# options are applied and I/O still verifies).  TCP: strace shows IP_TOS
# and the bind on both queues.  RDMA: the debug log shows the TOS and
# source each queue's rdma_cm id was given, and rdma_set_option did not
# refuse it; -f eth0 resolves to the same source.  It also shows that send
# moderation is on: the I/O queue signalled fewer sends than it posted.
t_path_opts() {
	local run="$GW bench -t $tr -a 10.0.2.15 -s 4420 -n $nqn512 -w randrw -b 4k -d 8 -T 2"
	run+=" --verify --size 4M --tos 106"
	if [ $tr = tcp ]; then
		g "strace -f -e trace=setsockopt,bind -o /tmp/po.st $run --host-traddr 10.0.2.15 \
			> /tmp/po.txt 2>&1; r=\$?; tail -3 /tmp/po.txt; grep -E 'IP_TOS|bind' /tmp/po.st
		   [ \$r = 0 ] && grep -q ' 0 mismatches' /tmp/po.txt &&
		   [ \$(grep -c 'IP_TOS, \[106\]' /tmp/po.st) = 2 ] &&
		   [ \$(grep -c 'bind(.*inet_addr(\"10.0.2.15\")' /tmp/po.st) = 2 ]"
		return
	fi
	g "for src in '--host-traddr 10.0.2.15' '-f eth0'; do
		$run \$src -v > /tmp/po.txt 2>&1; r=\$?; tail -3 /tmp/po.txt
		grep -E 'rdma: TOS|signalled' /tmp/po.txt; echo \"\$src: rc=\$r\"
		# Sends are moderated on the I/O queue: fewer signalled than sent.
		sig=\$(sed -n 's/.* q1: rdma: \([0-9]*\) sends, \([0-9]*\) of them.*/\1 \2/p' /tmp/po.txt)
		set -- \$sig; [ \$# = 2 ] && [ \$1 -gt 100 ] && [ \$2 -lt \$1 ] || exit 1
		[ \$r = 0 ] && grep -q ' 0 mismatches' /tmp/po.txt &&
		[ \$(grep -c 'rdma: TOS 106, source address 10.0.2.15\$' /tmp/po.txt) = 2 ] &&
		! grep -q 'cannot set TOS' /tmp/po.txt || exit 1
	   done"
}
case_ path-opts$sfx t_path_opts
