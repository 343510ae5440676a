# Sourced by lab-gw.sh and lab-prio.sh (not run on its own).
# lab_up ARGS...: starts `aerotp lab ARGS... --name $TAG` in the background, logging to
#   $W/lab.log, and waits for its namespaces. Needs AEROTP, W, TAG. Sets LAB (its pid), AIR
#   and GROUND, and an EXIT trap that stops the lab and prints its link counters.
# air CMD / ground CMD: run CMD in that namespace.
# need_number NAME VALUE: exits with a message unless VALUE is a whole number (0, 1, 2, ...).

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
