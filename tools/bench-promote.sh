#!/usr/bin/env bash
# tools/bench-promote.sh: hot-page promotion as a
# ratio in one run: CH-R read latency with promotion off and on, on one
# cluster (1 directory + 2 nodes, relaxed mode by default, emulated CXL
# latency).
#
#   tools/bench-promote.sh [--mode relaxed|strong] [--cxl-latency-ns N]
#                          [--size SIZE] [--runtime S] [--rounds R]
#                          [--threshold T] [--no-build]
#
# Node 1 writes and reads a file (default 1m) so it owns every page. Then,
# R times (default 3): node 2 drops its cache and reads the file once (it
# maps node 1's frames: CH-R, no replica), runs `fio --rw=randread --bs=4k
# --iodepth=1 --ioengine=libaio --time_based` for S seconds (default 5)
# with `cache config promote=0`, and again with `promote=T` (default 4): a
# page read more than T times within 100 ms keeps a replica in node 2's
# memory, read without the emulated latency (default 250 ns per copy from
# a peer's frame; in strong mode the directory grants each replica,
# PROMOTE). Prints each run's mean and p50 latency, the medians over the
# rounds, on / off, and the replica pages (4 KiB of node memory each)
# `cache stats` reported after the last run. One node busy (plus the
# directory).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091 # tools/lib/bench.sh, checked on its own
. "$ROOT/tools/lib/bench.sh"
CXL=250
MODE=relaxed
SIZE=1m
RUNTIME=5
ROUNDS=3
T=4
BUILD=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --cxl-latency-ns) CXL=${2:?--cxl-latency-ns needs a value}; shift 2 ;;
        --mode) MODE=${2:?--mode needs a value}; shift 2 ;;
        --size) SIZE=${2:?--size needs a value}; shift 2 ;;
        --runtime) RUNTIME=${2:?--runtime needs a value}; shift 2 ;;
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --threshold) T=${2:?--threshold needs a value}; shift 2 ;;
        --no-build) BUILD=(--no-build); shift ;;
        -h | --help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-promote.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $MODE == relaxed || $MODE == strong ]] ||
    { echo "bench-promote.sh: error: --mode must be relaxed or strong, got '$MODE'" >&2; exit 2; }
require_int bench-promote.sh --cxl-latency-ns "$CXL" 0 100000
require_int bench-promote.sh --runtime "$RUNTIME" 1 600
require_int bench-promote.sh --rounds "$ROUNDS" 1 50
require_int bench-promote.sh --threshold "$T" 1 1048576
cd "$ROOT"
RUN=$(mktemp -d /tmp/onecopy-bench-promote.XXXXXX)
trap 'rm -rf "$RUN"' EXIT
F=/hot.dat
FIO="fio --name=promote --rw=randread --bs=4k --size=$SIZE --filename=$F --ioengine=libaio --iodepth=1 --runtime=$RUNTIME --time_based --invalidate=0"
args=(-e "1: fill $F $SIZE" -e "1: sync" -e "1: sum $F")
for ((r = 1; r <= ROUNDS; r++)); do
    # The drop takes the last run's replicas (strong ones survive an open).
    args+=(-e "2: cache config promote=0" -e "2: cache drop" -e "2: sum $F" -e "2: $FIO"
        -e "2: cache config promote=$T" -e "2: $FIO")
done
args+=(-e "2: cache stats")
out=$(./qemu-run.sh "${BUILD[@]}" --nodes 2 --mode "$MODE" --cxl-latency-ns "$CXL" --run-dir "$RUN" \
    --cmd-timeout $((RUNTIME * 4 + 120)) "${args[@]}")
echo "$out" | grep -E "accel:|cluster up"
mapfile -t mean < <(echo "$out" | grep -o '"read":{[^}]*"lat_ns":{[^}]*' | grep -o '"mean":[0-9]*' | cut -d: -f2)
mapfile -t p50 < <(echo "$out" | grep -o '"read":{[^}]*"lat_ns":{[^}]*' | grep -o '"p50":[0-9]*' | cut -d: -f2)
if [[ ${#mean[@]} -ne $((ROUNDS * 2)) || ${#p50[@]} -ne $((ROUNDS * 2)) ]]; then
    echo "bench-promote.sh: error: expected $((ROUNDS * 2)) fio results, got ${#mean[@]} (output below)" >&2
    echo "$out" >&2
    exit 1
fi
stat() { echo "$out" | grep -E "^\[n2\] $1 +[0-9]+$" | tail -1 | awk '{print $NF}'; }
us() { awk -v n="$1" 'BEGIN { printf "%.2f", n / 1000 }'; }
echo "$MODE mode, CH-R 4k randread, iodepth 1, libaio, $SIZE file, ${RUNTIME}s per run, cxl latency $CXL ns, promote=$T"
printf '  %-6s %14s %14s\n' round "off mean/p50" "on mean/p50"
off_m=() on_m=() off_p=() on_p=()
for ((r = 0; r < ROUNDS; r++)); do
    off_m+=("${mean[r * 2]}") on_m+=("${mean[r * 2 + 1]}")
    off_p+=("${p50[r * 2]}") on_p+=("${p50[r * 2 + 1]}")
    printf '  %-6s %14s %14s\n' $((r + 1)) "$(us "${mean[r * 2]}")/$(us "${p50[r * 2]}")" \
        "$(us "${mean[r * 2 + 1]}")/$(us "${p50[r * 2 + 1]}")"
done
mo=$(median "${off_m[@]}") mn=$(median "${on_m[@]}") po=$(median "${off_p[@]}") pn=$(median "${on_p[@]}")
echo "  median mean: off $(us "$mo") us, on $(us "$mn") us (on/off $(ratio "$mn" "$mo")x); median p50: off $(us "$po") us, on $(us "$pn") us (on/off $(ratio "$pn" "$po")x)"
echo "  node 2 after the last run: replica pages $(stat 'replica pages') ($(($(stat 'replica pages') * 4)) KiB of node memory), promotions $(stat promotions), refused $(stat 'promotions refused'), demotions $(stat demotions), revoked $(stat 'replicas revoked'), hits replica $(stat 'hits replica'), hits remote $(stat 'hits remote')"
echo "one node busy (plus the directory); promotion off is the same-run baseline"
RESULT=$(printf '{"bench":"promote","mode":"%s","cxl_latency_ns":%s,"threshold":%s,"size":"%s","runtime_s":%s,"rounds":%s,"off_mean_ns":%s,"on_mean_ns":%s,"off_p50_ns":%s,"on_p50_ns":%s,"replica_pages":%s}' \
    "$MODE" "$CXL" "$T" "$SIZE" "$RUNTIME" "$ROUNDS" "$mo" "$mn" "$po" "$pn" "$(stat 'replica pages')")
echo "RESULT $RESULT"
