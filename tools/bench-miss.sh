#!/usr/bin/env bash
# tools/bench-miss.sh: one cold 4 KiB miss split into phases, on both paths,
# in one session (why a single-copy miss costs what it costs).
#
#   tools/bench-miss.sh [--misses N] [--repeat K] [--modes "private strong"]
#                       [--path read|batch] [--no-build]
#
# --path batch reads each page as one batch of one I/O, as fio's libaio
# engine sends its I/Os (`bench miss N batch`); read (the default) as one
# read call.
# A mode may carry boot options after a colon, comma-separated, to compare
# settings in one run: --modes "strong:disk_irq=0 strong" times the
# directory polling its disk against waking on the disk's interrupt.
# For each of K rounds (default 3), boots 1 directory + 1 node once per
# mode (default `private`, then `strong`: the single-copy CM path), back to
# back, and runs `bench miss N` (default 256) on node 1: N cold misses of a
# scratch file, each split into node call + copy out, transport, directory
# lookup / disk read / fill / reply (the directory's own clock) and node
# fill/map. Prints every run's RESULT, then per mode the median over the
# rounds of each phase's mean (us), and the ratio of each mode to the first
# one (single copy / private).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MISSES=256
REPEAT=3
MODES="private strong"
MISS_PATH="read"
BUILD=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --misses) MISSES=${2:?--misses needs a value}; shift 2 ;;
        --repeat) REPEAT=${2:?--repeat needs a value}; shift 2 ;;
        --modes) MODES=${2:?--modes needs a value}; shift 2 ;;
        --path) MISS_PATH=${2:?--path needs a value}; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h | --help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-miss.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $MISSES =~ ^[1-9][0-9]*$ && $MISSES -le 1024 ]] ||
    { echo "bench-miss.sh: error: --misses takes an integer in 1..1024" >&2; exit 2; }
[[ $MISS_PATH =~ ^(read|batch)$ ]] || { echo "bench-miss.sh: error: --path takes read or batch, got '$MISS_PATH'" >&2; exit 2; }
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || { echo "bench-miss.sh: error: --repeat takes a positive integer" >&2; exit 2; }
for m in $MODES; do
    [[ $m =~ ^(strong|relaxed|private|net)(:[a-z_]+=[a-z0-9_]+(,[a-z_]+=[a-z0-9_]+)*)?$ ]] ||
        { echo "bench-miss.sh: error: unknown mode '$m' (strong, relaxed, private, net, each optionally :key=value,...)" >&2; exit 2; }
done
cd "$ROOT"
if [[ $BUILD == 1 ]]; then
    cargo build --release -q -p onecopy-kernel --target x86_64-unknown-none
    cargo build --release -q -p flatfs --bins -p onecopy-ivshmem-server
    cargo build --release -q -p onecopy-tests --bins
fi
RUN=$(mktemp -d /tmp/onecopy-bench-miss.XXXXXX)
OUT="$RUN/results"
trap 'rm -rf "$RUN"' EXIT
: >"$OUT"

PHASES="node_call transport dir_lookup dir_disk dir_fill dir_reply node_fill"
for ((r = 1; r <= REPEAT; r++)); do
    for m in $MODES; do
        mode=${m%%:*}
        extra=""
        [[ $m == *:* ]] && extra=${m#*:} && extra=${extra//,/ }
        out=$(./qemu-run.sh --no-build --nodes 1 --mode "$mode" --run-dir "$RUN/c" \
            ${extra:+--append-extra "$extra"} --cmd-timeout 600 -e "1: bench miss $MISSES $MISS_PATH") ||
            { echo "bench-miss.sh: error: $m round $r failed:" >&2; echo "$out" >&2; exit 1; }
        line=$(echo "$out" | grep 'RESULT {"bench":"miss"' | sed 's/.*RESULT //' | tail -1)
        [[ -n $line ]] || { echo "bench-miss.sh: error: $m round $r: no RESULT" >&2; echo "$out" >&2; exit 1; }
        echo "round $r $m: $line"
        vals="$m"
        for p in $PHASES total_mean_ns; do
            v=$(echo "$line" | grep -o "\"$p\":[0-9]*" | head -1 | cut -d: -f2)
            vals="$vals $p=${v:?missing $p in $line}"
        done
        echo "$vals" >>"$OUT"
    done
done

# median MODE KEY: the median over the rounds (ns).
median() {
    grep "^$1 " "$OUT" | grep -o " $2=[0-9]*" | cut -d= -f2 | sort -n |
        awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'
}
us() { awk -v n="$1" 'BEGIN { printf "%.2f", n / 1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }'; }

first=${MODES%% *}
echo
echo "1 directory + 1 node; $MISSES cold 4 KiB misses per run, path $MISS_PATH; medians of $REPEAT rounds (us per miss)"
printf '%-14s' "phase"
for m in $MODES; do printf ' %10s' "$m"; done
for m in $MODES; do [[ $m == "$first" ]] || printf ' %16s' "$m/$first"; done
echo
for p in $PHASES total_mean_ns; do
    printf '%-14s' "${p/total_mean_ns/total}"
    for m in $MODES; do printf ' %10s' "$(us "$(median "$m" "$p")")"; done
    base=$(median "$first" "$p")
    for m in $MODES; do [[ $m == "$first" ]] || printf ' %16s' "$(ratio "$(median "$m" "$p")" "$base")"; done
    echo
done
