# Sourced by tests/interop/run.sh once per transport ($tr, case names end
# $sfx): DH-HMAC-CHAP against nvmet.  A subsystem that admits two hosts,
# each with dhchap_key (hostauth) or dhchap_key + dhchap_ctrl_key
# (hostbidi); keys made in the guest by nvme-cli's gen-dhchap-key.  The
# hash and DH group are the target's choice (hosts/NQN/dhchap_hash,
# dhchap_dhgroup), set before each case.
nqnauth=nqn.2014-08.org.nvmf-gateway:interop-auth
hostauth=nqn.2014-08.org.nvmf-gateway:host-auth
hostbidi=nqn.2014-08.org.nvmf-gateway:host-bidi
auth_keys=/tmp/gw-auth-keys
auth_port=1
[ $tr = rdma ] && auth_port=2
auth_conn="-t $tr -a 10.0.2.15 -s 4420 -n $nqnauth"

t_auth_setup() {
	g "set -e; . tests/interop/nvmet.sh
	   if [ ! -d \$NVMET/subsystems/$nqnauth ]; then
	     nvmet_subsys $nqnauth 64M 512 $hostauth $hostbidi
	     mkdir -p $auth_keys; chmod 700 $auth_keys; umask 077
	     nvme gen-dhchap-key -m 0 -l 32 > $auth_keys/k00
	     nvme gen-dhchap-key -m 2 -l 48 -n $hostauth > $auth_keys/k02
	     nvme gen-dhchap-key -m 3 -l 64 > $auth_keys/k03
	     nvme gen-dhchap-key -m 1 -l 32 > $auth_keys/kbidi
	     nvme gen-dhchap-key -m 1 -l 32 > $auth_keys/kctrl
	     nvme gen-dhchap-key -m 1 -l 32 > $auth_keys/kwrong
	     h=\$NVMET/hosts/$hostbidi
	     tr -d '\n' < $auth_keys/kbidi > \$h/dhchap_key
	     tr -d '\n' < $auth_keys/kctrl > \$h/dhchap_ctrl_key
	     printf 'hmac(sha384)' > \$h/dhchap_hash; printf ffdhe3072 > \$h/dhchap_dhgroup
	   fi
	   [ -e \$NVMET/ports/$auth_port/subsystems/$nqnauth ] || nvmet_link $nqnauth $auth_port
	   head -c 20 $auth_keys/k00; echo ...; ls -l $auth_keys"
}

# auth_target HASH DHGROUP KEY: what the target asks of hostauth.
auth_target() {
	g "h=/sys/kernel/config/nvmet/hosts/$hostauth
	   printf 'hmac(%s)' $1 > \$h/dhchap_hash && printf %s $2 > \$h/dhchap_dhgroup &&
	   tr -d '\n' < $auth_keys/$3 > \$h/dhchap_key && cat \$h/dhchap_hash \$h/dhchap_dhgroup"
}

# bench --verify with two I/O queues: admin and both I/O queues
# authenticate with what the target chose, then the data is checked.
t_auth_bench() {
	auth_target $1 $2 $3 &&
		g "k=\$(cat $auth_keys/$3)
	   NVMF_GATEWAY_LOG=info $GW bench $auth_conn -q $hostauth -S \"\$k\" -i 2 -w randrw -T 1 \
	       --verify --size 4M > /tmp/auth.txt 2>&1; r=\$?; cat /tmp/auth.txt; echo rc=\$r
	   [ \$r = 0 ] && ! grep -q \"\$k\" /tmp/auth.txt &&
	   [ \$(grep -c 'q[0-2]: authenticated to $nqnauth (DH-HMAC-CHAP $1, $2)' /tmp/auth.txt) = 3 ]"
}

# The wrong key: one clear error, exit 1, and no second attempt even from
# the nbd command, which reconnects lost paths (every second here).
t_auth_wrong() {
	auth_target sha256 null k00 &&
		g "k=\$(cat $auth_keys/kwrong)
	   out=\$(timeout 60 $GW nbd $auth_conn -q $hostauth -S \"\$k\" -c 1 unix:/tmp/gw-auth-x.sock 2>&1)
	   r=\$?; echo \"\$out\"; echo rc=\$r
	   [ \$r = 1 ] && [ \$(echo \"\$out\" | grep -c 'authentication failed with $nqnauth') = 1 ] &&
	   echo \"\$out\" | grep -q 'the target refused this host'"
}

t_auth_nokey() {
	g "out=\$(timeout 60 $GW bench $auth_conn -q $hostauth -T 1 2>&1); r=\$?; echo \"\$out\"; echo rc=\$r
	   [ \$r = 1 ] && echo \"\$out\" | grep -q 'requires DH-HMAC-CHAP and no dhchap_secret is configured'"
}

# Bidirectional: the gateway checks the controller's response too.
t_auth_bidi() {
	g "k=\$(cat $auth_keys/kbidi) c=\$(cat $auth_keys/kctrl)
	   NVMF_GATEWAY_LOG=info $GW bench $auth_conn -q $hostbidi -S \"\$k\" -C \"\$c\" -w randrw -T 1 \
	       --verify --size 4M > /tmp/auth.txt 2>&1; r=\$?; cat /tmp/auth.txt; echo rc=\$r
	   [ \$r = 0 ] && [ \$(grep -c 'and it to us (DH-HMAC-CHAP sha384, ffdhe3072)' /tmp/auth.txt) = 2 ]"
}

t_auth_bidi_wrong() {
	g "k=\$(cat $auth_keys/kbidi) c=\$(cat $auth_keys/kwrong)
	   out=\$(timeout 60 $GW bench $auth_conn -q $hostbidi -S \"\$k\" -C \"\$c\" -T 1 2>&1); r=\$?
	   echo \"\$out\"; echo rc=\$r
	   [ \$r = 1 ] && echo \"\$out\" | grep -q \"the controller's response is wrong\""
}

# An impostor (issue 14 defect 4): a subsystem any host may use, without
# keys, never asks to authenticate.  With -C the gateway must refuse it:
# one clear error, exit 1, and no second attempt from the nbd command.
nqnopen=nqn.2014-08.org.nvmf-gateway:interop-auth-open
hostopen=nqn.2014-08.org.nvmf-gateway:host-open
t_auth_impostor() {
	g "set -e; . tests/interop/nvmet.sh
	   [ -d \$NVMET/subsystems/$nqnopen ] || nvmet_subsys $nqnopen 16M 512
	   [ -e \$NVMET/ports/$auth_port/subsystems/$nqnopen ] || nvmet_link $nqnopen $auth_port
	   k=\$(cat $auth_keys/kbidi) c=\$(cat $auth_keys/kctrl)
	   # Without -C the same target is fine: authentication is the target's call.
	   $GW bench -t $tr -a 10.0.2.15 -s 4420 -n $nqnopen -q $hostopen -S \"\$k\" -T 1 > /tmp/open.txt 2>&1 ||
	     { cat /tmp/open.txt; false; }
	   set +e
	   out=\$(timeout 60 $GW nbd -t $tr -a 10.0.2.15 -s 4420 -n $nqnopen -q $hostopen -S \"\$k\" -C \"\$c\" \
	       -c 1 unix:/tmp/gw-auth-open.sock 2>&1)
	   r=\$?; echo \"\$out\"; echo rc=\$r
	   [ \$r = 1 ] && [ \$(echo \"\$out\" | grep -c 'the target did not authenticate itself') = 1 ] &&
	   echo \"\$out\" | grep -q 'dhchap_ctrl_secret' && ! echo \"\$out\" | grep -qF \"\$c\""
}

# The daemon with the key in a file: a secret file others may read is
# refused by check; then NBD I/O after authentication, and a reconnect
# (the subsystem leaves the port and comes back) authenticates again.
t_auth_daemon() {
	auth_target sha512 ffdhe4096 k03 &&
		g "set -e; . tests/interop/nvmet.sh; umask 077
	   cat > /tmp/gw-auth.conf <<EOF
gateway = { reactors = 2; state_dir = \"/tmp/gw-state\"; hostnqn = \"$hostauth\";
            control = \"/tmp/gw-auth-ctl.sock\"; };
targets = ( { name = \"tauth\"; subnqn = \"$nqnauth\"; reconnect_delay = 1;
              dhchap_secret_file = \"/tmp/gw-auth-k\";
              paths = ( { transport = \"$tr\"; traddr = \"10.0.2.15\"; trsvcid = \"4420\"; } ); } );
exports = ( { name = \"dauth\"; target = \"tauth\"; nbd = { listen = \"unix:/tmp/gw-auth.sock\"; }; } );
EOF
	   cp $auth_keys/k03 /tmp/gw-auth-k; chmod 644 /tmp/gw-auth-k
	   if $GW check -c /tmp/gw-auth.conf 2> /tmp/chk.txt; then echo 'check passed a secret readable by others'; exit 1; fi; cat /tmp/chk.txt
	   grep -q 'gw-auth.conf:4: targets\[0\].dhchap_secret_file: /tmp/gw-auth-k holds a secret and is readable by group or others (mode 0644)' /tmp/chk.txt
	   chmod 600 /tmp/gw-auth-k; $GW check -c /tmp/gw-auth.conf
	   NVMF_GATEWAY_LOG=info $GW run -c /tmp/gw-auth.conf > /tmp/gw-auth.log 2>&1
	   pid=\$(pgrep -f 'nvmf-gateway run -c /tmp/gw-auth.conf')
	   trap 'kill -TERM \$pid; cat /tmp/gw-auth.log' EXIT
	   head -c 8M /dev/urandom > /tmp/gw-auth-a
	   nbdcopy /tmp/gw-auth-a 'nbd+unix:///dauth?socket=/tmp/gw-auth.sock'
	   nbdcopy 'nbd+unix:///dauth?socket=/tmp/gw-auth.sock' /tmp/gw-auth-b
	   cmp -n 8388608 /tmp/gw-auth-a /tmp/gw-auth-b
	   n1=\$(grep -c 'authenticated to $nqnauth (DH-HMAC-CHAP sha512, ffdhe4096)' /tmp/gw-auth.log)
	   [ \$n1 = 3 ]
	   nvmet_unlink $nqnauth $auth_port; sleep 2; nvmet_link $nqnauth $auth_port
	   for i in \$(seq 300); do grep -q 'path 0 live again' /tmp/gw-auth.log && break; sleep 0.1; done
	   grep 'live again' /tmp/gw-auth.log
	   n2=\$(grep -c 'authenticated to $nqnauth (DH-HMAC-CHAP sha512, ffdhe4096)' /tmp/gw-auth.log)
	   echo \"authentications: \$n1 before the reconnect, \$n2 after\"; [ \$n2 = 6 ]
	   head -c 4M /dev/urandom > /tmp/gw-auth-c
	   nbdcopy /tmp/gw-auth-c 'nbd+unix:///dauth?socket=/tmp/gw-auth.sock'
	   nbdcopy 'nbd+unix:///dauth?socket=/tmp/gw-auth.sock' /tmp/gw-auth-b
	   cmp -n 4194304 /tmp/gw-auth-c /tmp/gw-auth-b
	   ! grep -q 'authentication failed' /tmp/gw-auth.log"
}

case_ auth-setup$sfx t_auth_setup
case_ auth-sha256-null$sfx t_auth_bench sha256 null k00
case_ auth-sha384-ffdhe2048$sfx t_auth_bench sha384 ffdhe2048 k02
case_ auth-sha512-ffdhe4096$sfx t_auth_bench sha512 ffdhe4096 k03
case_ auth-sha256-ffdhe8192$sfx t_auth_bench sha256 ffdhe8192 k00
case_ auth-wrong-key$sfx t_auth_wrong
case_ auth-no-key$sfx t_auth_nokey
case_ auth-bidirectional$sfx t_auth_bidi
case_ auth-bidirectional-wrong-ctrl-key$sfx t_auth_bidi_wrong
case_ auth-ctrl-key-target-never-asks$sfx t_auth_impostor
case_ auth-daemon-reconnect$sfx t_auth_daemon
