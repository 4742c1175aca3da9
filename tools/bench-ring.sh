#!/usr/bin/env bash
# tools/bench-ring.sh: directory round trip (`bench ring`) next to the host
# ping-pong limit, measured in the same run, reported as a ratio.
#
#   tools/bench-ring.sh [--nodes N] [--rounds R] [--repeat K]
#
# Boots 1 directory + N nodes (default 1, so exactly two instances are busy:
# the directory's core and node 1), runs `bench ring R` K times on node 1,
# and `bench pingpong R` (a bare cache-line round trip between the two
# guests: the floor for a ring round trip under this accelerator), then the
# host ping-pong between two threads, and prints the ratios of medians.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODES=1
ROUNDS=20000
REPEAT=3
while [[ $# -gt 0 ]]; do
    case "$1" in
        --nodes) NODES=${2:?--nodes needs a value}; shift 2 ;;
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --repeat) REPEAT=${2:?--repeat needs a value}; shift 2 ;;
        -h | --help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-ring.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $NODES =~ ^[0-9]+$ && $ROUNDS =~ ^[0-9]+$ && $REPEAT =~ ^[0-9]+$ ]] ||
    { echo "bench-ring.sh: error: --nodes, --rounds and --repeat take integers" >&2; exit 2; }
cd "$ROOT"
cargo build --release -q -p onecopy-tests --bins
RUN=$(mktemp -d /tmp/onecopy-bench-ring.XXXXXX)
args=()
for ((i = 0; i < REPEAT; i++)); do args+=(-e "1: bench ring $ROUNDS" -e "1: bench pingpong $ROUNDS"); done
out=$(./qemu-run.sh --nodes "$NODES" --run-dir "$RUN" "${args[@]}")
echo "$out" | grep -E "accel:|cluster up|ring round trip|cache-line round trip"
pp=$("$ROOT/target/release/onecopy-pingpong" 200000)
echo "$pp"
med() { grep "$1" | grep -o 'median=[0-9]*' | cut -d= -f2 | sort -n | sed -n "$(((REPEAT + 1) / 2))p"; }
ring=$(echo "$out" | med 'ring round trip')
guest=$(echo "$out" | med 'cache-line round trip')
host=$(echo "$pp" | grep -o 'median=[0-9]*' | cut -d= -f2)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
echo "busy instances: directory + node 1 (of $NODES nodes); medians of $REPEAT runs:"
echo "  ring round trip ${ring} ns; bare guest-to-guest cache-line round trip ${guest} ns; host threads ${host} ns"
echo "  ring / host = $(ratio "$ring" "$host")x; ring / guest floor = $(ratio "$ring" "$guest")x; guest floor / host = $(ratio "$guest" "$host")x"
rm -rf "$RUN"
