#!/usr/bin/env bash
# tools/bench-policy-apps.sh: cache_ext's three workloads under every
# eviction policy, as ratios to FIFO measured in one run on one cluster
# (1 directory + 1 node, strong mode; issue #12, "What to measure").
#
#   tools/bench-policy-apps.sh [--policies "fifo lru ..."] [--limit PAGES]
#       [--kv-size SIZE] [--search-size SIZE] [--theta T] [--runtime S]
#       [--scan-frac F] [--scan-len BLOCKS] [--passes N]
#
# Datasets are built on the host (qemu-run.sh --dataset kv:KV,search:SEARCH;
# defaults 8m and 6m); the node's owned pages are capped with `cache config
# limit=PAGES` (default 512, 2 MiB), below both. For each policy, switched
# at run time with `cache policy NAME` on the same node, each run after a
# `cache drop` (an empty cache):
#   YCSB-C:   app kv --dist zipf:T (default 0.99) for --runtime S (10)
#   GET-SCAN: the same with --scan-frac F (0.0005) --scan-len BLOCKS (512)
#             --scan-group scan (the scans' reads in task group `scan`,
#             which the get-scan policy keeps on its own list)
#   search:   app search --passes N (6): every file read whole, in order
# Reported: hit ratio (1 - misses / page accesses, this node's over the
# run, from the RESULT line's cache counters, where every access counts one
# local hit; for GET-SCAN the GETs' own, from `cache groups` of group
# default: hits / (hits + misses)), throughput (lookups/s; GET lookups/s;
# passes/s) and its ratio to FIFO in the same run. Under TCG on
# a shared host the throughputs carry noise; hit ratios do not depend on
# timing beyond how many operations a run does.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
POLICIES="fifo lru clock lfu mru s3fifo sieve arc get-scan cluster"
LIMIT=512
KV_SIZE=8m
SEARCH_SIZE=6m
THETA=0.99
RUNTIME=10
SCAN_FRAC=0.0005
SCAN_LEN=512
PASSES=6
while [[ $# -gt 0 ]]; do
    case "$1" in
        --policies) POLICIES=${2:?--policies needs a value}; shift 2 ;;
        --limit) LIMIT=${2:?--limit needs a value}; shift 2 ;;
        --kv-size) KV_SIZE=${2:?--kv-size needs a value}; shift 2 ;;
        --search-size) SEARCH_SIZE=${2:?--search-size needs a value}; shift 2 ;;
        --theta) THETA=${2:?--theta needs a value}; shift 2 ;;
        --runtime) RUNTIME=${2:?--runtime needs a value}; shift 2 ;;
        --scan-frac) SCAN_FRAC=${2:?--scan-frac needs a value}; shift 2 ;;
        --scan-len) SCAN_LEN=${2:?--scan-len needs a value}; shift 2 ;;
        --passes) PASSES=${2:?--passes needs a value}; shift 2 ;;
        -h | --help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-policy-apps.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
die() { echo "bench-policy-apps.sh: error: $*" >&2; exit 2; }
read -ra POL <<<"$POLICIES"
[[ ${POL[0]:-} == fifo ]] || die "--policies must start with fifo (the baseline)"
[[ $RUNTIME =~ ^[0-9]+$ && $RUNTIME -ge 1 && $RUNTIME -le 600 ]] || die "--runtime must be 1..600 seconds"
[[ $PASSES =~ ^[0-9]+$ && $PASSES -ge 1 && $PASSES -le 100 ]] || die "--passes must be 1..100"
[[ $LIMIT =~ ^[0-9]+$ && $LIMIT -ge 64 ]] || die "--limit must be 64 pages or more"
cd "$ROOT"
RUN=$(mktemp -d /tmp/onecopy-bench-policy-apps.XXXXXX)
trap 'rm -rf "$RUN"' EXIT
SEARCH_TIMEOUT=$((RUNTIME * 30))
KV="app kv --dist zipf:$THETA --runtime $RUNTIME"
args=(-e "1: cache config limit=$LIMIT")
for p in "${POL[@]}"; do
    args+=(-e "1: cache policy $p"
        -e "1: cache drop" -e "1: $KV"
        -e "1: cache drop" -e "1: cache groups"
        -e "1: $KV --scan-frac $SCAN_FRAC --scan-len $SCAN_LEN --scan-group scan"
        -e "1: cache groups"
        -e "1: cache drop" -e "1: app search --passes $PASSES --runtime $SEARCH_TIMEOUT")
done
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
out=$(./qemu-run.sh --nodes 1 --mode strong --run-dir "$RUN" --dataset "kv:$KV_SIZE,search:$SEARCH_SIZE" \
    --cmd-timeout $((SEARCH_TIMEOUT + 120)) "${args[@]}")
t1=$(date +%s)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
[[ -z ${BENCH_RAW:-} ]] || echo "$out" >"$BENCH_RAW"
echo "$out" | grep -E "accel:|cluster up|disk: created" | head -3
echo "$out" | grep -E "pool frames" | head -1 | sed "s/^\[n1\] */node 1 /" || true
mapfile -t res < <(echo "$out" | grep -E '^\[n1\] RESULT ')
# group default's hits and misses, before and after each GET-SCAN run.
mapfile -t grp < <(echo "$out" | awk '$1 == "[n1]" && $2 == "default" && NF == 8 { print $6, $7 }')
want=$((${#POL[@]} * 3))
if [[ ${#res[@]} -ne $want || ${#grp[@]} -ne $((${#POL[@]} * 2)) ]]; then
    echo "bench-policy-apps.sh: error: expected $want RESULT lines, got ${#res[@]} (output below)" >&2
    echo "$out" >&2
    exit 1
fi
field() { grep -o "\"$2\":[0-9.]*" <<<"$1" | head -1 | sed 's/.*://'; }
opfield() { grep -o "\"$2\":{\"count\":[0-9]*,\"per_s\":[0-9.]*" <<<"$1" | grep -o "\"$3\":[0-9.]*" | sed 's/.*://'; }
# Every page access counts one local hit (a miss's access too, once its
# page is in), so the accesses are the hits and the hit ratio 1 - misses/hits.
hr() { awk -v h="$1" -v m="$2" 'BEGIN { if (h > 0) printf "%.3f", 1 - m / h; else print "n/a" }'; }
# `cache groups` counts hits as accesses served without a miss.
hr_group() { awk -v h="$1" -v m="$2" 'BEGIN { if (h + m > 0) printf "%.3f", h / (h + m); else print "n/a" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
declare -A HR TP
for i in "${!POL[@]}"; do
    kv=${res[i * 3]} gs=${res[i * 3 + 1]} se=${res[i * 3 + 2]}
    HR[$i,0]=$(hr "$(field "$kv" "hits local")" "$(field "$kv" misses)")
    TP[$i,0]=$(field "$kv" throughput)
    read -r h0 m0 <<<"${grp[i * 2]}"
    read -r h1 m1 <<<"${grp[i * 2 + 1]}"
    HR[$i,1]=$(hr_group $((h1 - h0)) $((m1 - m0)))
    TP[$i,1]=$(opfield "$gs" get per_s)
    SC[$i]=$(opfield "$gs" scan count)
    HR[$i,2]=$(hr "$(field "$se" "hits local")" "$(field "$se" misses)")
    TP[$i,2]=$(field "$se" throughput)
    MB[$i]=$(field "$se" mb_per_s)
    MP[$i]=$(field "$se" matches_per_pass)
done
echo "1 directory + 1 node, strong; limit $LIMIT pages; kv:$KV_SIZE, search:$SEARCH_SIZE"
echo "YCSB-C = app kv --dist zipf:$THETA, ${RUNTIME}s; GET-SCAN = same + --scan-frac $SCAN_FRAC --scan-len $SCAN_LEN --scan-group scan; search = app search --passes $PASSES"
printf '  %-8s | %-24s | %-32s | %-36s\n' "" "YCSB-C: hit / lookups/s" "GET-SCAN: GET hit / GET/s (scans)" "search: hit / passes/s (MB/s, matches)"
for i in "${!POL[@]}"; do
    printf '  %-8s | %5s %8s %6sx | %5s %8s %6sx (%s) | %5s %6s %6sx (%s, %s)\n' "${POL[$i]}" \
        "${HR[$i,0]}" "${TP[$i,0]}" "$(ratio "${TP[$i,0]}" "${TP[0,0]}")" \
        "${HR[$i,1]}" "${TP[$i,1]}" "$(ratio "${TP[$i,1]}" "${TP[0,1]}")" "${SC[$i]}" \
        "${HR[$i,2]}" "${TP[$i,2]}" "$(ratio "${TP[$i,2]}" "${TP[0,2]}")" "${MB[$i]}" "${MP[$i]}"
done
echo "load average before: $load0, after: $load1; wall time $((t1 - t0)) s; FIFO is the same-run baseline"
echo "RESULT {\"policies\":\"${POL[*]}\",\"limit\":$LIMIT,\"runtime\":$RUNTIME,\"scan_frac\":$SCAN_FRAC,\"scan_len\":$SCAN_LEN,\"passes\":$PASSES,\"wall_s\":$((t1 - t0))}"
