#!/usr/bin/env bash
# musterd's host cut off for 5 s while a job runs: it completes (net_musterd_cut.bash).
CUT_S=5
. "$(dirname "$0")/net_musterd_cut.bash"
