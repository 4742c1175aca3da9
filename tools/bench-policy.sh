#!/usr/bin/env bash
# tools/bench-policy.sh: eviction policies under reclaim pressure, as ratios
# to FIFO measured in one run on one cluster (1 directory + 1 node, strong
# mode).
#
#   tools/bench-policy.sh [--policies "fifo lru s3fifo ..."] [--size SIZE]
#                         [--limit PAGES] [--theta T] [--runtime S]
#
# The node's owned pages are capped with `cache config limit=PAGES` (default
# 512 pages, 2 MiB) below the file (default 8m, 2048 pages), so every run
# reclaims. For each policy, switched at run time with `cache policy NAME`
# on the same node: `fio --rw=randread --random_distribution=zipf:T` (skewed
# reads, default theta 0.99, YCSB-C's skew) for --runtime seconds (default
# 15), starting from an empty cache (fio's --invalidate=1), then a loop: the
# file read sequentially, over and over (a loop bigger than the cache, where
# LRU and FIFO never hit). Reported per policy: hit ratio (1 - misses /
# reads: the `misses` of `cache stats` over fio's read count; every 4 KiB
# read is one page, and fio's empty-cache start is included) and read
# IOPS, with the ratio to FIFO's IOPS. Under TCG and on a shared host the IOPS carry noise;
# the hit ratios do not depend on timing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091 # tools/lib/bench.sh, checked on its own
. "$ROOT/tools/lib/bench.sh"
POLICIES="fifo lru clock lfu mru s3fifo sieve arc"
SIZE=8m
LIMIT=512
THETA=0.99
RUNTIME=15
while [[ $# -gt 0 ]]; do
    case "$1" in
        --policies) POLICIES=${2:?--policies needs a value}; shift 2 ;;
        --size) SIZE=${2:?--size needs a value}; shift 2 ;;
        --limit) LIMIT=${2:?--limit needs a value}; shift 2 ;;
        --theta) THETA=${2:?--theta needs a value}; shift 2 ;;
        --runtime) RUNTIME=${2:?--runtime needs a value}; shift 2 ;;
        -h | --help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-policy.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
read -ra POL <<<"$POLICIES"
[[ ${POL[0]:-} == fifo ]] || { echo "bench-policy.sh: error: --policies must start with fifo (the baseline)" >&2; exit 2; }
[[ $RUNTIME =~ ^[0-9]+$ && $RUNTIME -ge 1 && $RUNTIME -le 600 ]] || { echo "bench-policy.sh: error: --runtime must be 1..600 seconds" >&2; exit 2; }
cd "$ROOT"
RUN=$(mktemp -d /tmp/onecopy-bench-policy.XXXXXX)
trap 'rm -rf "$RUN"' EXIT
F=/bench.dat
FIO="fio --name=pol --bs=4k --size=$SIZE --filename=$F --runtime=$RUNTIME --time_based --invalidate=1"
args=(-e "1: fill $F $SIZE" -e "1: sync" -e "1: cache config limit=$LIMIT")
for p in "${POL[@]}"; do
    args+=(-e "1: cache policy $p"
        -e "1: cache stats" -e "1: $FIO --rw=randread --random_distribution=zipf:$THETA" -e "1: cache stats"
        -e "1: cache stats" -e "1: $FIO --rw=read" -e "1: cache stats")
done
out=$(./qemu-run.sh --nodes 1 --mode strong --run-dir "$RUN" --cmd-timeout $((RUNTIME * 4 + 120)) "${args[@]}")
echo "$out" | grep -E "accel:|cluster up"
echo "$out" | grep -E 'pool frames' | head -1 | sed 's/^\[n1\] */node 1 /'
# Per policy and pattern, in order: stats before, RESULT, stats after.
mapfile -t miss < <(echo "$out" | grep -E '^\[n1\] misses ' | awk '{print $NF}')
mapfile -t iops < <(echo "$out" | grep -o '"read":{"iops":[0-9.]*' | sed 's/.*://')
mapfile -t ios < <(echo "$out" | grep -o '"read":{"iops":[^}]*' | grep -o '"ios":[0-9]*' | sed 's/.*://')
want=$((${#POL[@]} * 2))
if [[ ${#iops[@]} -ne $want || ${#ios[@]} -ne $want || ${#miss[@]} -ne $((want * 2)) ]]; then
    echo "bench-policy.sh: error: expected $want fio results, got ${#iops[@]} (output below)" >&2
    echo "$out" >&2
    exit 1
fi
hr() { awk -v m="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.3f", 1 - m / n; else print "n/a" }'; }
for pat in 0 1; do
    if [[ $pat == 0 ]]; then
        echo "randread zipf:$THETA over $SIZE, limit $LIMIT pages, ${RUNTIME}s per policy"
    else
        echo "sequential loop over $SIZE, limit $LIMIT pages, ${RUNTIME}s per policy"
    fi
    printf '  %-8s %9s %11s %9s\n' policy "hit ratio" "read IOPS" "vs fifo"
    for i in "${!POL[@]}"; do
        k=$((i * 2 + pat))
        m=$((miss[k * 2 + 1] - miss[k * 2]))
        printf '  %-8s %9s %11s %8sx\n' "${POL[$i]}" "$(hr "$m" "${ios[$k]}")" "${iops[$k]}" "$(ratio "${iops[$k]}" "${iops[pat]}")"
    done
done
echo "one node busy (plus the directory); FIFO is the same-run baseline"
