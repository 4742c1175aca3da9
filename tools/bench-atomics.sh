#!/usr/bin/env bash
# tools/bench-atomics.sh: are read-modify-writes on a shared word atomic
# across QEMU instances? Two nodes run `bench atomics COUNT` (COUNT
# `lock xadd` increments of the region's atomics probe) at the same time;
# the probe should end at 2 x COUNT. Measured under single-threaded TCG
# (`--accel tcg`, what the cluster uses) and multi-threaded TCG
# (`--accel tcg-multi`), with the cost of each (`bench ring`, `bench
# pingpong`, ns per increment) in the same run.
#
#   tools/bench-atomics.sh [--count N] [--accels tcg,tcg-multi]
#
# Prints one line per accelerator: lost updates, ns per increment, and the
# medians of bench ring / bench pingpong. Exit status 0 when every run
# finished (lost updates are a finding, not a failure), 1 otherwise, 2 on
# wrong usage.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COUNT=20000000
ACCELS=tcg,tcg-multi
while [[ $# -gt 0 ]]; do
    case "$1" in
        --count) COUNT=${2:?--count needs a value}; shift 2 ;;
        --accels) ACCELS=${2:?--accels needs a value}; shift 2 ;;
        -h | --help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-atomics.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if ! [[ $COUNT =~ ^[0-9]+$ ]] || ((COUNT < 1 || COUNT > 100000000)); then
    echo "bench-atomics.sh: error: --count takes an integer in 1..100000000" >&2
    exit 2
fi
[[ $ACCELS =~ ^(tcg|tcg-multi)(,(tcg|tcg-multi))*$ ]] ||
    { echo "bench-atomics.sh: error: --accels is a comma-separated list of tcg, tcg-multi" >&2; exit 2; }
cd "$ROOT"
cargo build --release -q -p onecopy-tests --bins
CTL="$ROOT/target/release/onecopy-ctl"
status=0
RUN=
# shellcheck disable=SC2317 # runs from the EXIT trap
cleanup() {
    if [[ -n $RUN ]]; then
        ./qemu-run.sh stop --run-dir "$RUN" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
median() { grep -o 'median=[0-9]*' | cut -d= -f2 | sort -n | sed -n '2p'; }
IFS=, read -r -a accels <<<"$ACCELS"
for accel in "${accels[@]}"; do
    RUN=$(mktemp -d /tmp/onecopy-bench-atomics.XXXXXX)
    if ! ./qemu-run.sh --nodes 2 --accel "$accel" --run-dir "$RUN" --detach >"$RUN/launch.txt" 2>&1; then
        echo "$accel: the cluster did not start (see $RUN)"; status=1; continue
    fi
    "$CTL" exec --run-dir "$RUN" '1: bench atomics reset' >/dev/null
    # Both at once: two exec processes, one per node's console.
    "$CTL" exec --run-dir "$RUN" --timeout-ms 600000 "1: bench atomics $COUNT" >"$RUN/a1.txt" 2>&1 &
    p1=$!
    "$CTL" exec --run-dir "$RUN" --timeout-ms 600000 "2: bench atomics $COUNT" >"$RUN/a2.txt" 2>&1 &
    p2=$!
    if ! wait "$p1" || ! wait "$p2"; then
        echo "$accel: bench atomics failed:"; cat "$RUN/a1.txt" "$RUN/a2.txt"; status=1
        ./qemu-run.sh stop --run-dir "$RUN" >/dev/null 2>&1 || true; RUN=; continue
    fi
    final=$("$CTL" exec --run-dir "$RUN" '1: bench atomics reset' | grep -o 'was [0-9]*' | cut -d' ' -f2)
    per=$(cat "$RUN/a1.txt" "$RUN/a2.txt" | grep -o '([0-9]* ns each)' | tr -dc '0-9\n' | paste -sd/)
    perf=$("$CTL" exec --run-dir "$RUN" '1: bench ring 20000' '1: bench ring 20000' '1: bench ring 20000' \
        '1: bench pingpong 20000' '1: bench pingpong 20000' '1: bench pingpong 20000')
    ring=$(echo "$perf" | grep 'ring round trip' | median)
    pp=$(echo "$perf" | grep 'cache-line round trip' | median)
    ./qemu-run.sh stop --run-dir "$RUN" >/dev/null 2>&1 || true
    RUN=
    want=$((2 * COUNT))
    lost=$((want - final))
    echo "$accel: probe $final of $want (lost $lost updates, $((lost * 100 / want))%); ns per increment (node 1/node 2) $per; bench ring median ${ring} ns, bench pingpong median ${pp} ns"
done
exit $status
