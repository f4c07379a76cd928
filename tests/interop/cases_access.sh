# Sourced by tests/interop/run.sh after cases_auth.sh, once per transport:
# the secrets of issue 16 against nvmet, which demands DH-HMAC-CHAP of
# $hostauth (keys and subsystem from the auth-setup case).  A key from a
# private file and one from the environment authenticate; a key given with
# -S authenticates too, and while the export is served /proc/PID/cmdline
# holds no trace of it (a warning says it was visible until then).

t_access_secret_sources() {
	auth_target sha256 null k00 &&
		g "set -e; umask 077; cp $auth_keys/k00 /tmp/gw-acc-k
	   NVMF_GATEWAY_LOG=info $GW bench $auth_conn -q $hostauth --dhchap-secret-file /tmp/gw-acc-k \
	       -T 1 > /tmp/acc-file.txt 2>&1 || { cat /tmp/acc-file.txt; false; }
	   grep 'q0: authenticated to $nqnauth' /tmp/acc-file.txt
	   NVMF_GATEWAY_DHCHAP_SECRET=\$(cat $auth_keys/k00) NVMF_GATEWAY_LOG=info $GW bench $auth_conn \
	       -q $hostauth -T 1 > /tmp/acc-env.txt 2>&1 || { cat /tmp/acc-env.txt; false; }
	   grep 'q0: authenticated to $nqnauth' /tmp/acc-env.txt
	   ! grep -qF \"\$(cat $auth_keys/k00)\" /tmp/acc-file.txt /tmp/acc-env.txt"
}

t_access_cmdline_scrub() {
	auth_target sha256 null k00 &&
		g "k=\$(cat $auth_keys/k00); rm -f /tmp/gw-acc.sock
	   NVMF_GATEWAY_LOG=info $GW nbd $auth_conn -q $hostauth -S \"\$k\" -c 1 unix:/tmp/gw-acc.sock \
	       > /tmp/acc-nbd.out 2> /tmp/acc-nbd.log &
	   pid=\$!
	   trap 'kill -TERM \$pid 2> /dev/null; wait \$pid' EXIT
	   for i in \$(seq 600); do grep -q 'serving export' /tmp/acc-nbd.out && break; sleep 0.1; done
	   cat /tmp/acc-nbd.log; tr '\\0' ' ' < /proc/\$pid/cmdline; echo
	   grep -q 'serving export' /tmp/acc-nbd.out &&
	   grep -q 'q0: authenticated to $nqnauth' /tmp/acc-nbd.log &&
	   grep -q \"the secret given with -S/--dhchap-secret was readable by every local user in /proc/\$pid/cmdline\" /tmp/acc-nbd.log &&
	   ! grep -aqF \"\$k\" /proc/\$pid/cmdline && ! grep -aqF \"\${k#DHHC-1:00:}\" /proc/\$pid/cmdline &&
	   grep -aq -- '-S' /proc/\$pid/cmdline &&
	   nbdinfo --size 'nbd+unix:///?socket=/tmp/gw-acc.sock'"
}

case_ access-secret-file-env$sfx t_access_secret_sources
case_ access-cmdline-scrub$sfx t_access_cmdline_scrub
