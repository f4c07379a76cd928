#!/usr/bin/env bash
# NBD over TLS with x509 certificates (the layout nbdkit and qemu use:
# ca-cert.pem, server-cert.pem, server-key.pem; the client's dir holds
# ca-cert.pem, client-cert.pem, client-key.pem), made here with openssl:
# nbdinfo/nbdcopy over nbds:// (TCP) and nbds+unix://, qemu-img with
# tls-creds-x509, and --nbd-tls-verify-peer refusing a client without a
# certificate from the CA.
set -u
. "$TOP/tests/func/nbd/lib.sh"
need nbdinfo nbdcopy qemu-img openssl

pki="$tmp/pki"
srv="$pki/server" cli="$pki/client" nocli="$pki/nocert"
mkdir -p "$srv" "$cli" "$nocli"
chmod 700 "$srv"
ssl() { openssl "$@" 2> "$tmp/openssl.err" || { cat "$tmp/openssl.err"; fail "openssl $1"; }; }
ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=test-ca \
	-keyout "$pki/ca-key.pem" -out "$pki/ca-cert.pem"
cat > "$pki/srv.ext" <<'X'
subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth
X
printf 'extendedKeyUsage=clientAuth\n' > "$pki/cli.ext"
for who in server client; do
	ssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$who" \
		-keyout "$pki/$who-key.pem" -out "$pki/$who.csr"
	ext=$pki/srv.ext
	[ $who = client ] && ext=$pki/cli.ext
	ssl x509 -req -in "$pki/$who.csr" -CA "$pki/ca-cert.pem" -CAkey "$pki/ca-key.pem" \
		-CAcreateserial -days 2 -extfile "$ext" -out "$pki/$who-cert.pem"
done
cp "$pki/ca-cert.pem" "$pki/server-cert.pem" "$pki/server-key.pem" "$srv/"
chmod 600 "$srv/server-key.pem"
cp "$pki/ca-cert.pem" "$pki/client-cert.pem" "$pki/client-key.pem" "$cli/"
cp "$pki/ca-cert.pem" "$nocli/"

sock="$tmp/nbd.sock"
port=$(free_port)
NVMF_GATEWAY_LOG=info gw_start nbd --mem 32M --name disk --nbd-tls require \
	--nbd-tls-certificates "$srv" --nbd-tls-verify-peer "tcp:127.0.0.1:$port"
turi="nbds://localhost:$port/disk?tls-certificates=$cli"
nbdinfo "$turi" > "$tmp/info" 2>&1 || { cat "$tmp/info"; fail "nbdinfo over TLS (x509, TCP)"; }
grep -q "with TLS" "$tmp/info" || fail "nbdinfo does not say TLS"
head -c 8M /dev/urandom > "$tmp/in.bin"
nbdcopy "$tmp/in.bin" "$turi" || fail "nbdcopy in"
nbdcopy "$turi" "$tmp/out.bin" || fail "nbdcopy out"
cmp -n 8388608 "$tmp/in.bin" "$tmp/out.bin" || fail "x509 round trip differs"
grep -q "TLS established (TLSv1.3" "$tmp/gw.log" || fail "no 'TLS established' line"

qemu-img info --object "tls-creds-x509,id=tls0,endpoint=client,dir=$cli" \
	--image-opts "driver=nbd,host=localhost,port=$port,export=disk,tls-creds=tls0" \
	> "$tmp/qi" 2>&1 || { cat "$tmp/qi"; fail "qemu-img info (x509)"; }
grep -q "virtual size: 32 MiB" "$tmp/qi" || fail "qemu-img size (x509)"

# No client certificate: refused, and the log says why.
nbdinfo --size "nbds://localhost:$port/disk?tls-certificates=$nocli" > /dev/null 2>&1 &&
	fail "a client without a certificate was accepted with --nbd-tls-verify-peer"
grep -q "TLS handshake failed: .*peer did not return a certificate" "$tmp/gw.log" ||
	fail "no clear line for the missing client certificate"
[ "$(nbdinfo --size "$turi")" = 33554432 ] || fail "not serving after a refused client"
gw_stop

# Without peer verification, over a Unix socket, a client with only the CA.
gw_start nbd --mem 32M --name disk --nbd-tls require --nbd-tls-certificates "$srv" "unix:$sock"
[ "$(nbdinfo --size "nbds+unix:///disk?socket=$sock&tls-certificates=$nocli")" = 33554432 ] ||
	fail "nbds+unix:// with x509"
gw_stop
echo "OK"
