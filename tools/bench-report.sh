#!/usr/bin/env bash
# tools/bench-report.sh: build everything, run onecopy-bench, say where the
# report is.
#
#   tools/bench-report.sh [--quick] [--out DIR] [--modes strong,relaxed,private,net]
#                         [--storage P] [--cxl-latency-ns N] [--keep-runs]
#   tools/bench-report.sh --apps [--quick] [--apps-nodes 1,2,4] [--apps-runtime S]
#                         [--apps-list kv,webserver,...] [--policy NAME] ...
#   tools/bench-report.sh --policies [--quick] [--out DIR]
#   tools/bench-report.sh --render DIR
#
# --apps runs the application study instead (DPC Fig. 10: N = 1, 2, 4
# nodes running the same app at once in every mode; about 8 minutes;
# --apps --quick: N = 1, 2 and 1 s per app).
# --policies runs the eviction-policy section instead:
# tools/bench-policy-apps.sh (YCSB-C, GET-SCAN, file search under every
# policy, ratios to FIFO), tools/bench-cluster-policy.sh (webserver on 4
# nodes, lru vs cluster) and tools/bench-promote.sh in relaxed and in
# strong mode (CH-R latency with promotion off / on, --cxl-latency-ns
# 250), one after the other, each with a time limit, their output in
# DIR/policies/*.log; report.md's "Eviction policies" section sets
# cache_ext's published figures beside ours (about 8 minutes; --policies
# --quick: 6 policies, 1-2 s runs, 2 nodes; about 90 s).
# --render DIR re-draws a microbenchmark report's charts and report.md
# from DIR/results.json (nothing is measured again).
# Every argument goes to onecopy-bench (see target/release/onecopy-bench
# --help). Results: DIR/results.json, DIR/report.md, DIR/params.json,
# DIR/*.png (default DIR results/<YYYY-MM-DD-HHMMSS>/, UTC); each report
# records the commit, the command line, the host and the load. Modes by
# default: strong, relaxed, private and net (the TCP/IP baseline).
# --quick takes about 80 s on 2 cores with TCG; the full run about 12
# minutes with the four modes on an idle machine; one progress line per
# step (step, mode, N, elapsed, time left). SIGINT (Ctrl-C) or SIGTERM
# stops every cluster and writes the report so far, marked partial;
# --resume DIR with the same options continues it. Exit status: that of
# onecopy-bench (0 complete, 1 some figure or script missing or failed,
# 2 usage, 130 / 143 interrupted).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
for a in "$@"; do
    case "$a" in
        -h | --help) sed -n '2,37p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    esac
done
cd "$ROOT"
if [[ ${1:-} == --render ]]; then
    # Nothing boots: only the runner is needed.
    cargo build --release -q -p onecopy-tests --bin onecopy-bench
    exec "$ROOT/target/release/onecopy-bench" "$@"
fi
echo "bench-report.sh: building the kernel and the host tools" >&2
cargo build --release -q -p onecopy-kernel --target x86_64-unknown-none
cargo build --release -q -p flatfs --bins
cargo build --release -q -p onecopy-ivshmem-server
cargo build --release -q -p onecopy-tests --bins
start=$(date +%s)
status=0
out=$(mktemp)
# onecopy-bench in a session of its own, so that a terminal's Ctrl-C
# reaches it once, through the traps below, and a SIGTERM to this script
# reaches it too: it then stops its clusters and writes a partial report.
ONECOPY_CTL="$ROOT/target/release/onecopy-ctl" setsid "$ROOT/target/release/onecopy-bench" "$@" >"$out" &
bench=$!
trap 'kill -INT "$bench" 2>/dev/null || true' INT
trap 'kill -TERM "$bench" 2>/dev/null || true' TERM
# A trapped signal ends `wait` early: wait again until it has exited.
while kill -0 "$bench" 2>/dev/null; do
    wait "$bench" || true
done
wait "$bench" || status=$?
trap - INT TERM
report=$(cat "$out")
rm -f "$out"
end=$(date +%s)
if [[ -n $report ]]; then
    echo "bench-report.sh: report: $report ($((end - start)) s)"
fi
if [[ $status -eq 1 ]]; then
    echo "bench-report.sh: incomplete run: some figures are missing or failed (listed above and at the end of the report)" >&2
elif [[ $status -gt 128 ]]; then
    echo "bench-report.sh: interrupted: the report is partial; add --resume DIR to the same command to measure the rest" >&2
fi
exit "$status"
