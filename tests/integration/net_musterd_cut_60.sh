#!/usr/bin/env bash
# musterd's host cut off for 60 s while a job runs: it completes (net_musterd_cut.bash).
CUT_S=60
. "$(dirname "$0")/net_musterd_cut.bash"
