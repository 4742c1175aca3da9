#!/usr/bin/env bash
# tools/bench-policy-apps.sh: cache_ext's three workloads under every
# eviction policy, as ratios to FIFO measured in one run on one cluster
# (1 directory + 1 node, strong mode; what cache_ext measured).
#
#   tools/bench-policy-apps.sh [--policies "fifo lru ..."] [--limit PAGES]
#       [--kv-size SIZE] [--search-size SIZE] [--theta T] [--runtime S]
#       [--scan-frac F] [--scan-len BLOCKS] [--passes N] [--no-build]
#
# Datasets are built on the host (qemu-run.sh --dataset kv:KV,search:SEARCH;
# defaults 8m and 6m); the node's owned pages are capped with `cache config
# limit=PAGES` (default 512, 2 MiB), below both. For each policy, switched
# at run time with `cache policy NAME` on the same node, each run after a
# `cache drop` (an empty cache):
#   YCSB-C:   app kv --dist zipf:T (default 0.99) for --runtime S (6)
#   GET-SCAN: the same with --scan-frac F (0.0005) --scan-len BLOCKS (512)
#             --scan-group scan (the scans' reads in task group `scan`,
#             which the get-scan policy keeps on its own list)
#   search:   app search --passes N (6): every file read whole, in order
# Reported: hit ratio (1 - misses / page accesses, this node's over the
# run, from the RESULT line's cache counters, where every access counts one
# local hit; for GET-SCAN the GETs' own, from `cache groups` of group
# default: hits / (hits + misses)), throughput (lookups/s; GET lookups/s;
# passes/s) and its ratio to the FIFO run of the same workload made just
# before it (paired runs: each policy's run follows its own FIFO run, so a
# change of host load between pairs stays out of the ratios; the fifo row
# shows the range of its runs). Under TCG on a shared host the throughputs
# still carry noise; hit ratios do not depend on timing beyond how many
# operations a run does. Throughput per CPU-second (the node's and the
# directory's QEMU, utime + stime over the run's command) is reported
# beside it, with its own ratio: it leaves out the time the guests were
# not running because other work had the host's cores. Besides the
# tables: one `ROW {json}` line per table row (after them) and a
# `RESULT {json}` line with the parameters, for tools/bench-report.sh
# --policies. --no-build: qemu-run.sh --no-build (binaries must exist).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091 # tools/lib/bench.sh, checked on its own
. "$ROOT/tools/lib/bench.sh"
POLICIES="fifo lru clock lfu mru s3fifo sieve arc get-scan cluster"
LIMIT=512
KV_SIZE=8m
SEARCH_SIZE=6m
THETA=0.99
RUNTIME=6
SCAN_FRAC=0.0005
SCAN_LEN=512
PASSES=6
BUILD=()
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
        --no-build) BUILD=(--no-build); shift ;;
        -h | --help) sed -n '2,35p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
SEARCH_TIMEOUT=$((RUNTIME * 30))
KV="app kv --dist zipf:$THETA --runtime $RUNTIME"
WORK=("$KV" "$KV --scan-frac $SCAN_FRAC --scan-len $SCAN_LEN --scan-group scan"
    "app search --passes $PASSES --runtime $SEARCH_TIMEOUT")
# Paired runs: for each policy after fifo and each workload, a FIFO run
# right before the policy's run, so load changes on the host between
# pairs do not enter the ratio (each ratio is to its own FIFO run). The
# cluster stays up (--detach); each app command is one `exec`, with the
# CPU time (utime + stime, /proc) of the node's and the directory's QEMU
# read before and after it: operations per CPU-second are what the
# guests did with the CPU they got, which other work on the host does
# not change the way it changes wall-clock throughput.
TICK=$(getconf CLK_TCK)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
stop_cluster() { ./qemu-run.sh stop --run-dir "$RUN" >/dev/null 2>&1 || true; rm -rf "$RUN"; }
trap stop_cluster EXIT
./qemu-run.sh "${BUILD[@]}" --detach --nodes 1 --mode strong --run-dir "$RUN" --dataset "kv:$KV_SIZE,search:$SEARCH_SIZE" \
    -e "1: cache config limit=$LIMIT" >"$RUN/boot.out" 2>&1 || { cat "$RUN/boot.out" >&2; exit 1; }
pids="$(tr -dc '0-9' <"$RUN/node1.pid") $(tr -dc '0-9' <"$RUN/dir.pid")"
ticks() {
    local p t=0 f
    for p in $pids; do
        f=$(cut -d' ' -f14,15 "/proc/$p/stat") || { echo "bench-policy-apps.sh: error: QEMU $p is gone" >&2; exit 1; }
        t=$((t + ${f% *} + ${f#* }))
    done
    echo "$t"
}
ex() { ./qemu-run.sh exec --run-dir "$RUN" --cmd-timeout $((SEARCH_TIMEOUT + 120)) "$@"; }
out=$(cat "$RUN/boot.out")
cpu=()
for p in "${POL[@]:1}"; do
    for w in 0 1 2; do
        for q in fifo "$p"; do
            out+=$'\n'$(ex -e "1: cache policy $q" -e "1: cache drop" -e "1: cache groups")
            c0=$(ticks)
            out+=$'\n'$(ex -e "1: ${WORK[w]}")
            c1=$(ticks)
            cpu+=($((c1 - c0)))
            out+=$'\n'$(ex -e "1: cache groups")
        done
    done
done
t1=$(date +%s)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
[[ -z ${BENCH_RAW:-} ]] || echo "$out" >"$BENCH_RAW"
echo "$out" | grep -E "accel:|cluster up|disk: created" | head -3
mapfile -t res < <(echo "$out" | grep -E '^\[n1\] RESULT ')
# Group default's hits and misses, before and after each run.
mapfile -t grp < <(echo "$out" | awk '$1 == "[n1]" && $2 == "default" && NF == 8 { print $6, $7 }')
want=$(((${#POL[@]} - 1) * 6))
if [[ ${#res[@]} -ne $want || ${#grp[@]} -ne $((want * 2)) ]]; then
    echo "bench-policy-apps.sh: error: expected $want RESULT lines, got ${#res[@]} (output below)" >&2
    echo "$out" >&2
    exit 1
fi
field() { grep -o "\"$2\":[0-9.]*" <<<"$1" | head -1 | sed 's/.*://'; }
opfield() { grep -o "\"$2\":{\"count\":[0-9]*,\"per_s\":[0-9.]*" <<<"$1" | grep -o "\"$3\":[0-9.]*" | sed 's/.*://'; }
# Every page access counts one local hit (a miss's access too, once its
# page is in), so the accesses are the hits and the hit ratio is
# 1 - misses/hits; below 0 when pages were filled more than once per read
# (evicted between their fill and the read that asked for them).
hr() { awk -v h="$1" -v m="$2" 'BEGIN { if (h > 0) printf "%.3f", 1 - m / h; else print "n/a" }'; }
# `cache groups` counts hits as accesses served without a miss.
hr_group() { awk -v h="$1" -v m="$2" 'BEGIN { if (h + m > 0) printf "%.3f", h / (h + m); else print "n/a" }'; }
# Throughput per CPU-second: throughput x the run's elapsed time / the
# QEMUs' CPU seconds over its exec.
per_cpu() { awk -v t="$1" -v e="$2" -v c="$3" -v hz="$TICK" 'BEGIN { if (c > 0) printf "%.2f", t * e / 1e9 / (c / hz); else print "n/a" }'; }
# Run k: hit ratio, throughput, throughput per CPU-second, extra text.
run_fig() {
    local k=$1 w=$2 r=${res[$1]} h0 m0 h1 m1 tp
    local e
    e=$(field "$r" elapsed_ns)
    case $w in
        0)
            tp=$(field "$r" throughput)
            echo "$(hr "$(field "$r" "hits local")" "$(field "$r" misses)") $tp $(per_cpu "$tp" "$e" "${cpu[k]}") -"
            ;;
        1)
            read -r h0 m0 <<<"${grp[k * 2]}"
            read -r h1 m1 <<<"${grp[k * 2 + 1]}"
            tp=$(opfield "$r" get per_s)
            echo "$(hr_group $((h1 - h0)) $((m1 - m0))) $tp $(per_cpu "$tp" "$e" "${cpu[k]}") $(opfield "$r" scan count)"
            ;;
        2)
            tp=$(field "$r" throughput)
            echo "$(hr "$(field "$r" "hits local")" "$(field "$r" misses)") $tp $(per_cpu "$tp" "$e" "${cpu[k]}") $(field "$r" mb_per_s)/$(field "$r" matches_per_pass)"
            ;;
    esac
}
echo "1 directory + 1 node, strong; limit $LIMIT pages; kv:$KV_SIZE, search:$SEARCH_SIZE"
echo "YCSB-C = app kv --dist zipf:$THETA, ${RUNTIME}s; GET-SCAN = same + --scan-frac $SCAN_FRAC --scan-len $SCAN_LEN --scan-group scan (GET hit ratio, GET/s; scans run); search = app search --passes $PASSES (MB/s/matches per pass)"
echo "each policy's ratios are to the FIFO run just before it; the fifo row: the range of its runs; per CPU-s: per second of the node's and directory's QEMU CPU time"
declare -A FH FT FC
NAMES=(YCSB-C GET-SCAN search)
UNITS=(lookups/s GETs/s passes/s)
ROWS=()
# lo_hi "V V ...": the smallest and the largest number among them (n/a
# for both when none is one).
lo_hi() { tr ' ' '\n' <<<"$1" | awk '$1 ~ /^-?[0-9.]+$/ { if (n == 0 || $1 + 0 < lo) lo = $1; if (n == 0 || $1 + 0 > hi) hi = $1; n++ } END { if (n) print lo, hi; else print "n/a n/a" }'; }
for w in 0 1 2; do
    echo "${NAMES[w]}"
    printf '  %-8s %9s %12s %8s %10s %8s  %s\n' policy "hit ratio" throughput "vs fifo" "per CPU-s" "vs fifo" "(extra; fifo run beside it: hit, throughput, per CPU-s)"
    rows=()
    row0="{\"bench\":\"policy-apps\",\"workload\":$(jstr "${NAMES[w]}"),\"unit\":$(jstr "${UNITS[w]}")"
    for i in $(seq 1 $((${#POL[@]} - 1))); do
        kf=$((((i - 1) * 3 + w) * 2))
        read -r fh ft fc _ <<<"$(run_fig "$kf" "$w")"
        read -r ph pt pc px <<<"$(run_fig $((kf + 1)) "$w")"
        FH[$w]+="$fh " FT[$w]+="$ft " FC[$w]+="$fc "
        vt=$(ratio "$pt" "$ft") vc=$(ratio "$pc" "$fc")
        rows+=("$(printf '  %-8s %9s %12s %7sx %10s %7sx  (%s; %s, %s, %s)' "${POL[$i]}" "$ph" "$pt" "$vt" "$pc" "$vc" "$px" "$fh" "$ft" "$fc")")
        ROWS+=("$row0,\"policy\":$(jstr "${POL[$i]}"),\"hit_ratio\":$(jnum "$ph"),\"throughput\":$(jnum "$pt"),\"vs_fifo\":$(jnum "$vt"),\"per_cpu_s\":$(jnum "$pc"),\"per_cpu_vs_fifo\":$(jnum "$vc"),\"extra\":$(jstr "$px"),\"fifo_hit_ratio\":$(jnum "$fh"),\"fifo_throughput\":$(jnum "$ft"),\"fifo_per_cpu_s\":$(jnum "$fc")}")
    done
    range() { tr ' ' '\n' <<<"$1" | awk 'NF { if (n == 0 || $1 < lo) lo = $1; if (n == 0 || $1 > hi) hi = $1; n++ } END { printf "%s..%s", lo, hi }'; }
    printf '  %-8s %9s %12s %8s %10s %8s  (%d runs)\n' fifo "$(range "${FH[$w]}")" "$(range "${FT[$w]}")" "1.00x" "$(range "${FC[$w]}")" "1.00x" $((${#POL[@]} - 1))
    printf '%s\n' "${rows[@]}"
    read -r hl hh <<<"$(lo_hi "${FH[$w]}")"
    read -r tl th <<<"$(lo_hi "${FT[$w]}")"
    read -r cl ch <<<"$(lo_hi "${FC[$w]}")"
    ROWS+=("$row0,\"policy\":\"fifo\",\"runs\":$((${#POL[@]} - 1)),\"hit_ratio_min\":$(jnum "$hl"),\"hit_ratio_max\":$(jnum "$hh"),\"throughput_min\":$(jnum "$tl"),\"throughput_max\":$(jnum "$th"),\"per_cpu_s_min\":$(jnum "$cl"),\"per_cpu_s_max\":$(jnum "$ch"),\"vs_fifo\":1,\"per_cpu_vs_fifo\":1}")
done
echo "load average before: $load0, after: $load1; wall time $((t1 - t0)) s"
for r in "${ROWS[@]}"; do echo "ROW $r"; done
echo "RESULT {\"bench\":\"policy-apps\",\"mode\":\"strong\",\"nodes\":1,\"policies\":$(jstr "${POL[*]}"),\"limit\":$LIMIT,\"kv_size\":$(jstr "$KV_SIZE"),\"search_size\":$(jstr "$SEARCH_SIZE"),\"theta\":$(jnum "$THETA"),\"runtime\":$RUNTIME,\"scan_frac\":$(jnum "$SCAN_FRAC"),\"scan_len\":$(jnum "$SCAN_LEN"),\"passes\":$PASSES,\"wall_s\":$((t1 - t0))}"
