#!/bin/sh
# As run (2026-11-26): launch-offered.sh 3 "3:1024 3:2048 3:4096 3:6144 3:8192 2:1024 2:2048 2:4096", then 3 "2:6144 2:8192 1:1024 1:2048 1:4096 1:6144 1:8192", then the same two batches with seed 4.
# Item 3: delivered against offered rate, 10-minute sessions, one batch of labs at a time.
# usage: launch-offered.sh SEED "PATHS:RATE PATHS:RATE ..."
W=/work/wt-seed003
A=/work/target-seed003/release/aerotp
S=$W/bench/seed003_lab.py
O=/tmp/seed003-lab/offered
IR=$W/bench/traces/seed003-iridium.toml
D=600
mkdir -p $O
cd /tmp/seed003-lab
seed=$1
for pr in $2; do
  n=${pr%%:*}; r=${pr##*:}
  name=off-s$seed-p$n-r$r
  nohup nice -n 10 python3 $S run --name $name --out $O --aerotp $A --kind aerotp --scenario $IR --cut \
    --seed $seed --file src-3M.bin --paths $n --rate $((2400 * n)) --offer $r --duration $D \
    --timeout $((D + 60)) --measure $((D + 1)) > $O/$name.out 2>&1 &
done
