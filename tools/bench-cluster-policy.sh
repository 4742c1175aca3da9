#!/usr/bin/env bash
# tools/bench-cluster-policy.sh: cluster-aware eviction on a multi-node run,
# as ratios in one run.
#
#   tools/bench-cluster-policy.sh [--nodes N] [--size SIZE] [--limit PAGES]
#                                 [--policies "lru cluster"] [--runtime S]
#                                 [--rounds R] [--mode strong|relaxed] [--no-build]
#
# Boots 1 directory + N nodes (default 4) once, with a webserver dataset of
# SIZE (default 24m) and every node's owned pages capped at PAGES (default
# 1024, 4 MiB: the N caches together hold less than the dataset, so nodes
# evict). Then R times (default 3), per policy in turn (default `lru`, then
# `cluster`: a page mapped by more nodes is evicted last): `cache drop` on
# every node, `cache policy NAME` and `cache config limit=PAGES` on every
# node (its webserver log truncated), and `app webserver --runtime S`
# (default 10) on all N nodes at once.
# Prints per run the cluster's ops/s (sum over nodes), its misses (page
# requests to the directory), misses per op and the invalidations its
# nodes received (a mapping taken away by another node's eviction), then per policy the
# medians of ops/s and misses per op and the ratio to the first policy.
# Every node busy (plus the directory). After the tables: one `ROW {json}`
# line per table row (rounds, then the medians) and a `RESULT {json}` line
# with every run's figures, for tools/bench-report.sh --policies.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091 # tools/lib/bench.sh, checked on its own
. "$ROOT/tools/lib/bench.sh"
NODES=4
SIZE=24m
LIMIT=1024
POLICIES="lru cluster"
RUNTIME=10
ROUNDS=3
MODE=strong
BUILD=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --nodes) NODES=${2:?--nodes needs a value}; shift 2 ;;
        --size) SIZE=${2:?--size needs a value}; shift 2 ;;
        --limit) LIMIT=${2:?--limit needs a value}; shift 2 ;;
        --policies) POLICIES=${2:?--policies needs a value}; shift 2 ;;
        --runtime) RUNTIME=${2:?--runtime needs a value}; shift 2 ;;
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --mode) MODE=${2:?--mode needs a value}; shift 2 ;;
        --no-build) BUILD=(--no-build); shift ;;
        -h | --help) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-cluster-policy.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
require_int bench-cluster-policy.sh --nodes "$NODES" 2 8
require_int bench-cluster-policy.sh --limit "$LIMIT" 64 1048576
require_int bench-cluster-policy.sh --runtime "$RUNTIME" 1 600
require_int bench-cluster-policy.sh --rounds "$ROUNDS" 1 50
[[ $MODE == strong || $MODE == relaxed ]] ||
    { echo "bench-cluster-policy.sh: error: --mode takes strong or relaxed, got '$MODE'" >&2; exit 2; }
[[ $SIZE =~ ^[1-9][0-9]*[km]$ ]] ||
    { echo "bench-cluster-policy.sh: error: --size takes a size such as 24m, got '$SIZE'" >&2; exit 2; }
read -r -a pols <<<"$POLICIES"
[[ ${#pols[@]} -ge 1 ]] || { echo "bench-cluster-policy.sh: error: --policies is empty" >&2; exit 2; }
cd "$ROOT"
RUN=$(mktemp -d /tmp/onecopy-bench-cpol.XXXXXX)
cleanup() { ./qemu-run.sh stop --run-dir "$RUN" >/dev/null 2>&1 || true; rm -rf "$RUN"; }
trap cleanup EXIT
./qemu-run.sh "${BUILD[@]}" --detach --nodes "$NODES" --mode "$MODE" --shm-mb 64 \
    --dataset "webserver:$SIZE" --run-dir "$RUN" --cmd-timeout $((RUNTIME * 4 + 120)) | grep -E "cluster up|accel:" || true
ex() { ./qemu-run.sh exec --run-dir "$RUN" --cmd-timeout $((RUNTIME * 4 + 120)) "$@"; }
# The policies must exist (the node refuses an unknown name).
for p in "${pols[@]}"; do
    ex -e "1: cache policy $p" >/dev/null || { echo "bench-cluster-policy.sh: error: policy '$p' refused" >&2; exit 2; }
done
# Sum over the nodes' `cache stats` of the line starting KEY.
key_sum() { awk -v k="$1" 'index($0, "] " k " ") { s += $NF } END { print s + 0 }'; }
declare -A ops miss mpo invs
ROWS=()
for ((r = 1; r <= ROUNDS; r++)); do
    for p in "${pols[@]}"; do
        setup=()
        for ((k = 1; k <= NODES; k++)); do
            setup+=(-e "$k: cache drop" -e "$k: cache policy $p" -e "$k: cache config limit=$LIMIT")
            # The logs start empty every run (they would fill the disk);
            # there is none before the first run.
            ex -e "$k: truncate /apps/webserver/n$k/log 0" >/dev/null 2>&1 || true
        done
        ex "${setup[@]}" >/dev/null
        stats=$(for ((k = 1; k <= NODES; k++)); do ex -e "$k: cache stats"; done)
        before=$(key_sum misses <<<"$stats") inv0=$(key_sum "invalidations received" <<<"$stats")
        pids=()
        for ((k = 1; k <= NODES; k++)); do
            ex -e "$k: app webserver --runtime $RUNTIME --seed $k" >"$RUN/out.$k" 2>&1 &
            pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid" || true; done
        stats=$(for ((k = 1; k <= NODES; k++)); do ex -e "$k: cache stats"; done)
        after=$(key_sum misses <<<"$stats") inv=$(($(key_sum "invalidations received" <<<"$stats") - inv0))
        total=0
        for ((k = 1; k <= NODES; k++)); do
            t=$(grep -o 'RESULT {.*' "$RUN/out.$k" | grep -o '"throughput":[0-9.]*' | cut -d: -f2 || true)
            if [[ -z $t ]]; then
                echo "bench-cluster-policy.sh: error: node $k gave no RESULT (round $r, policy $p):" >&2
                cat "$RUN/out.$k" >&2
                exit 1
            fi
            total=$(awk -v a="$total" -v b="$t" 'BEGIN { printf "%.1f", a + b }')
        done
        ops[$p]+="$total "
        miss[$p]+="$((after - before)) "
        per=$(awk -v m=$((after - before)) -v o="$total" -v s="$RUNTIME" 'BEGIN { if (o > 0) printf "%.2f", m / (o * s); else print "n/a" }')
        mpo[$p]+="$per "
        invs[$p]+="$inv "
        printf 'round %d %-8s cluster ops/s %10s  misses %8d  misses per op %s  invalidations received %d\n' \
            "$r" "$p" "$total" $((after - before)) "$per" "$inv"
        ROWS+=("{\"bench\":\"cluster-policy\",\"row\":\"round\",\"round\":$r,\"policy\":$(jstr "$p"),\"ops\":$(jnum "$total"),\"misses\":$((after - before)),\"misses_per_op\":$(jnum "$per"),\"invalidations\":$inv}")
    done
done
base=${pols[0]}
bo=$(median "${ops[$base]}") bq=$(median "${mpo[$base]}")
echo "1 directory + $NODES nodes ($MODE), webserver:$SIZE, limit $LIMIT pages per node, ${RUNTIME}s per run, $ROUNDS rounds; all $NODES nodes busy plus the directory"
json="{\"bench\":\"cluster-policy\",\"mode\":\"$MODE\",\"nodes\":$NODES,\"size\":\"$SIZE\",\"limit\":$LIMIT,\"runtime_s\":$RUNTIME,\"rounds\":$ROUNDS"
for p in "${pols[@]}"; do
    o=$(median "${ops[$p]}")
    q=$(median "${mpo[$p]}")
    printf '  %-8s median cluster ops/s %10s (%sx %s)  median misses per op %6s (%sx %s)\n' "$p" "$o" \
        "$(ratio "$o" "$bo")" "$base" "$q" "$(ratio "$q" "$bq")" "$base"
    ROWS+=("{\"bench\":\"cluster-policy\",\"row\":\"median\",\"policy\":$(jstr "$p"),\"first\":$(jstr "$base"),\"rounds\":$ROUNDS,\"ops\":$(jnum "$o"),\"ops_vs_first\":$(jnum "$(ratio "$o" "$bo")"),\"misses_per_op\":$(jnum "$q"),\"misses_per_op_vs_first\":$(jnum "$(ratio "$q" "$bq")"),\"misses\":$(jnum "$(median "${miss[$p]}")"),\"invalidations\":$(jnum "$(median "${invs[$p]}")")}")
    json+=",\"$p\":{\"ops\":[${ops[$p]// /,}],\"misses\":[${miss[$p]// /,}],\"misses_per_op\":[${mpo[$p]// /,}],\"invalidations_received\":[${invs[$p]// /,}]}"
done
json=${json//,]/]}
for row in "${ROWS[@]}"; do echo "ROW $row"; done
echo "RESULT $json}"
