# Sourced by tls_kernel.sh in its discovery mode (tls_kernel.sh TLSROOT PORT
# discovery, GW=the gateway's binary), once nvmet's TLS-only port (TREQ
# required, TSAS tls1.3), the key in .nvme and tlshd are up.  The daemon's
# persistent discovery controller connects to nvmet's discovery subsystem
# over TLS (its PSK identity names the discovery NQN), reads the log, and
# an auto_export policy with tls and the key makes a target from it whose
# NBD export serves data written and read back (python3-libnbd).
disc=nqn.2014-08.org.nvmexpress.discovery

tls_discovery_steps() {
	local K=$work/psk sock=$work/d1.sock conf=$work/gw-disc.conf ctl=$work/gw.control
	[ -x "${GW:-}" ] || fail "GW is not the gateway's binary: '${GW:-}'"
	chmod 600 "$K"
	step "the retained PSK of the discovery NQN in .nvme"
	in_root nvme check-tls-key --keydata="$key" --subsysnqn="$disc" --hostnqn="$hostnqn" \
		--keyring=.nvme --insert > "$work/insert-disc.out" 2>&1 ||
		{ cat "$work/insert-disc.out"; fail "check-tls-key --insert for $disc"; }
	cat "$work/insert-disc.out"

	step "daemon: persistent discovery controller over TLS, auto_export target over TLS"
	cat > "$conf" <<- CONF
		gateway = { reactors = 1; state_dir = "$work/state"; hostnqn = "$hostnqn";
		    control = "$ctl"; };
		discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port";
		    tls = true; tls_key_file = "$K"; } );
		auto_export = ( { subnqn = "$subnqn"; nsid = 1; name = "d1"; tls = true;
		    tls_key_file = "$K"; nbd = { listen = "unix:$sock"; }; } );
	CONF
	cat "$conf"
	"$GW" check -c "$conf" || fail "check -c: the configuration is refused"
	"$GW" run -f -c "$conf" > "$work/gw.log" 2>&1 &
	gw_pid=$!
	for _ in $(seq 600); do
		[ -S "$sock" ] && nbdinfo --size "nbd+unix:///d1?socket=$sock" > "$work/size" 2> /dev/null && break
		kill -0 $gw_pid 2> /dev/null || { cat "$work/gw.log"; fail "the daemon exited"; }
		sleep 0.2
	done
	[ -s "$work/size" ] || { cat "$work/gw.log"; fail "no NBD export after 120 s"; }
	"$GW" status -s "$ctl" -o json > "$work/status.json" || fail "status"
	jq -c '.discovery, .discovered' "$work/status.json"
	[ "$(jq -r '.discovery[0] | "\(.state) \(.tls)"' "$work/status.json")" = "watching true" ] ||
		fail "the discovery controller is not watching over TLS"
	jq -e --arg s "$subnqn" '[.discovered[] | select(.subnqn == $s) | .treq] | first == 1' \
		"$work/status.json" > /dev/null || fail "the log entry's TREQ is not 'required'"
	grep -q "path 0 from discovery: tcp 127.0.0.1:$port (TLS)" "$work/gw.log" ||
		{ cat "$work/gw.log"; fail "the made target's path is not TLS"; }
	/usr/bin/python3 -c '
import os, sys, nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = os.urandom(1 << 20)
h.pwrite(data, 4 << 20)
h.flush()
back = h.pread(1 << 20, 4 << 20)
h.shutdown()
sys.exit(0 if back == data else "read back differs")' "nbd+unix:///d1?socket=$sock" ||
		fail "1 MiB written and read back through the NBD export (python3-libnbd)"
	kill $gw_pid; wait $gw_pid
	gw_pid=
	cat "$work/gw.log"
	grep -q 'NVMeTLSkey' "$work/gw.log" && fail "a key in the daemon's log"
	dmesg_new
}
