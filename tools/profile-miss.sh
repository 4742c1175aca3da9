#!/usr/bin/env bash
# tools/profile-miss.sh: instructions per cold 4 KiB miss on the host, per
# mode, split into the node's data path and the directory (callgrind over
# the in-process rig: kernel/nodepath/src/tests/profile.rs reads 256
# pages of a file no node caches, one read each).
#
#   tools/profile-miss.sh [--modes "strong relaxed private"] [--path sync|task]
#
# --path task reads each page as fio's tasks do (a ticket for the miss,
# polled and waited for, then the I/O run as a batch of one; the default,
# sync, is one read call per page).
# Instruction counts are deterministic (no timing, no host noise); they
# say what the code does per miss, not what TCG makes of it (page-table
# changes, halts and doorbells cost far more in the guest than their
# instructions). "directory" is everything under the rig's step of the
# directory (its serving loop and the heap disk); "node" is the rest of
# the read call. Needs valgrind (apt-get install -y valgrind).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODES="strong relaxed private"
PATH_KIND=sync
while [[ $# -gt 0 ]]; do
    case "$1" in
        --modes) MODES=${2:?--modes needs a value}; shift 2 ;;
        --path) PATH_KIND=${2:?--path needs a value}; shift 2 ;;
        -h | --help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "profile-miss.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $PATH_KIND =~ ^(sync|task)$ ]] ||
    { echo "profile-miss.sh: error: --path takes sync or task, got '$PATH_KIND'" >&2; exit 2; }
TEST=profile_misses MARK=marker_read
[[ $PATH_KIND == task ]] && TEST=profile_task_misses MARK=marker_task_read
for m in $MODES; do
    [[ $m =~ ^(strong|relaxed|private)$ ]] ||
        { echo "profile-miss.sh: error: unknown mode '$m' (strong, relaxed, private)" >&2; exit 2; }
done
if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
    echo "profile-miss.sh: error: needs valgrind: apt-get install -y valgrind" >&2
    exit 2
fi
cd "$ROOT"
BIN=$(cargo test --release -p nodepath --lib --no-run 2>&1 | grep -o 'target/release/deps/nodepath-[0-9a-f]*' | tail -1)
[[ -x $BIN ]] || { echo "profile-miss.sh: error: no nodepath test binary" >&2; exit 1; }
OUT=$(mktemp -d /tmp/onecopy-profile-miss.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
PAGES=256
printf '%-8s %14s %14s %14s\n' mode "node/miss" "directory/miss" "total/miss"
for m in $MODES; do
    valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.$m" --toggle-collect="*tests::profile::$MARK*" \
        "$BIN" --ignored --exact "tests::profile::${TEST}_$m" --test-threads=1 >"$OUT/log.$m" 2>&1 ||
        { echo "profile-miss.sh: error: $m failed:" >&2; cat "$OUT/log.$m" >&2; exit 1; }
    ann=$(callgrind_annotate --inclusive=yes "$OUT/cg.$m" 2>/dev/null)
    num() { grep -m1 "$1" <<<"$ann" | awk '{ gsub(",", "", $1); print $1 }'; }
    total=$(num 'PROGRAM TOTALS')
    dir=$(num 'rig::Shared::step')
    [[ -n $total && -n $dir ]] || { echo "profile-miss.sh: error: $m: no counts in callgrind's output" >&2; exit 1; }
    printf '%-8s %14d %14d %14d\n' "$m" $(((total - dir) / PAGES)) $((dir / PAGES)) $((total / PAGES))
done
echo "instructions (callgrind Ir) per miss ($PATH_KIND path), $PAGES cold misses per mode, host build of the data path and the directory"
