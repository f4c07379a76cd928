# cases_resil.sh: issue 6's resilience cases against nvmet, sourced by
# run.sh once the guest is up (uses g, case_, GW, nqn512, transports).  The
# guest side is tests/interop/resil.sh; each case keeps fio to 20-40 s.
for rtr in $transports; do
	rsfx=; [ $rtr = tcp ] || rsfx=-$rtr
	# T: a hang guard, not a timing bound (those are the gateway's clock,
	# in resil.sh); a TCG guest on a loaded host took over 300 s.
	resil_case() { T=900 g "bash tests/interop/resil.sh $GW $rtr $*"; }
	case_ resil-link-flap$rsfx resil_case flap
	case_ resil-ana-toggle$rsfx resil_case ana
	case_ resil-rr-remove$rsfx resil_case rr-remove
	case_ resil-ctrl-loss$rsfx resil_case ctrl-loss $nqn512
	case_ resil-fast-io-fail$rsfx resil_case fast-fail
done
