#!/usr/bin/env bash
# tools/bench-idle.sh: host CPU used by an idle cluster, doorbells on
# (tickless kernels) against off (the 1 kHz tick), measured in one run.
#
#   tools/bench-idle.sh [--nodes N] [--seconds S] [--settle S] [--no-build]
#
# Boots 1 directory + N nodes (default 4) with --doorbell on, lets it settle
# (default 3 s after the launcher returns), then sums utime + stime of every
# QEMU process of the cluster (and of the ivshmem server) from /proc over
# S seconds (default 10); stops it and does the same with --doorbell off.
# Prints each as a percentage of one host core and the ratio off / on.
# Goal: an idle 1 directory + 8 node cluster under 2% of a core.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODES=4
SECONDS_=10
SETTLE=3
BUILD=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --nodes) NODES=${2:?--nodes needs a value}; shift 2 ;;
        --seconds) SECONDS_=${2:?--seconds needs a value}; shift 2 ;;
        --settle) SETTLE=${2:?--settle needs a value}; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h | --help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-idle.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $NODES =~ ^[0-9]+$ && $SECONDS_ =~ ^[0-9]+$ && $SETTLE =~ ^[0-9]+$ && $SECONDS_ -gt 0 ]] ||
    { echo "bench-idle.sh: error: --nodes, --seconds and --settle take integers (--seconds > 0)" >&2; exit 2; }
cd "$ROOT"
nobuild=()
[[ $BUILD == 1 ]] || nobuild=(--no-build)
HZ=$(getconf CLK_TCK)
RUN=$(mktemp -d /tmp/onecopy-bench-idle.XXXXXX)
cleanup() { ./qemu-run.sh stop --run-dir "$RUN/on" >/dev/null 2>&1 || true
            ./qemu-run.sh stop --run-dir "$RUN/off" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# ticks PID...: utime + stime (clock ticks) summed over the processes.
ticks() {
    local sum=0 p f
    for p in "$@"; do
        f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null) || {
            echo "bench-idle.sh: error: process $p vanished" >&2
            return 1
        }
        sum=$((sum + ${f% *} + ${f#* }))
    done
    echo "$sum"
}

# measure on|off: prints the percentage of one core (two decimals).
measure() {
    local db=$1 dir=$RUN/$1 pids t0 t1 w0 w1
    ./qemu-run.sh "${nobuild[@]}" --doorbell "$db" --nodes "$NODES" --run-dir "$dir" --detach >"$dir.launch" 2>&1 ||
        { echo "bench-idle.sh: error: the $db cluster did not boot (see $dir.launch)" >&2; return 1; }
    pids=$(sed -n "s/^PIDS='\(.*\)'$/\1/p" "$dir/cluster.env")
    [[ -n $pids ]] || { echo "bench-idle.sh: error: no PIDS in $dir/cluster.env" >&2; return 1; }
    [[ -f $dir/ivshmem.pid ]] && pids="$pids $(cat "$dir/ivshmem.pid")"
    sleep "$SETTLE"
    # shellcheck disable=SC2086 # word splitting of the pid list is intended
    t0=$(ticks $pids)
    w0=$(date +%s%N)
    sleep "$SECONDS_"
    # shellcheck disable=SC2086
    t1=$(ticks $pids)
    w1=$(date +%s%N)
    ./qemu-run.sh stop --run-dir "$dir" >/dev/null 2>&1 || true
    # percent of one core = cpu seconds / wall seconds * 100
    awk -v t=$((t1 - t0)) -v hz="$HZ" -v ns=$((w1 - w0)) 'BEGIN { printf "%.2f", t / hz / (ns / 1e9) * 100 }'
}

mkdir -p "$RUN/on" "$RUN/off"
on=$(measure on)
off=$(measure off)
echo "idle cluster: 1 directory + $NODES nodes, ${SECONDS_} s after ${SETTLE} s settling, host CPU of its QEMU processes (and the ivshmem server)"
echo "doorbells on (tickless):  $on % of one core"
echo "doorbells off (1 kHz tick): $off % of one core"
awk -v a="$on" -v b="$off" 'BEGIN { if (a > 0) printf "ratio off/on: %.1fx\n", b / a; else print "ratio off/on: n/a (on measured 0)" }'
echo "RESULT {\"nodes\": $NODES, \"seconds\": $SECONDS_, \"idle_cpu_pct_doorbell_on\": $on, \"idle_cpu_pct_doorbell_off\": $off}"
