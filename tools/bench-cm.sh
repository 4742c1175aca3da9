#!/usr/bin/env bash
# tools/bench-cm.sh: the benchmark report's CM read latency (goal:
# single copy / private <= 1.02x), with
# enough repeats to see past this host's spread.
#
#   tools/bench-cm.sh [--rounds R] [--passes P] [--modes "private strong relaxed"]
#                     [--storage P] [--size S] [--engine libaio|psync]
#                     [--no-build] [--kernel ELF]
#
# Each round boots 1 directory + 2 nodes once per mode, back to back, in
# the order given (reversed every other round, so that no mode always
# boots first; default 6 rounds, 3 passes, modes `private strong
# relaxed`, storage none, 8m, libaio: the full report's CM figure). In each
# boot node 1 lays out one file with fio (`--rw=read --bs=128k`, as the
# report), syncs, and both nodes drop their caches; then P times node 2
# runs `fio --rw=randread --bs=4k --iodepth=1` over it, every read a miss
# in every cache (both nodes drop their caches before each pass), and its
# mean latency is kept. Two instances busy: node 2 and the directory.
#
# Prints every pass (mean and median latency), then per statistic and mode
# the median over all passes, and for
# every mode after the first its ratio to the first: the ratio of the
# medians, and the median of the per-round ratios (each round's median
# over its passes, divided by the first mode's in the same round) with a
# 95% bootstrap interval (2,000 resamples of the rounds). One RESULT json
# line.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091 # tools/lib/bench.sh, checked on its own
. "$ROOT/tools/lib/bench.sh"
PROG=bench-cm.sh
ROUNDS=6
PASSES=3
MODES="private strong relaxed"
STORAGE=none
SIZE=8m
ENGINE=libaio
BUILD=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --passes) PASSES=${2:?--passes needs a value}; shift 2 ;;
        --modes) MODES=${2:?--modes needs a value}; shift 2 ;;
        --storage) STORAGE=${2:?--storage needs a value}; shift 2 ;;
        --size) SIZE=${2:?--size needs a value}; shift 2 ;;
        --engine) ENGINE=${2:?--engine needs a value}; shift 2 ;;
        --no-build) BUILD=(--no-build); shift ;;
        --kernel) BUILD=(--no-build --kernel "${2:?--kernel needs a value}"); shift 2 ;;
        -h | --help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "$PROG: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
require_int "$PROG" --rounds "$ROUNDS" 1 100
require_int "$PROG" --passes "$PASSES" 1 20
[[ $STORAGE =~ ^(none|nvme|sata-ssd|sas-raid)$ ]] ||
    { echo "$PROG: error: --storage takes none, nvme, sata-ssd or sas-raid, got '$STORAGE'" >&2; exit 2; }
[[ $SIZE =~ ^[1-9][0-9]*[km]$ ]] ||
    { echo "$PROG: error: --size takes a size such as 8m or 512k, got '$SIZE'" >&2; exit 2; }
[[ $ENGINE =~ ^(libaio|psync)$ ]] ||
    { echo "$PROG: error: --engine takes libaio or psync, got '$ENGINE'" >&2; exit 2; }
read -r -a MODE_LIST <<<"$MODES"
[[ ${#MODE_LIST[@]} -ge 1 ]] || { echo "$PROG: error: --modes names no mode" >&2; exit 2; }
for m in "${MODE_LIST[@]}"; do
    [[ $m =~ ^(strong|relaxed|private|net)(:[a-z_]+=[a-z0-9_]+(,[a-z_]+=[a-z0-9_]+)*)?$ ]] ||
        { echo "$PROG: error: unknown mode '$m' (strong, relaxed, private, net, each optionally :key=value,...)" >&2; exit 2; }
done
cd "$ROOT"
RUN=$(mktemp -d /tmp/onecopy-bench-cm.XXXXXX)
trap 'rm -rf "$RUN"' EXIT
SPEC="--name=cm --size=$SIZE --numjobs=1 --iodepth=1 --invalidate=0 --directory=/cm"
LAYOUT="fio $SPEC --rw=read --bs=128k --ioengine=libaio"
MEASURE="fio $SPEC --rw=randread --bs=4k --ioengine=$ENGINE"
# lat STAT RESULT: the read latency statistic (mean, p50) in ns.
lat() { grep -o '"read":{[^}]*"lat_ns":{[^}]*' <<<"$2" | grep -o "\"$1\":[0-9.]*" | sed 's/.*://'; }
STATS=(mean p50)
# LAT[stat,i,round]: the pass latencies (ns) of the i-th mode, space-separated
declare -A LAT

boot() { # mode-index round
    local i=$1 r=$2 m mode extra out res p st
    m=${MODE_LIST[i]}
    mode=${m%%:*}
    extra=""
    [[ $m == *:* ]] && extra=${m#*:} && extra=${extra//,/ }
    rm -rf "$RUN/c" # a fresh disk per boot
    local cmds=(-e "1: mkdir /cm" -e "1: $LAYOUT" -e "1: sync")
    for ((p = 1; p <= PASSES; p++)); do
        cmds+=(-e "1: cache drop" -e "2: cache drop" -e "2: $MEASURE")
    done
    out=$(./qemu-run.sh "${BUILD[@]}" --nodes 2 --mode "$mode" --storage "$STORAGE" \
        --run-dir "$RUN/c" ${extra:+--append-extra "$extra"} --cmd-timeout 900 "${cmds[@]}") ||
        { echo "$PROG: error: $m round $r: the cluster failed (output below)" >&2; echo "$out" >&2; exit 1; }
    [[ ${#BUILD[@]} -gt 0 ]] || BUILD=(--no-build) # built by the first boot
    mapfile -t res < <(echo "$out" | grep -E '^\[n2\] RESULT ')
    if [[ ${#res[@]} -ne $PASSES ]]; then
        echo "$PROG: error: $m round $r: expected $PASSES fio results from node 2, got ${#res[@]} (output below)" >&2
        echo "$out" >&2
        exit 1
    fi
    for st in "${STATS[@]}"; do
        LAT[$st,$i,$r]=""
        for p in "${res[@]}"; do
            local v
            v=$(lat "$st" "$p")
            [[ -n $v ]] || { echo "$PROG: error: $m round $r: no $st latency in: $p" >&2; exit 1; }
            LAT[$st,$i,$r]+="$v "
        done
    done
}

# bootstrap V...: the 2.5% and 97.5% points of the median of the values,
# over 2,000 resamples with replacement ("lo-hi").
bootstrap() {
    tr ' ' '\n' <<<"$*" | grep . | awk 'BEGIN { srand(13) }
        { v[NR] = $1 }
        END {
            n = NR
            for (b = 1; b <= 2000; b++) {
                for (i = 1; i <= n; i++) s[i] = v[int(rand() * n) + 1]
                # insertion sort: n is small
                for (i = 2; i <= n; i++) { x = s[i]; j = i - 1; while (j > 0 && s[j] > x) { s[j + 1] = s[j]; j-- } s[j + 1] = x }
                m[b] = (n % 2) ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2
            }
            for (i = 2; i <= 2000; i++) { x = m[i]; j = i - 1; while (j > 0 && m[j] > x) { m[j + 1] = m[j]; j-- } m[j + 1] = x }
            printf "%.3f-%.3f", m[50], m[1951]
        }'
}
us() { awk -v n="$1" 'BEGIN { printf "%.1f", n / 1000 }'; }

echo "CM read latency: fio randread 4k, $ENGINE, iodepth 1, $SIZE, storage $STORAGE; $ROUNDS rounds x $PASSES passes per mode (two instances busy: node 2 and the directory)"
for ((r = 1; r <= ROUNDS; r++)); do
    order=("${!MODE_LIST[@]}")
    if ((r % 2 == 0)); then # every other round in reverse: no mode always boots first
        order=()
        for ((i = ${#MODE_LIST[@]} - 1; i >= 0; i--)); do order+=("$i"); done
    fi
    for i in "${order[@]}"; do
        boot "$i" "$r"
        printf '  round %d %-24s mean latency (us):' "$r" "${MODE_LIST[i]}"
        for v in ${LAT[mean,$i,$r]}; do printf ' %s' "$(us "$v")"; done
        printf '; p50:'
        for v in ${LAT[p50,$i,$r]}; do printf ' %s' "$(us "$v")"; done
        echo
    done
done

first=${MODE_LIST[0]}
declare -A MED RM PR CI RR # per stat and mode index
for st in "${STATS[@]}"; do
    echo "  $st latency:"
    printf '  %-24s %14s %16s %22s %16s\n' mode "median (us)" "ratio of medians" "median per-round ratio" "95% interval"
    all_first=""
    for ((r = 1; r <= ROUNDS; r++)); do all_first+="${LAT[$st,0,$r]} "; done
    MED[$st,0]=$(median "$all_first")
    printf '  %-24s %14s\n' "$first" "$(us "${MED[$st,0]}")"
    for ((i = 1; i < ${#MODE_LIST[@]}; i++)); do
        all="" ratios=""
        for ((r = 1; r <= ROUNDS; r++)); do
            all+="${LAT[$st,$i,$r]} "
            ratios+="$(ratio "$(median "${LAT[$st,$i,$r]}")" "$(median "${LAT[$st,0,$r]}")" 4) "
        done
        MED[$st,$i]=$(median "$all")
        RM[$st,$i]=$(ratio "${MED[$st,$i]}" "${MED[$st,0]}" 3)
        PR[$st,$i]=$(median "$ratios")
        CI[$st,$i]=$(bootstrap "$ratios")
        RR[$st,$i]=${ratios% }
        printf '  %-24s %14s %15sx %21sx %16s\n' "${MODE_LIST[i]}" "$(us "${MED[$st,$i]}")" \
            "${RM[$st,$i]}" "${PR[$st,$i]}" "${CI[$st,$i]}"
    done
done
echo "  (ratios against $first in the same run; below 1 the mode is faster)"
json="{\"bench\":\"cm\",\"engine\":$(jstr "$ENGINE"),\"storage\":$(jstr "$STORAGE"),\"size\":$(jstr "$SIZE"),\"rounds\":$ROUNDS,\"passes\":$PASSES,\"modes\":["
for i in "${!MODE_LIST[@]}"; do
    [[ $i == 0 ]] || json+=","
    json+="{\"mode\":$(jstr "${MODE_LIST[i]}")"
    for st in "${STATS[@]}"; do
        json+=",\"${st}_ns\":$(jnum "${MED[$st,$i]}")"
        [[ $i == 0 ]] && continue
        json+=",\"${st}_ratio_of_medians\":$(jnum "${RM[$st,$i]}"),\"${st}_median_round_ratio\":$(jnum "${PR[$st,$i]}")"
        json+=",\"${st}_interval\":$(jstr "${CI[$st,$i]}"),\"${st}_round_ratios\":$(jstr "${RR[$st,$i]}")"
    done
    json+="}"
done
echo "RESULT $json]}"
