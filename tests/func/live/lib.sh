# Shared by tests/func/t_live_*.sh, on top of resil/lib.sh: a one-command
# NBD client with a deadline.  The defects these tests guard against made
# SIGTERM wait for ever on I/O that never completed: they end the gateway
# with gw_stop_within, and tests/lib/func.sh's exit cleanup SIGKILLs a
# gateway that outlives its SIGTERM by 15 s.
. "$TOP/tests/func/resil/lib.sh"
LIO="$TOP/tests/func/live/io.py"
