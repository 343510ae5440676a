# Sourced by lab-gw.sh, lab-prio.sh, lab-flows.sh and lab-tun.sh (not run on its own).
# lab_up ARGS...: starts `aerotp lab ARGS... --name $TAG` in the background, logging to
#   $W/lab.log, and waits for its namespaces. Needs AEROTP, W, TAG. Sets LAB (its pid), AIR
#   and GROUND, and an EXIT trap that stops the lab and prints its link counters.
# air CMD / ground CMD: run CMD in that namespace.
# need_number NAME VALUE: exits with a message unless VALUE is a whole number (0, 1, 2, ...).
# rss PID FIELD: VmRSS or VmHWM of a process, in kB.
# rate_below RATE PCT: PCT % of RATE (5mbit, 2.4kbit, 500000: k, m, g prefixes), whole bit/s.
# gw_rate WHAT RATE: the gateways' --rate for lab-tun.sh's WHAT on a link of RATE: 97 % of it
#   for flows, RATE itself for curl and upload (which measure the ceiling). Paced at exactly
#   the link's rate, the gateways never drain a queue that a burst (the endpoint's 10 ms of
#   credit, a late wake-up) leaves at the emulated link, and the control flow waits in it
#   whatever its class: 43 ms instead of 23 (docs/results/gw.md, "Where the control flow
#   waited").
# flows_phase RUN DEST DUR FLOWS BULK BULK_BYTES UDP HOLD: the many-flows phase of
#   lab-flows.sh and lab-tun.sh (crates/gw/scripts/flows/): the control flow's round trip
#   for DUR s alone (IDLE); the load client (RUN: the function running it in its namespace,
#   air or app; DEST: FLOWS_DEST, the ground's address, or empty for the ingress's own
#   listeners) opens FLOWS TCP flows, BULK uploads of BULK_BYTES and UDP UDP flows, held at
#   least HOLD s; the gateways' RSS (ING, EG) before (RIN0, REG0) and with every flow open
#   (RIN1, REG1); the control round trip again 3 s into the load (LOADED); waits for the
#   client (LOAD: its pid). Needs W, HERE, ING, EG; exits 1 if the flows do not open or the
#   client fails.

lab_down() {
  kill "$LAB" 2>/dev/null || true; wait "$LAB" 2>/dev/null || true
  grep -E "^(forward|reverse|dropped by)" "$W/lab.log" || true
}

lab_up() {
  "$AEROTP" lab "$@" --name "$TAG" >"$W/lab.log" 2>&1 &
  LAB=$!
  trap lab_down EXIT
  AIR=""
  for _ in $(seq 50); do
    AIR=$(ip netns list | awk '{print $1}' | grep -E "^aerotp-air-$LAB-$TAG$" || true)
    [ -n "$AIR" ] && ip netns exec "$AIR" ip link show atp-air >/dev/null 2>&1 && break
    sleep 0.2
  done
  if [ -z "$AIR" ]; then
    echo "the lab did not come up within 10 s; its log ($W/lab.log) ends:" >&2
    tail -5 "$W/lab.log" >&2
    exit 1
  fi
  GROUND=aerotp-ground-$LAB-$TAG
}

air() { ip netns exec "$AIR" "$@"; }
ground() { ip netns exec "$GROUND" "$@"; }

need_number() {
  [[ "$2" =~ ^[0-9]+$ ]] || { echo "$1 must be a whole number (0, 1, 2, ...), not '$2'" >&2; exit 2; }
}

rate_below() {
  awk -v r="$1" -v p="$2" 'BEGIN {
    r = tolower(r)
    if (!match(r, /^[0-9]+(\.[0-9]+)?/)) { print "not a rate: " r > "/dev/stderr"; exit 2 }
    n = substr(r, 1, RLENGTH); u = substr(r, RLENGTH + 1); m = 1
    if (u ~ /^k/) m = 1e3; else if (u ~ /^m/) m = 1e6; else if (u ~ /^g/) m = 1e9
    printf "%d\n", n * m * p / 100 }'
}

gw_rate() {
  if [ "$1" = flows ]; then rate_below "$2" 97; else echo "$2"; fi
}

rss() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }

flows_phase() {
  local run=$1 dest=$2 dur=$3 flows=$4 bulk=$5 bulk_bytes=$6 udp=$7 hold=$8
  # FLOWS_DEST only when given: without it the client uses the ingress's listeners.
  _flows_client() { "$run" env ${dest:+FLOWS_DEST="$dest"} python3 "$HERE/flows/client.py" "$@"; }
  IDLE=$(_flows_client rtt 8100 "$dur")
  echo "idle control round trip: $IDLE"
  RIN0=$(rss "$ING" VmRSS); REG0=$(rss "$EG" VmRSS)
  _flows_client load "$W" "$flows" "$bulk" "$bulk_bytes" "$udp" "$hold" >"$W/load.log" 2>&1 &
  LOAD=$!
  for _ in $(seq 1200); do
    [ -e "$W/opened" ] && break
    kill -0 "$LOAD" 2>/dev/null || { echo "the load client stopped:" >&2; tail -5 "$W/load.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -e "$W/opened" ] || { echo "the flows did not open within 120 s" >&2; exit 1; }
  sleep 2
  RIN1=$(rss "$ING" VmRSS); REG1=$(rss "$EG" VmRSS)
  echo "opened: $(cat "$W/opened"); RSS ingress $RIN0 -> $RIN1 kB, egress $REG0 -> $REG1 kB"
  touch "$W/go"
  sleep 3
  LOADED=$(_flows_client rtt 8100 "$dur")
  echo "loaded control round trip: $LOADED"
  timeout 900 tail --pid="$LOAD" -f /dev/null || { echo "the load client did not finish within 900 s" >&2; exit 1; }
  wait "$LOAD" || { echo "the load client failed:" >&2; tail -5 "$W/load.log" >&2; exit 1; }
}
