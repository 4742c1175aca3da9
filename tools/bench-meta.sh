#!/usr/bin/env bash
# tools/bench-meta.sh: tasks whose metadata calls yield, as ratios measured in one run on one node.
#
#   tools/bench-meta.sh [--base-kernel ELF] [--runtime S] [--repeat K] [--storage P]
#                       [--mode strong|relaxed|private|net] [--no-build]
#
# On one 1 directory + 1 node cluster per kernel (strong mode unless
# --mode, datasets varmail:4m,fileserver:8m): `app varmail` and `app
# fileserver` with --threads 1 and 16, then fio 4k psync random reads
# (each job its own 1 MiB file, read once from a dropped cache: misses)
# with --numjobs=1 and 8, then fio 4k psync random writes with an fsync
# after each (--fsync=1, each job its own 256 KiB file: the tasks'
# write-backs and flushes) with --numjobs=1 and 8. With
# --base-kernel ELF (a kernel built from an earlier commit, e.g. main,
# whose metadata calls block the vCPU) the same runs go on that kernel
# too, alternating; printed: each figure, the 16-vs-1 (8-vs-1) ratios
# per kernel and after/before. K rounds (default 1); medians.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=
RUNTIME=4
REPEAT=1
STORAGE=none
MODE=strong
BUILD=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --base-kernel) BASE=${2:?--base-kernel needs a path}; shift 2 ;;
        --runtime) RUNTIME=${2:?--runtime needs seconds}; shift 2 ;;
        --repeat) REPEAT=${2:?--repeat needs a value}; shift 2 ;;
        --storage) STORAGE=${2:?--storage needs a profile}; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --mode) MODE=${2:?--mode needs a value}; shift 2 ;;
        -h | --help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-meta.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || { echo "bench-meta.sh: error: --repeat takes a positive integer" >&2; exit 2; }
[[ $RUNTIME =~ ^[1-9][0-9]*$ ]] || { echo "bench-meta.sh: error: --runtime takes whole seconds" >&2; exit 2; }
[[ $MODE =~ ^(strong|relaxed|private|net)$ ]] || { echo "bench-meta.sh: error: --mode takes strong, relaxed, private or net" >&2; exit 2; }
[[ -z $BASE || -f $BASE ]] || { echo "bench-meta.sh: error: no such kernel: $BASE" >&2; exit 2; }
cd "$ROOT"
if [[ $BUILD == 1 ]]; then
    cargo build --release -q -p onecopy-kernel --target x86_64-unknown-none
    cargo build --release -q -p flatfs --bins -p onecopy-ivshmem-server
    cargo build --release -q -p onecopy-tests --bins
fi
KERNEL="$ROOT/target/x86_64-unknown-none/release/onecopy-kernel"
RUN=$(mktemp -d /tmp/onecopy-bench-meta.XXXXXX)
trap 'rm -rf "$RUN"' EXIT

# Each job reads its own 1 MiB file once, from a dropped cache: misses.
FIO="--name=ps --rw=randread --bs=4k --size=1m --ioengine=psync --invalidate=1"
# Each job writes its own 256 KiB file, an fsync after every write.
FSYNC="--name=fw --rw=randwrite --bs=4k --size=256k --ioengine=psync --fsync=1"
# run LABEL KERNEL: one cluster, every workload; prints "LABEL-NAME value" lines.
run() {
    local label=$1 kernel=$2 out
    out=$(./qemu-run.sh --no-build --nodes 1 --kernel "$kernel" --run-dir "$RUN" \
        --mode "$MODE" --storage "$STORAGE" --dataset varmail:4m,fileserver:8m --cmd-timeout 900 \
        -e "1: fio $FIO --numjobs=1" \
        -e "1: app varmail --runtime $RUNTIME --threads 1" \
        -e "1: app varmail --runtime $RUNTIME --threads 16" \
        -e "1: app fileserver --runtime $RUNTIME --threads 1" \
        -e "1: app fileserver --runtime $RUNTIME --threads 16" \
        -e "1: fio $FIO --numjobs=1" \
        -e "1: fio $FIO --numjobs=8" \
        -e "1: fio $FSYNC --numjobs=1" \
        -e "1: fio $FSYNC --numjobs=8") ||
        { echo "bench-meta.sh: error: $label failed:" >&2; echo "$out" >&2; exit 1; }
    local results
    results=$(echo "$out" | grep '^\[n1\].*RESULT ' | sed 's/.*RESULT //')
    [[ $(echo "$results" | wc -l) == 9 ]] ||
        { echo "bench-meta.sh: error: $label: expected 9 RESULT lines" >&2; echo "$out" >&2; exit 1; }
    local names=(warmup varmail-t1 varmail-t16 fileserver-t1 fileserver-t16 fio-nj1 fio-nj8 fsync-nj1 fsync-nj8) i=0
    while IFS= read -r line; do
        local v
        if [[ $line == *'"app":'* ]]; then
            v=$(echo "$line" | grep -o '"throughput":[0-9.]*' | cut -d: -f2)
        elif [[ ${names[$i]} == fsync-* ]]; then
            v=$(echo "$line" | grep -o '"write":{"iops":[0-9.]*' | grep -o '[0-9.]*$')
        else
            v=$(echo "$line" | grep -o '"read":{"iops":[0-9.]*' | grep -o '[0-9.]*$')
        fi
        [[ ${names[$i]} == warmup ]] || echo "$label-${names[$i]} $v"
        i=$((i + 1))
    done <<<"$results"
}

results=()
for ((r = 0; r < REPEAT; r++)); do
    [[ -n $BASE ]] && mapfile -t -O "${#results[@]}" results < <(run before "$BASE")
    mapfile -t -O "${#results[@]}" results < <(run after "$KERNEL")
done
printf '%s\n' "${results[@]}"
med() { printf '%s\n' "${results[@]}" | awk -v l="$1" '$1 == l { print $2 }' | sort -n |
    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
echo "medians over $REPEAT round(s); ratios within one kernel, then after/before:"
for k in after ${BASE:+before}; do
    for w in varmail fileserver; do
        echo "$k $w: t1 $(med "$k-$w-t1") ops/s, t16 $(med "$k-$w-t16") ops/s, t16/t1 $(ratio "$(med "$k-$w-t16")" "$(med "$k-$w-t1")")"
    done
    echo "$k fio psync: nj1 $(med "$k-fio-nj1") IOPS, nj8 $(med "$k-fio-nj8") IOPS, nj8/nj1 $(ratio "$(med "$k-fio-nj8")" "$(med "$k-fio-nj1")")"
    echo "$k fio psync write+fsync: nj1 $(med "$k-fsync-nj1") IOPS, nj8 $(med "$k-fsync-nj8") IOPS, nj8/nj1 $(ratio "$(med "$k-fsync-nj8")" "$(med "$k-fsync-nj1")")"
done
if [[ -n $BASE ]]; then
    for x in varmail-t1 varmail-t16 fileserver-t1 fileserver-t16 fio-nj1 fio-nj8 fsync-nj1 fsync-nj8; do
        echo "after/before $x: $(ratio "$(med "after-$x")" "$(med "before-$x")")"
    done
fi
