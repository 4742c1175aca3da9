#!/usr/bin/env bash
# tools/bench-meta-lookups.sh: does a node's metadata churn hold up other
# nodes' page lookups in the directory? (A directory that
# never blocks on storage should not.) Ratios measured in one run.
#
#   tools/bench-meta-lookups.sh [--base-kernel ELF] [--rounds K] [--storage P]
#                               [--runtime S] [--no-build]
#
# Per kernel and round, one 1 directory + 2 node cluster (strong mode,
# dataset varmail:4m, `--storage sata-ssd` by default): node 1 writes
# /hot (64 pages it owns); node 2 runs `bench read /hot` (64 one-page CM-R
# lookups) three times on the quiet cluster, then again and again while
# node 1 runs `app varmail --threads 16` (creates, deletes, appends and
# fsyncs: namespace changes and writes the directory puts on the disk).
# Printed per kernel: the medians over rounds of the lookups' median and
# mean, quiet and under churn, their ratio, and varmail's throughput;
# with --base-kernel ELF (a kernel built from an earlier commit) the same
# on that kernel, alternating, and after/before. Two nodes share one host
# CPU (`--pin auto` on 2 cores): node 2's lookups also wait for node 1's
# time slices, so the ratio under churn is not the directory's alone.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=
ROUNDS=3
STORAGE=sata-ssd
RUNTIME=8
BUILD=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --base-kernel) BASE=${2:?--base-kernel needs a path}; shift 2 ;;
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --storage) STORAGE=${2:?--storage needs a profile}; shift 2 ;;
        --runtime) RUNTIME=${2:?--runtime needs seconds}; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h | --help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-meta-lookups.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "bench-meta-lookups.sh: error: --rounds takes a positive integer" >&2; exit 2; }
[[ $RUNTIME =~ ^[1-9][0-9]*$ ]] || { echo "bench-meta-lookups.sh: error: --runtime takes whole seconds" >&2; exit 2; }
[[ -z $BASE || -f $BASE ]] || { echo "bench-meta-lookups.sh: error: no such kernel: $BASE" >&2; exit 2; }
cd "$ROOT"
if [[ $BUILD == 1 ]]; then
    cargo build --release -q -p onecopy-kernel --target x86_64-unknown-none
    cargo build --release -q -p flatfs --bins -p onecopy-ivshmem-server
fi
KERNEL="$ROOT/target/x86_64-unknown-none/release/onecopy-kernel"
WORK=$(mktemp -d /tmp/onecopy-bench-meta-lookups.XXXXXX)
RUN=
cleanup() {
    if [[ -n $RUN ]]; then
        ./qemu-run.sh stop --run-dir "$RUN" >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

ex() { ./qemu-run.sh exec --run-dir "$RUN" --cmd-timeout 300 "$@"; }
# One `bench read /hot` on node 2, then forget the mappings: "median mean" (us).
lookup() {
    local out
    out=$(ex -e '2: bench read /hot' -e '2: cache drop')
    echo "$out" | grep -o 'median=[0-9]* ns.*mean=[0-9]* ns' |
        sed -E 's/median=([0-9]+) ns.*mean=([0-9]+) ns/\1 \2/' |
        awk '{ printf "%.1f %.1f\n", $1 / 1000, $2 / 1000 }'
}

# run LABEL KERNEL: prints "LABEL quiet MEDIAN MEAN", "LABEL churn MEDIAN
# MEAN" per lookup run and "LABEL varmail OPS".
run() {
    local label=$1 kernel=$2
    RUN="$WORK/$label"
    rm -rf "$RUN"
    ./qemu-run.sh --no-build --detach --nodes 2 --kernel "$kernel" --run-dir "$RUN" \
        --storage "$STORAGE" --dataset varmail:4m --cmd-timeout 300 >/dev/null ||
        { echo "bench-meta-lookups.sh: error: $label: the cluster did not boot" >&2; exit 1; }
    ex -e '1: fill /hot 256k' >/dev/null
    for _ in 1 2 3; do
        echo "$label quiet $(lookup)"
    done
    ex -e "1: app varmail --runtime $RUNTIME --threads 16" >"$WORK/churn.out" 2>&1 &
    local bg=$! n=0
    sleep 1
    while kill -0 "$bg" 2>/dev/null && [[ $n -lt 30 ]]; do
        local l
        l=$(lookup)
        # Only lookups that ended while the churn still ran.
        kill -0 "$bg" 2>/dev/null && echo "$label churn $l"
        n=$((n + 1))
    done
    wait "$bg" || { echo "bench-meta-lookups.sh: error: $label: varmail failed:" >&2; cat "$WORK/churn.out" >&2; exit 1; }
    local ops
    ops=$(grep -o '"throughput":[0-9.]*' "$WORK/churn.out" | cut -d: -f2)
    [[ -n $ops ]] || { echo "bench-meta-lookups.sh: error: $label: varmail printed no RESULT" >&2; cat "$WORK/churn.out" >&2; exit 1; }
    echo "$label varmail $ops"
    ./qemu-run.sh stop --run-dir "$RUN" >/dev/null
    RUN=
}

results=()
for ((r = 0; r < ROUNDS; r++)); do
    [[ -n $BASE ]] && mapfile -t -O "${#results[@]}" results < <(run before "$BASE")
    mapfile -t -O "${#results[@]}" results < <(run after "$KERNEL")
done
printf '%s\n' "${results[@]}"
# med LABEL WHAT COLUMN: median of that column over the matching lines.
med() { printf '%s\n' "${results[@]}" | awk -v l="$1" -v w="$2" -v c="$3" '$1 == l && $2 == w { print $c }' |
    sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
cnt() { printf '%s\n' "${results[@]}" | awk -v l="$1" -v w="$2" '$1 == l && $2 == w' | wc -l; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a != "-") printf "%.2fx", a / b; else print "-" }'; }
echo "storage $STORAGE, $ROUNDS round(s); lookups (us): medians over runs of each run's median and mean"
for k in after ${BASE:+before}; do
    echo "$k: quiet median $(med "$k" quiet 3) mean $(med "$k" quiet 4); under varmail ($(cnt "$k" churn) runs) median $(med "$k" churn 3) mean $(med "$k" churn 4); churn/quiet median $(ratio "$(med "$k" churn 3)" "$(med "$k" quiet 3)") mean $(ratio "$(med "$k" churn 4)" "$(med "$k" quiet 4)"); varmail $(med "$k" varmail 3) ops/s"
done
if [[ -n $BASE ]]; then
    echo "before/after lookup under varmail: median $(ratio "$(med before churn 3)" "$(med after churn 3)"), mean $(ratio "$(med before churn 4)" "$(med after churn 4)"); varmail after/before $(ratio "$(med after varmail 3)" "$(med before varmail 3)")"
fi
