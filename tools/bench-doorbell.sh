#!/usr/bin/env bash
# tools/bench-doorbell.sh: doorbells on (tickless, interrupts between
# instances) against off (polling on the 1 kHz tick), measured in one run.
#
#   tools/bench-doorbell.sh [--rounds R] [--size SIZE] [--no-build] [--kernel ELF]
#
# Boots 1 directory + 3 nodes with --doorbell on, then the same with
# doorbells on but lazy invalidation off (`lazy_inv=0`: every DIR_INV waits
# for the sharer's ack, which its doorbell wakes it to send), then with
# --doorbell off, and on each runs: `bench inv` with 2, 1 and 0 idle
# sharers (node 1 owns SIZE, default 256k; the sharers idle at their
# prompt), `bench read` CM-R (node 2's first touch of node 1's pages), `bench
# ring`, `bench pingpong` (R rounds, default 20000) and, with doorbells,
# `bench doorbell`. Prints each median, the ratios off / on and eager / on
# (> 1: doorbells, or lazy invalidation, faster) and one RESULT json line.
# --kernel ELF boots that kernel instead of the build's (for A/B runs of
# an older commit's kernel; implies --no-build).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=20000
SIZE=256k
BUILD=1
KERNEL=
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --size) SIZE=${2:?--size needs a value}; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --kernel) KERNEL=${2:?--kernel needs a path}; BUILD=0; shift 2 ;;
        -h | --help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-doorbell.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -gt 0 ]] || { echo "bench-doorbell.sh: error: --rounds takes a positive integer" >&2; exit 2; }
[[ $SIZE =~ ^[0-9]+[km]?$ ]] || { echo "bench-doorbell.sh: error: --size takes a size like 256k" >&2; exit 2; }
if [[ -n $KERNEL ]]; then
    [[ -f $KERNEL ]] || { echo "bench-doorbell.sh: error: --kernel: no file '$KERNEL'" >&2; exit 2; }
    KERNEL=$(realpath -- "$KERNEL")
fi
cd "$ROOT"
nobuild=()
[[ $BUILD == 1 ]] || nobuild=(--no-build)
[[ -z $KERNEL ]] || nobuild+=(--kernel "$KERNEL")
RUN=$(mktemp -d /tmp/onecopy-bench-doorbell.XXXXXX)
cleanup() { local v; for v in on eager off; do ./qemu-run.sh stop --run-dir "$RUN/$v" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
F=/bell.dat

# run on|eager|off: boot, run the benchmarks, print "name median_ns" lines.
run() {
    local db=$1 dir=$RUN/$1 out extra=()
    if [[ $db == eager ]]; then db=on; extra=(--append-extra lazy_inv=0); fi
    ./qemu-run.sh "${nobuild[@]}" --doorbell "$db" --nodes 3 --run-dir "$dir" --detach "${extra[@]}" >"$dir.launch" 2>&1 ||
        { echo "bench-doorbell.sh: error: the $db cluster did not boot (see $dir.launch)" >&2; return 1; }
    local e=(-e "1: fill $F $SIZE" -e '1: sync' -e '1: cache drop'
        -e "1: bench read $F" -e "2: bench read $F"
        -e "3: bench read $F" -e "1: bench inv $F"
        -e "1: bench read $F" -e "2: bench read $F" -e "1: bench inv $F"
        -e "1: bench read $F" -e "1: bench inv $F"
        -e "1: bench ring $ROUNDS" -e "1: bench pingpong $ROUNDS")
    [[ $db == off ]] || e+=(-e '1: bench doorbell 200')
    out=$(./qemu-run.sh exec --run-dir "$dir" --cmd-timeout 300 "${e[@]}") ||
        { echo "bench-doorbell.sh: error: a command failed on the $db cluster:" >&2; echo "$out" >&2; return 1; }
    ./qemu-run.sh stop --run-dir "$dir" >/dev/null 2>&1 || true
    med() { grep -o 'median=[0-9]*' | cut -d= -f2 | sed -n "${1}p"; }
    # bench read lines: node 1 CM, node 2 CM-R (first touch of node 1's pages), ...
    echo "cm_r $(echo "$out" | grep '^\[n2\] read 4k' | med 1)"
    echo "inv_2 $(echo "$out" | grep 'invalidate 1 page' | med 1)"
    echo "inv_1 $(echo "$out" | grep 'invalidate 1 page' | med 2)"
    echo "inv_0 $(echo "$out" | grep 'invalidate 1 page' | med 3)"
    echo "ring $(echo "$out" | grep 'ring round trip' | med 1)"
    echo "pingpong $(echo "$out" | grep 'cache-line round trip' | med 1)"
    echo "doorbell $(echo "$out" | grep 'doorbell round trip' | med 1)"
}

mkdir -p "$RUN/on" "$RUN/eager" "$RUN/off"
on=$(run on)
eager=$(run eager)
off=$(run off)
val() { echo "$1" | awk -v k="$2" '$1 == k { print $2 }'; }
us() { awk -v v="${1:-}" 'BEGIN { if (v == "") print "n/a"; else printf "%.1f", v / 1000 }'; }
ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || a == 0) print "n/a"; else printf "%.2fx", b / a }'; }
echo "1 directory + 3 nodes: doorbells on (tickless, lazy invalidation), on with lazy_inv=0 (eager), off (1 kHz tick); same run; medians"
printf '%-38s %10s %10s %10s %8s %8s\n' benchmark "on (us)" "eager (us)" "off (us)" off/on eager/on
json=
for row in "inv_2:bench inv, 2 idle sharers" "inv_1:bench inv, 1 idle sharer" "inv_0:bench inv, 0 sharers" \
    "cm_r:bench read CM-R (one-page lookup)" "ring:bench ring" "pingpong:bench pingpong" "doorbell:bench doorbell (round trip)"; do
    key=${row%%:*} name=${row#*:}
    a=$(val "$on" "$key") g=$(val "$eager" "$key") b=$(val "$off" "$key")
    printf '%-38s %10s %10s %10s %8s %8s\n' "$name" "$(us "$a")" "$(us "$g")" "$(us "$b")" "$(ratio "$a" "$b")" "$(ratio "$a" "$g")"
    json+="${json:+, }\"${key}_ns\": {\"on\": ${a:-null}, \"eager\": ${g:-null}, \"off\": ${b:-null}}"
done
echo "RESULT {$json}"
