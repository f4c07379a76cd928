# Shared by tests/func/t_nbd_*.sh and t_access_secrets.sh, on top of
# tests/lib/func.sh (whose `gw_start nbd` starts the gateway): a private
# $tmp and the python with the libnbd bindings.
: "${GW:?run by tests/func/run.sh}" "${TOP:?}"
. "$TOP/tests/lib/func.sh"
# Debian's python has the libnbd bindings (python3-libnbd); a pyenv or
# venv python3 first in PATH does not.
export PATH="/usr/bin:$PATH"
NBDPY=/usr/bin/python3
tmp_dir nbd-func

# nbdinfo_field URI FIELD: the value nbdinfo prints for FIELD.
nbdinfo_field() {
	nbdinfo "$1" | sed -n "s/^[[:space:]]*$2: //p" | head -1
}
