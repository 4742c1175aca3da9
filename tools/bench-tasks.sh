#!/usr/bin/env bash
# tools/bench-tasks.sh: tasks on a node, as ratios
# measured in one run.
#
#   tools/bench-tasks.sh [--base-kernel ELF] [--size SIZE] [--repeat K] [--no-build]
#
# 1. psync --numjobs=8 4k random reads, CM-R (node 2 reads files node 1
#    laid out and owns; node 2's cache dropped first): read IOPS and the
#    in-flight depth fio measured (effective_iodepth / max_iodepth). With
#    --base-kernel ELF (a kernel built from an earlier commit, e.g. main)
#    the same job also runs on that kernel, alternating, and the ratio
#    after / before is printed.
# 2. private mode, CM (node 2's private cache dropped): 4k random reads,
#    psync --numjobs=8 and libaio --iodepth=32, with several ring requests
#    in flight (default ring_reads=32) vs one at a time (ring_reads=1).
# Each configuration boots its own 1 directory + 2 node cluster; K rounds
# (default 2) alternate the configurations; medians are reported.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091 # tools/lib/bench.sh, checked on its own
. "$ROOT/tools/lib/bench.sh"
BASE=
SIZE=1m
REPEAT=2
BUILD=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --base-kernel) BASE=${2:?--base-kernel needs a path}; shift 2 ;;
        --size) SIZE=${2:?--size needs a value}; shift 2 ;;
        --repeat) REPEAT=${2:?--repeat needs a value}; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h | --help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-tasks.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || { echo "bench-tasks.sh: error: --repeat takes a positive integer" >&2; exit 2; }
[[ $SIZE =~ ^[0-9]+[kmg]?$ ]] || { echo "bench-tasks.sh: error: --size takes a size like 1m" >&2; exit 2; }
[[ -z $BASE || -f $BASE ]] || { echo "bench-tasks.sh: error: no such kernel: $BASE" >&2; exit 2; }
cd "$ROOT"
if [[ $BUILD == 1 ]]; then
    cargo build --release -q -p onecopy-kernel --target x86_64-unknown-none
    cargo build --release -q -p flatfs --bins -p onecopy-ivshmem-server
    cargo build --release -q -p onecopy-tests --bins
fi
KERNEL="$ROOT/target/x86_64-unknown-none/release/onecopy-kernel"
RUN=$(mktemp -d /tmp/onecopy-bench-tasks.XXXXXX)
trap 'rm -rf "$RUN"' EXIT

# run LABEL KERNEL MODE EXTRA JOB: boot, lay out on node 1, run JOB on
# node 2; prints "LABEL iops eff max".
run() {
    local label=$1 kernel=$2 mode=$3 extra=$4 job=$5 out line
    out=$(./qemu-run.sh --no-build --nodes 2 --mode "$mode" --kernel "$kernel" \
        --run-dir "$RUN" --cmd-timeout 600 ${extra:+--append-extra "$extra"} \
        -e "1: fio $job --invalidate=0" -e "2: fio $job" -e "2: cache stats") ||
        { echo "bench-tasks.sh: error: $label failed:" >&2; echo "$out" >&2; exit 1; }
    line=$(echo "$out" | grep '^\[n2\].*RESULT ' | sed 's/.*RESULT //' | tail -1)
    [[ -n $line ]] || { echo "bench-tasks.sh: error: $label: no RESULT on node 2" >&2; echo "$out" >&2; exit 1; }
    local iops eff max ring
    iops=$(echo "$line" | grep -o '"read":{"iops":[0-9.]*' | grep -o '[0-9.]*$')
    eff=$(echo "$line" | grep -o '"effective_iodepth":[0-9]*' | cut -d: -f2)
    max=$(echo "$line" | grep -o '"max_iodepth":[0-9]*' | cut -d: -f2)
    ring=$(echo "$out" | grep '^\[n2\].*ring reads in flight (max)' | awk '{print $NF}' | tail -1)
    echo "$label $iops ${eff:-1} ${max:-1} ${ring:--}"
}

CMR="--name=cmr --rw=randread --bs=4k --size=$SIZE --numjobs=8 --ioengine=psync"
PPS="--name=pps --rw=randread --bs=4k --size=$SIZE --numjobs=8 --ioengine=psync"
PAIO="--name=pai --rw=randread --bs=4k --size=$SIZE --numjobs=1 --iodepth=32 --ioengine=libaio"
results=()
for ((r = 0; r < REPEAT; r++)); do
    [[ -n $BASE ]] && results+=("$(run cmr-before "$BASE" strong "" "$CMR")")
    results+=("$(run cmr-after "$KERNEL" strong "" "$CMR")")
    results+=("$(run private-psync-rings32 "$KERNEL" private "" "$PPS")")
    results+=("$(run private-psync-rings1 "$KERNEL" private "ring_reads=1" "$PPS")")
    results+=("$(run private-libaio-rings32 "$KERNEL" private "" "$PAIO")")
    results+=("$(run private-libaio-rings1 "$KERNEL" private "ring_reads=1" "$PAIO")")
done
echo "label read-iops effective_iodepth max_iodepth ring-reads-in-flight(max)"
printf '%s\n' "${results[@]}"
med() { printf '%s\n' "${results[@]}" | awk -v l="$1" '$1 == l { print $2 }' | sort -n |
    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
echo "medians of $REPEAT round(s):"
if [[ -n $BASE ]]; then
    echo "  CM-R psync numjobs=8: after $(med cmr-after) IOPS, before $(med cmr-before) IOPS: $(ratio "$(med cmr-after)" "$(med cmr-before)")x"
fi
echo "  private CM psync numjobs=8: ring_reads=32 $(med private-psync-rings32) IOPS, ring_reads=1 $(med private-psync-rings1) IOPS: $(ratio "$(med private-psync-rings32)" "$(med private-psync-rings1)")x"
echo "  private CM libaio iodepth=32: ring_reads=32 $(med private-libaio-rings32) IOPS, ring_reads=1 $(med private-libaio-rings1) IOPS: $(ratio "$(med private-libaio-rings32)" "$(med private-libaio-rings1)")x"
