# cases_limits.sh: issue 14 defect 6 against nvmet (many ANA groups, an
# ANA log page larger than 4 KiB), sourced by run.sh once the guest is up
# (uses g, case_, GW, transports).  The guest side is tests/interop/limits.sh.
for ltr in $transports; do
	lsfx=; [ $ltr = tcp ] || lsfx=-$ltr
	limits_case() { T=600 g "bash tests/interop/limits.sh $GW $ltr"; }
	case_ limits-ana-group-20$lsfx limits_case
done
