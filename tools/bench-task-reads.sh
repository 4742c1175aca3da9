#!/usr/bin/env bash
# tools/bench-task-reads.sh: does a task's read wait for the slowest miss
# of its flush? (A task waiting for a page should yield to the others.)
# Compares the kernel's two ways for tasks' read misses, booted
# alternately in one run: `task_reads=each` (the default: every page READ,
# or file-server read in `private` and `net`, is a call in flight of its
# own, and a task's I/O runs as soon as its own pages are in) and
# `task_reads=batch` (a flush's misses go out as one batch and every task
# of the flush waits for the last answer).
#
#   tools/bench-task-reads.sh [--rounds R] [--storage P] [--mode strong|relaxed|private|net]
#                             [--engine psync|mmap] [--no-build] [--kernel ELF]
#
# Each round boots 1 directory + 2 nodes twice (each, then batch; default
# 3 rounds, storage sata-ssd, mode strong). Node 1 lays out 8 files
# `/d.J.0` (1 MiB each) and 8 files `/t.J.0` (4 MiB each, so a CM-R run
# lasts long enough to measure: 4,096 reads), syncs,
# drops its cache, and reads `/t.0.0` to `/t.3.0` back, so it owns their
# pages; the other files are on the disk only. Node 2 then runs three
# 4k random psync read workloads, every read a miss (`--invalidate=1`):
#   mixed  `--name=t --numjobs=8`: jobs 0-3 map node 1's pages (CM-R),
#          jobs 4-7 wait for the disk (CM);
#   cm-r   `--name=t --numjobs=4`: only node 1's pages;
#   cm     `--name=d --numjobs=8`: only the disk;
# and a fourth with hits: node 1 also lays out `/h.J.0` (on the disk
# only), node 2 reads `/h.0.0` to `/h.3.0` (its own pages, or its cache
# in `private`), then
#   hit-cm `--name=h --numjobs=8 --invalidate=0`: jobs 0-3 hit, jobs 4-7
#          wait for the disk.
# In `private` and `net` mode node 1's copies do not serve node 2: the first three
# are all file-server reads of the disk (what is measured is then the
# cost or gain of completing each I/O on its own). `--engine mmap` runs
# node 2's jobs as loads through the mapping (fio's mmap engine; strong
# and relaxed only: `private` has no windows). Prints IOPS and mean
# latency per boot, their medians per way, and the ratios each / batch;
# one RESULT json line. Two instances busy (node 2 and the directory;
# node 1 is idle while node 2 measures).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091 # tools/lib/bench.sh, checked on its own
. "$ROOT/tools/lib/bench.sh"
STORAGE=sata-ssd
ROUNDS=3
MODE=strong
ENGINE=psync
BUILD=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --storage) STORAGE=${2:?--storage needs a value}; shift 2 ;;
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --mode) MODE=${2:?--mode needs a value}; shift 2 ;;
        --engine) ENGINE=${2:?--engine needs a value}; shift 2 ;;
        --no-build) BUILD=(--no-build); shift ;;
        --kernel) BUILD=(--no-build --kernel "${2:?--kernel needs a value}"); shift 2 ;;
        -h | --help) sed -n '2,37p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-task-reads.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
require_int bench-task-reads.sh --rounds "$ROUNDS" 1 50
[[ $MODE =~ ^(strong|relaxed|private|net)$ ]] ||
    { echo "bench-task-reads.sh: error: --mode takes strong, relaxed, private or net, got '$MODE'" >&2; exit 2; }
[[ $ENGINE =~ ^(psync|mmap)$ ]] ||
    { echo "bench-task-reads.sh: error: --engine takes psync or mmap, got '$ENGINE'" >&2; exit 2; }
[[ $ENGINE == psync || $MODE =~ ^(strong|relaxed)$ ]] ||
    { echo "bench-task-reads.sh: error: --engine mmap needs --mode strong or relaxed ($MODE has no mappings of the shared pages)" >&2; exit 2; }
cd "$ROOT"
RUN=$(mktemp -d /tmp/onecopy-bench-task-reads.XXXXXX)
trap 'rm -rf "$RUN"' EXIT
JOB="fio --rw=randread --bs=4k --size=1m --ioengine=psync"
JOB2="fio --rw=randread --bs=4k --size=1m --ioengine=$ENGINE" # node 2's runs
WORKLOADS=(mixed cm-r cm hit-cm)
field() { grep -o "\"$2\":{\"iops\":[0-9.]*\|\"$2\":[0-9.]*" <<<"$1" | head -1 | sed 's/.*://'; }
mean_lat() { grep -o '"read":{[^}]*"lat_ns":{[^}]*' <<<"$1" | grep -o '"mean":[0-9]*' | sed 's/.*://'; }
declare -A IOPS LAT
boot() { # way round
    local way=$1 r=$2 out res i
    out=$(./qemu-run.sh "${BUILD[@]}" --nodes 2 --mode "$MODE" --storage "$STORAGE" \
        --run-dir "$RUN/$way-$r" --cmd-timeout 900 --append-extra "task_reads=$way" \
        -e "1: $JOB --name=d --numjobs=8 --invalidate=0" \
        -e "1: ${JOB/=1m/=4m} --name=t --numjobs=8 --invalidate=0" \
        -e "1: $JOB --name=h --numjobs=8 --invalidate=0" -e "1: sync" -e "1: cache drop" \
        -e "1: sum /t.0.0" -e "1: sum /t.1.0" -e "1: sum /t.2.0" -e "1: sum /t.3.0" \
        -e "2: ${JOB2/=1m/=4m} --name=t --numjobs=8 --invalidate=1" \
        -e "2: ${JOB2/=1m/=4m} --name=t --numjobs=4 --invalidate=1" \
        -e "2: $JOB2 --name=d --numjobs=8 --invalidate=1" \
        -e "2: cache drop" -e "2: sum /h.0.0" -e "2: sum /h.1.0" -e "2: sum /h.2.0" -e "2: sum /h.3.0" \
        -e "2: $JOB2 --name=h --numjobs=8 --invalidate=0") ||
        { echo "bench-task-reads.sh: error: the cluster failed (output below)" >&2; echo "$out" >&2; exit 1; }
    [[ ${#BUILD[@]} -gt 0 ]] || BUILD=(--no-build) # built by the first boot
    mapfile -t res < <(echo "$out" | grep -E '^\[n2\] RESULT ')
    if [[ ${#res[@]} -ne 4 ]]; then
        echo "bench-task-reads.sh: error: expected 4 fio results from node 2, got ${#res[@]} (output below)" >&2
        echo "$out" >&2
        exit 1
    fi
    for i in 0 1 2 3; do
        IOPS[$way,${WORKLOADS[i]},$r]=$(field "${res[i]}" read)
        LAT[$way,${WORKLOADS[i]},$r]=$(mean_lat "${res[i]}")
    done
}
echo "tasks' read misses, each vs batch: mode $MODE, engine $ENGINE, storage $STORAGE, $ROUNDS rounds (two instances busy: node 2 and the directory)"
for ((r = 1; r <= ROUNDS; r++)); do
    for way in each batch; do
        boot "$way" "$r"
        printf '  round %d %-5s' "$r" "$way"
        for w in "${WORKLOADS[@]}"; do
            printf '  %s %s IOPS %s us' "$w" "${IOPS[$way,$w,$r]}" "$((${LAT[$way,$w,$r]} / 1000))"
        done
        echo
    done
done
json="{\"bench\":\"task-reads\",\"mode\":$(jstr "$MODE"),\"engine\":$(jstr "$ENGINE"),\"storage\":$(jstr "$STORAGE"),\"rounds\":$ROUNDS"
printf '  %-6s %14s %14s %8s %16s %16s %8s\n' workload "each IOPS" "batch IOPS" ratio "each lat (us)" "batch lat (us)" ratio
for w in "${WORKLOADS[@]}"; do
    ie=() ib=() le=() lb=()
    for ((r = 1; r <= ROUNDS; r++)); do
        ie+=("${IOPS[each,$w,$r]}") ib+=("${IOPS[batch,$w,$r]}")
        le+=("${LAT[each,$w,$r]}") lb+=("${LAT[batch,$w,$r]}")
    done
    mie=$(median "${ie[@]}") mib=$(median "${ib[@]}") mle=$(median "${le[@]}") mlb=$(median "${lb[@]}")
    printf '  %-6s %14s %14s %7sx %16s %16s %7sx\n' "$w" "$mie" "$mib" "$(ratio "$mie" "$mib")" \
        "$((${mle%.*} / 1000))" "$((${mlb%.*} / 1000))" "$(ratio "$mle" "$mlb")"
    json+=",\"${w//-/_}\":{\"each_iops\":$(jnum "$mie"),\"batch_iops\":$(jnum "$mib"),\"each_lat_ns\":$(jnum "$mle"),\"batch_lat_ns\":$(jnum "$mlb")}"
done
echo "  (medians over the rounds; IOPS ratio each / batch above 1 and latency ratio below 1 favour each)"
echo "RESULT $json}"
