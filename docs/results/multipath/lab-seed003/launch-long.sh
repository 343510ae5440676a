#!/bin/sh
# How the runs of this directory were started (2026-11-26), as run; the input files were
# head -c 3000000 /dev/urandom > src-3M.bin; bulk-2300k.bin and bulk-600k.bin are its first 2,300,000 and 600,000 bytes.
# The long lab runs (items 1 and 2), all at once.
W=/work/wt-seed003
A=/work/target-seed003/release/aerotp
S=$W/bench/seed003_lab.py
O=/tmp/seed003-lab/long
IR=$W/bench/traces/seed003-iridium.toml
mkdir -p $O
cd /tmp/seed003-lab
head -c 2300000 src-3M.bin > bulk-2300k.bin
head -c 600000 src-3M.bin > bulk-600k.bin
run() { name=$1; shift; nohup nice -n 10 python3 $S run --name $name --out $O --aerotp $A "$@" > $O/$name.out 2>&1 & }
run aerotp-s3 --kind aerotp --scenario $IR --seed 3 --file bulk-2300k.bin --paths 3 --rate 7200 --timeout 4200 --measure 2820
run aerotp-s4 --kind aerotp --scenario $IR --seed 4 --file bulk-2300k.bin --paths 3 --rate 7200 --timeout 4200 --measure 2820
run tcp-cubic-s3 --kind tcp --scenario $IR --seed 3 --file src-3M.bin --paths 1 --cc cubic --timeout 2830 --measure 2820
run tcp-bbr-s3 --kind tcp --scenario $IR --seed 3 --file src-3M.bin --paths 1 --cc bbr --timeout 2830 --measure 2820
for m in 10 20 30; do
  run blackout-${m}min --kind aerotp --scenario $W/bench/traces/seed003-blackout-${m}min.toml --seed 3 --file bulk-600k.bin --paths 3 --rate 7200 --timeout 3900 --measure 2820
done
# started 6.5 min later, after the MPTCP fallback fix (seed003_lab.py sets the sysctls):
run mptcp-cubic-s3 --kind mptcp --scenario $IR --seed 3 --file src-3M.bin --paths 3 --cc cubic --timeout 2830 --measure 2820
run mptcp-bbr-s3 --kind mptcp --scenario $IR --seed 3 --file src-3M.bin --paths 3 --cc bbr --timeout 2830 --measure 2820
# 16:44, again: the first aerotp-s3/s4 and blackout-30min ended at 2400 s (send's 40-min
# --silence-timeout counted from the last byte written, not acknowledged):
# run aerotp-s3 ... --send-args "--silence-timeout 3h"  (same for aerotp-s4, blackout-30min)
# 16:45, with send's silence bound fixed (commit 7647786), default flags:
# run aerotp-s3-fixed ... (as aerotp-s3, no --send-args); run blackout-30min-fixed ... (as blackout-30min)
# 16:49, the peers again beside the AeroTP reruns (same window):
# run tcp-cubic-s3-again ... (as tcp-cubic-s3); run mptcp-cubic-s3-again ... (as mptcp-cubic-s3)
