#!/usr/bin/env bash
# tools/bench-groups.sh: a scan next to a key-value-like hot set on one node,
# with and without a page limit on the scan's task group, measured in one
# run on one cluster (1 directory + 1 node, strong mode;
# cache_ext's per-cgroup case).
#
#   tools/bench-groups.sh [--kv-size SIZE] [--scan-size SIZE] [--limit PAGES]
#                         [--scan-limit PAGES] [--theta T] [--runtime S]
#                         [--rounds N] [--policy NAME]
#
# The node's owned pages are capped at --limit (512). The hot set is a file
# of --kv-size (1m, 256 pages) read by `fio --rw=randread
# --random_distribution=zipf:T` (0.99) in task group kvX; the scan is one
# sequential pass over a file of --scan-size (8m, 2048 pages) in group
# scanX. Per configuration: the hot set is warmed (one kv run, not
# measured), then --rounds (4) times: a scan pass, then a kv run of
# --runtime seconds (3), measured. Configuration "shared": no group has a
# limit (both share the node's --policy lists, default fifo: the behaviour
# without groups). Configuration "limited": `cache config group=scanB
# limit=--scan-limit` (64). Reported: kv hit ratio (hits / (hits + misses)
# of the kv group in `cache groups` over the measured runs) and kv read
# IOPS (mean over the measured runs), limited vs shared in the same run.
# Every fio run keeps the cache (--invalidate=0).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091 # tools/lib/bench.sh, checked on its own
. "$ROOT/tools/lib/bench.sh"
KV_SIZE=1m
SCAN_SIZE=8m
LIMIT=512
SCAN_LIMIT=64
THETA=0.99
RUNTIME=3
ROUNDS=4
POLICY=fifo
while [[ $# -gt 0 ]]; do
    case "$1" in
        --kv-size) KV_SIZE=${2:?--kv-size needs a value}; shift 2 ;;
        --scan-size) SCAN_SIZE=${2:?--scan-size needs a value}; shift 2 ;;
        --limit) LIMIT=${2:?--limit needs a value}; shift 2 ;;
        --scan-limit) SCAN_LIMIT=${2:?--scan-limit needs a value}; shift 2 ;;
        --theta) THETA=${2:?--theta needs a value}; shift 2 ;;
        --runtime) RUNTIME=${2:?--runtime needs a value}; shift 2 ;;
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --policy) POLICY=${2:?--policy needs a value}; shift 2 ;;
        -h | --help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-groups.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $RUNTIME =~ ^[0-9]+$ && $RUNTIME -ge 1 && $RUNTIME -le 600 ]] || { echo "bench-groups.sh: error: --runtime must be 1..600 seconds" >&2; exit 2; }
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 1 && $ROUNDS -le 50 ]] || { echo "bench-groups.sh: error: --rounds must be 1..50" >&2; exit 2; }
cd "$ROOT"
RUN=$(mktemp -d /tmp/onecopy-bench-groups.XXXXXX)
trap 'rm -rf "$RUN"' EXIT
KV=/kv.dat
SCAN=/scan.dat
args=(-e "1: fill $KV $KV_SIZE" -e "1: fill $SCAN $SCAN_SIZE" -e "1: sync" -e "1: cache drop"
    -e "1: cache policy $POLICY" -e "1: cache config limit=$LIMIT")
kv() { echo "1: fio --name=kv --rw=randread --random_distribution=zipf:$THETA --bs=4k --size=$KV_SIZE --filename=$KV --runtime=$RUNTIME --time_based --invalidate=0 --group $1"; }
scan() { echo "1: fio --name=scan --rw=read --bs=4k --size=$SCAN_SIZE --filename=$SCAN --invalidate=0 --group $1"; }
for cfg in A B; do
    args+=(-e "1: cache drop")
    [[ $cfg == B ]] && args+=(-e "1: cache config group=scanB limit=$SCAN_LIMIT")
    args+=(-e "$(kv "kv$cfg")" -e "1: cache groups")
    for _ in $(seq "$ROUNDS"); do
        args+=(-e "$(scan "scan$cfg")" -e "$(kv "kv$cfg")")
    done
    args+=(-e "1: cache groups")
done
out=$(./qemu-run.sh --nodes 1 --mode strong --run-dir "$RUN" \
    --cmd-timeout $((RUNTIME * 4 + 300)) "${args[@]}")
echo "$out" | grep -E "accel:|cluster up"
# `cache groups` lines of group $1, in order: "hits misses pages evictions".
counts() { echo "$out" | awk -v g="$1" '$1 == "[n1]" && $2 == g && NF == 8 { print $6, $7, $5, $8 }'; }
mapfile -t iops < <(echo "$out" | grep '"name":"kv"' | grep -o '"read":{"iops":[0-9.]*' | sed 's/.*://')
want=$(((ROUNDS + 1) * 2))
if [[ ${#iops[@]} -ne $want ]]; then
    # The RESULT line may not carry the job name: take every kv-sized run.
    mapfile -t iops < <(echo "$out" | grep -E '^\[n1\] RESULT' | grep -v '"rw":"read"' | grep -o '"read":{"iops":[0-9.]*' | sed 's/.*://')
fi
if [[ ${#iops[@]} -ne $want ]]; then
    echo "bench-groups.sh: error: expected $want kv fio results, got ${#iops[@]} (output below)" >&2
    echo "$out" >&2
    exit 1
fi
declare -A HR IOPS SCANPAGES
for c in 0 1; do
    cfg=$([[ $c == 0 ]] && echo A || echo B)
    mapfile -t g < <(counts "kv$cfg")
    mapfile -t s < <(counts "scan$cfg")
    # Groups stay: kvA and scanA show in configuration B's listings too.
    if [[ ${#g[@]} -lt 2 || ${#s[@]} -lt 1 ]]; then
        echo "bench-groups.sh: error: no cache groups lines for kv$cfg/scan$cfg (output below)" >&2
        echo "$out" >&2
        exit 1
    fi
    read -r h0 m0 _ _ <<<"${g[0]}"
    read -r h1 m1 _ _ <<<"${g[1]}"
    if [[ $cfg == A ]]; then sl=${s[0]}; else sl=${s[-1]}; fi
    read -r _ _ sp _ <<<"$sl"
    HR[$cfg]=$(awk -v h=$((h1 - h0)) -v m=$((m1 - m0)) 'BEGIN { if (h + m > 0) printf "%.3f", h / (h + m); else print "n/a" }')
    first=$((c * (ROUNDS + 1) + 1))
    IOPS[$cfg]=$(printf '%s\n' "${iops[@]:first:ROUNDS}" | awk '{ s += $1 } END { printf "%.0f", s / NR }')
    SCANPAGES[$cfg]=$sp
done
echo "kv: randread zipf:$THETA over $KV_SIZE, ${RUNTIME}s after each of $ROUNDS scans of $SCAN_SIZE; node limit $LIMIT pages, policy $POLICY"
printf '  %-28s %12s %12s %10s %14s\n' configuration "kv hit ratio" "kv read IOPS" "vs shared" "scan pages end"
printf '  %-28s %12s %12s %9sx %14s\n' "shared (no group limit)" "${HR[A]}" "${IOPS[A]}" 1.00 "${SCANPAGES[A]}"
printf '  %-28s %12s %12s %9sx %14s\n' "limited (scan limit=$SCAN_LIMIT)" "${HR[B]}" "${IOPS[B]}" "$(ratio "${IOPS[B]}" "${IOPS[A]}")" "${SCANPAGES[B]}"
echo "one node busy (plus the directory); both configurations in the same run"
