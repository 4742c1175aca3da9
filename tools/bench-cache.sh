#!/usr/bin/env bash
# tools/bench-cache.sh: the single-copy cache's basic latencies, as ratios
# measured in one run on one cluster (1 directory + 3 nodes, strong mode).
#
#   tools/bench-cache.sh [--size SIZE] [--tick-hz HZ] [--mode strong|relaxed]
#
# Scenarios (DPC §6.2): CM (cached nowhere: filled from disk into our frame),
# local hit, CM-R (first touch of a page a peer owns: one batched directory
# round trip, then a mapping), CH-R (already mapped: copy from the owner's
# frame), and one synchronous page invalidation with 2, 1 and 0 sharers. The
# sharers are idle at their prompt (halted between timer ticks), so the
# invalidation figures are "idle sharer" figures; --tick-hz sets how often
# an idle kernel wakes. Only one node is busy at a time; the directory is
# the other busy instance.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIZE=1m
TICK=1000
MODE=strong
while [[ $# -gt 0 ]]; do
    case "$1" in
        --size) SIZE=${2:?--size needs a value}; shift 2 ;;
        --tick-hz) TICK=${2:?--tick-hz needs a value}; shift 2 ;;
        --mode) MODE=${2:?--mode needs a value}; shift 2 ;;
        -h | --help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-cache.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
cd "$ROOT"
RUN=$(mktemp -d /tmp/onecopy-bench-cache.XXXXXX)
trap 'rm -rf "$RUN"' EXIT
F=/bench.dat
out=$(./qemu-run.sh --nodes 3 --mode "$MODE" --run-dir "$RUN" --append-extra "tick_hz=$TICK" \
    -e "1: fill $F $SIZE" -e "1: sync" -e "1: cache drop" \
    -e "1: bench read $F" \
    -e "1: bench read $F" \
    -e "2: bench read $F" \
    -e "2: bench read $F" \
    -e "3: bench read $F" \
    -e "1: bench inv $F" \
    -e "1: bench read $F" -e "2: bench read $F" -e "1: bench inv $F" \
    -e "1: bench read $F" -e "1: bench inv $F" \
    -e "1: bench read $F" -e "2: bench dir $F 5" \
    -e "2: dir stats")
echo "$out" | grep -E "accel:|cluster up"
mapfile -t med < <(echo "$out" | grep -E '(read 4k|invalidate 1 page):' | sed -E 's/.*median=([0-9]+) ns.*mean=([0-9]+) ns.*/\1 \2/')
label=("CM (cold, node 1)" "local hit (node 1)" "CM-R (node 2)" "CH-R (node 2)" "CM-R (node 3)"
    "invalidate, 2 idle sharers" "CM (node 1 again)" "CM-R (node 2 again)" "invalidate, 1 idle sharer"
    "CM (node 1, third)" "invalidate, 0 sharers" "CM (node 1, fourth)")
printf '%-28s %12s %12s\n' scenario "median ns" "mean ns"
for i in "${!med[@]}"; do
    read -r m a <<<"${med[$i]}"
    printf '%-28s %12s %12s\n' "${label[$i]}" "$m" "$a"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
m() { echo "${med[$1]}" | cut -d' ' -f1; }
a() { echo "${med[$1]}" | cut -d' ' -f2; }
echo "CH-R / local hit (median):          $(ratio "$(m 3)" "$(m 1)")x   (goal <= 1.2x)"
echo "CM / CM-R (median, first touch):    $(ratio "$(m 0)" "$(m 2)")x   (DPC 2.6x, goal >= 10x)"
echo "$out" | grep -o 'directory page ops: .*' | sed 's/^/batched (32 per round trip) /'
echo "$out" | grep -E 'largest batch' | sed 's/^\[n2\] */directory: /' 
echo "busy instances: the directory + one node at a time; tick_hz=$TICK; mode $MODE"
