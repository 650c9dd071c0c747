#!/bin/sh
# A model.sh in the CANDLE Supervisor manner: parameters from the environment (x, epochs, mode),
# the result as the last "loss VALUE" line of stdout, or a failure on request.
set -e
case "$mode" in
  fail) echo "model.sh: cannot open input" >&2; exit 4 ;;
  hang) setsid sleep 3600 & sleep 3600 ;;
  noresult) echo "done" ;;
  *) echo "running x=$x epochs=$epochs"
     awk -v x="$x" -v e="$epochs" 'BEGIN { printf "loss %.10g\n", x * x + e / 100 }' ;;
esac
