#!/usr/bin/env bash
# tools/bench-psync.sh: overlapping misses from tasks (4k random psync reads, cache miss, `--storage sata-ssd`, IOPS
# with --numjobs=8 against --numjobs=1 on one node, goal >= 4x), as a
# ratio in one run on one cluster.
#
#   tools/bench-psync.sh [--storage P] [--size SIZE] [--rounds R]
#                        [--mode strong|relaxed|private|net] [--no-build]
#                        [--append-extra OPTS] [--kernel ELF]
#
# Boots 1 directory + 1 node (default strong, storage sata-ssd) and runs,
# R times (default 3), `fio --rw=randread --bs=4k --size=SIZE (4m)
# --ioengine=psync --invalidate=1` with --numjobs=1, then with
# --numjobs=8 (each job its own SIZE file; --invalidate=1 drops the
# node's cache first, so every read is a miss the directory fills from
# the disk). Every job is a task: its I/O waits without blocking the
# others, so 8 jobs have up to 8 misses in flight (`effective_iodepth`).
# Prints each run's IOPS and depth, the medians and their ratio, and one
# RESULT json line. One node busy (plus the directory). --append-extra
# passes kernel boot options on (qemu-run.sh's), e.g. fill_depth=0: the
# directory's disk reads synchronous (the serving loop waits for each).
# --kernel boots another kernel ELF (qemu-run.sh's --kernel; implies
# --no-build), e.g. an older commit's build for a before/after run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091 # tools/lib/bench.sh, checked on its own
. "$ROOT/tools/lib/bench.sh"
STORAGE=sata-ssd
SIZE=4m
ROUNDS=3
MODE=strong
BUILD=()
EXTRA=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --storage) STORAGE=${2:?--storage needs a value}; shift 2 ;;
        --size) SIZE=${2:?--size needs a value}; shift 2 ;;
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --mode) MODE=${2:?--mode needs a value}; shift 2 ;;
        --no-build) BUILD=(--no-build); shift ;;
        --append-extra) EXTRA=(--append-extra "${2:?--append-extra needs a value}"); shift 2 ;;
        --kernel) BUILD=(--no-build --kernel "${2:?--kernel needs a value}"); shift 2 ;;
        -h | --help) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-psync.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
require_int bench-psync.sh --rounds "$ROUNDS" 1 50
[[ $MODE =~ ^(strong|relaxed|private|net)$ ]] ||
    { echo "bench-psync.sh: error: --mode takes strong, relaxed, private or net, got '$MODE'" >&2; exit 2; }
[[ $SIZE =~ ^[1-9][0-9]*[km]$ ]] ||
    { echo "bench-psync.sh: error: --size takes a size like 4m or 512k, got '$SIZE'" >&2; exit 2; }
cd "$ROOT"
RUN=$(mktemp -d /tmp/onecopy-bench-psync.XXXXXX)
trap 'rm -rf "$RUN"' EXIT
FIO="fio --name=ps --rw=randread --bs=4k --size=$SIZE --ioengine=psync --invalidate=1"
# The first run lays the 8 files out (and is not counted).
args=(-e "1: $FIO --numjobs=8")
for ((r = 1; r <= ROUNDS; r++)); do
    args+=(-e "1: $FIO --numjobs=1" -e "1: $FIO --numjobs=8")
done
out=$(./qemu-run.sh "${BUILD[@]}" --nodes 1 --mode "$MODE" --storage "$STORAGE" --run-dir "$RUN" \
    --cmd-timeout 900 "${EXTRA[@]}" "${args[@]}") ||
    { echo "bench-psync.sh: error: the cluster failed (output below)" >&2; echo "$out" >&2; exit 1; }
echo "$out" | grep -E "accel:|storage:|cluster up"
mapfile -t res < <(echo "$out" | grep -E '^\[n1\] RESULT ' | tail -n $((ROUNDS * 2)))
if [[ ${#res[@]} -ne $((ROUNDS * 2)) ]]; then
    echo "bench-psync.sh: error: expected $((ROUNDS * 2)) fio results, got ${#res[@]} (output below)" >&2
    echo "$out" >&2
    exit 1
fi
field() { grep -o "\"$2\":{\"iops\":[0-9.]*\|\"$2\":[0-9.]*" <<<"$1" | head -1 | sed 's/.*://'; }
echo "4k random psync reads, every read a miss (--invalidate=1), $SIZE per job, mode $MODE, storage $STORAGE${EXTRA[1]:+, boot options ${EXTRA[1]}}"
printf '  %-6s %22s %22s %8s\n' round "numjobs=1 IOPS (depth)" "numjobs=8 IOPS (depth)" "8 / 1"
one=() eight=()
for ((r = 0; r < ROUNDS; r++)); do
    a=${res[r * 2]} b=${res[r * 2 + 1]}
    ia=$(field "$a" read) ib=$(field "$b" read)
    one+=("$ia") eight+=("$ib")
    printf '  %-6s %22s %22s %7sx\n' $((r + 1)) "$ia ($(field "$a" effective_iodepth))" \
        "$ib ($(field "$b" effective_iodepth))" "$(ratio "$ib" "$ia")"
done
m1=$(median "${one[@]}") m8=$(median "${eight[@]}")
echo "  medians: numjobs=1 $m1 IOPS, numjobs=8 $m8 IOPS: $(ratio "$m8" "$m1")x (goal: >= 4x)"
echo "one node busy (plus the directory)"
echo "RESULT {\"bench\":\"psync\",\"mode\":$(jstr "$MODE"),\"storage\":$(jstr "$STORAGE"),\"size\":$(jstr "$SIZE"),\"rounds\":$ROUNDS,\"extra\":$(jstr "${EXTRA[1]:-}"),\"nj1_iops\":$(jnum "$m1"),\"nj8_iops\":$(jnum "$m8"),\"ratio\":$(jnum "$(ratio "$m8" "$m1")")}"
