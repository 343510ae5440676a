#!/bin/sh
# How the runs of offered-47min/ and the extra blackout runs of long/ were started
# (2026-11-26: offered and blackouts at 18:48 UTC, striped at 18:53, all at once), as run; the input files were
# head -c 3000000 /dev/urandom > src-3M.bin; bulk-600k.bin is its first 600,000 bytes.
# usage: launch-full.sh offered | blackouts | striped
W=/work/wt-s3full
A=/tmp/s3full/aerotp
S=$W/bench/seed003_lab.py
IR=$W/bench/traces/seed003-iridium.toml
cd /tmp/s3full
case $1 in
offered)
  # Item 1: delivered against offered rate, 47-minute sessions (D=2820), seeds 3 and 4,
  # 1, 2 and 3 channels: 30 labs at once (launch-offered.sh with D=2820).
  O=/tmp/s3full/offered-47min
  D=2820
  mkdir -p $O
  for seed in 3 4; do
    for n in 1 2 3; do
      for r in 1024 2048 4096 6144 8192; do
        name=off-s$seed-p$n-r$r
        nohup nice -n 10 python3 $S run --name $name --out $O --aerotp $A --kind aerotp --scenario $IR --cut \
          --seed $seed --file src-3M.bin --paths $n --rate $((2400 * n)) --offer $r --duration $D \
          --timeout $((D + 60)) --measure $((D + 1)) > $O/$name.out 2>&1 &
      done
    done
  done
  ;;
blackouts)
  # Item 2: two more runs of each blackout (seeds 4 and 5; the blackout is at 5 min for
  # 10/20/30 min whatever the seed, the seed moves the call drops), as launch-long.sh.
  O=/tmp/s3full/long
  mkdir -p $O
  for seed in 4 5; do
    for m in 10 20 30; do
      name=blackout-${m}min-s$seed
      nohup nice -n 10 python3 $S run --name $name --out $O --aerotp $A --kind aerotp \
        --scenario $W/bench/traces/seed003-blackout-${m}min.toml --seed $seed --file bulk-600k.bin \
        --paths 3 --rate 7200 --timeout 3900 --measure 2820 > $O/$name.out 2>&1 &
    done
  done
  ;;
striped)
  # Item 3: kernel TCP striped packet by packet over the three channels (the paper's teql;
  # --kind tcp-striped), 47 minutes as the other peers in long/; started 18:53 after a
  # 150-s check on the channels without call drops (test/st-test, not kept: 132 / 132 / 131
  # packets per channel forward, 82 / 82 / 81 back, 5,491 b/s delivered).
  O=/tmp/s3full/long
  mkdir -p $O
  for run in cubic-s3:cubic bbr-s3:bbr cubic-s3-again:cubic; do
    name=tcp-striped-${run%%:*}
    nohup nice -n 10 python3 $S run --name $name --out $O --aerotp $A --kind tcp-striped --scenario $IR \
      --seed 3 --file src-3M.bin --paths 3 --cc ${run##*:} --timeout 2830 --measure 2820 > $O/$name.out 2>&1 &
  done
  ;;
esac
