#!/usr/bin/env bash
# tools/trace-demo.sh: the protocol timeline of one remote read and one
# invalidation of an idle sharer, as trace-event JSON and as a picture.
#
#   tools/trace-demo.sh [--out DIR] [--no-build]
#
# Boots 1 directory + 3 nodes (strong mode, doorbells on, every instance
# recording: boot option trace=1), clears the nodes' rings, then: node 1
# reads /hello.txt (a fill from the disk: node 1 owns the page), node 2
# reads it (a remote read of node 1's copy), node 3 maps it (mmap-read)
# and goes idle (its kernel halts), node 1 rewrites the file (the
# directory invalidates the sharers: node 3's DIR_INV is lazily acked
# while it sleeps, or it wakes and acks). Writes DIR/trace-demo.json
# (`qemu-run.sh trace`) and DIR/trace-demo.svg (tools/trace-render.py);
# DIR defaults to docs/. Stops the cluster on every exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/docs
BUILD=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) OUT=${2:?--out needs a directory}; shift 2 ;;
        --no-build) BUILD=(--no-build); shift ;;
        -h | --help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "trace-demo.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ -d $OUT ]] || { echo "trace-demo.sh: error: $OUT is not a directory" >&2; exit 2; }
RUN=$(mktemp -d /tmp/onecopy-trace-demo.XXXXXX)
cleanup() {
    "$ROOT/qemu-run.sh" stop --run-dir "$RUN" >/dev/null 2>&1 || true
    rm -rf -- "$RUN"
}
trap cleanup EXIT
cd "$ROOT"
./qemu-run.sh "${BUILD[@]}" --nodes 3 --mode strong --doorbell on --run-dir "$RUN" \
    --append-extra trace=1 --detach
run() { ./qemu-run.sh exec --run-dir "$RUN" "$@"; }
run -e '1: trace clear' -e '2: trace clear' -e '3: trace clear'
run -e '1: cat /hello.txt'
run -e '2: cat /hello.txt'
run -e '3: mmap-read /hello.txt'
# Node 3 idles (its kernel halts until an interrupt) before the write.
sleep 1
run -e '1: write /hello.txt rewritten by node 1'
sleep 1
./qemu-run.sh trace --run-dir "$RUN" -o "$OUT/trace-demo.json"
python3 "$ROOT/tools/trace-render.py" "$OUT/trace-demo.json" "$OUT/trace-demo.svg" \
    --title "onecopy, strong mode, 3 nodes: a fill, a remote read, and an invalidation of an idle sharer"
echo "wrote $OUT/trace-demo.json and $OUT/trace-demo.svg"
