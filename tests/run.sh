#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions run indirectly (trap, step)
# tests/run.sh: the project's test command (CI runs it through .ci/run).
#
#   tests/run.sh                 everything: checks, host tests, integration tests
#   tests/run.sh --unit          host-only: setup, fmt, clippy, unit tests (no QEMU)
#   tests/run.sh --integration   setup, release build, QEMU integration tests
#   tests/run.sh --long          setup, then the long host checks only: the data-path
#                                simulation's sweep (cargo test --release -p nodepath
#                                sim_sweep -- --ignored) over ONECOPY_SIM_SWEEP seeds
#                                (default 10,000) in every mode (strong, relaxed, private,
#                                net) with node failures, directory crashes and faults,
#                                checked strictly; hours on two cores
#
# Steps: tools/setup.sh; cargo fmt --check; clippy -D warnings for the host
# crates and for the kernel (x86_64-unknown-none); shellcheck of the scripts
# (installed when missing and run as root); host unit tests of every
# workspace crate but the kernel's, with the host fuzz tests and the docs
# check (tests/tests/docs.rs); the directory protocol's model checker in
# release (cargo test --release -p dirsvc --test model -- --ignored
# three_nodes: 3 nodes x 2 pages, strong and relaxed, a node failure and
# rejoin, and the append lock's lease with 3 nodes; about 3-4 minutes); the data-path simulation's sweep in release
# over 200 seeds in private and net mode (ONECOPY_SIM_MODE=private,net
# ONECOPY_SIM_SWEEP=200 cargo test --release -p nodepath sim_sweep --
# --ignored, under 2 minutes); release build of the kernel and host tools;
# the QEMU integration tests, one cluster at a time (every [[test]] of
# tests/Cargo.toml marked test = false but bench), and the ivshmem server
# with real QEMU doorbell devices; the benchmark report's --quick smoke test
# (cargo test -p onecopy-tests --test bench -- --ignored).
# A failed step does not stop the independent ones; the exit status is 1 if
# any step failed, 2 for a wrong argument, 0 otherwise. No QEMU process and
# no /dev/shm/onecopy-* file is left behind, whatever happens.
# Times on a quiet 2-core machine: --unit 5-10 minutes, everything about 25
# (docs/TESTING.md).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

MODE=all
for arg in "$@"; do
    case "$arg" in
        --unit) MODE=unit ;;
        --integration) MODE=integration ;;
        --long) MODE=long ;;
        -h | --help)
            # The comment block above, up to its end.
            sed -n '3,/^set -euo/{/^#/!d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
            exit 0
            ;;
        *)
            echo "tests/run.sh: error: unknown argument '$arg' (use --unit, --integration, --long or nothing)" >&2
            exit 2
            ;;
    esac
done

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
[[ $TARGET_DIR == /* ]] || TARGET_DIR="$ROOT/$TARGET_DIR"
TEST_RUNS="$TARGET_DIR/test-runs"
# where the harness puts run dirs when TEST_RUNS is too deep for unix sockets
TEST_RUNS_TMP="${TMPDIR:-/tmp}/onecopy-test-runs"
HOST_EXCLUDES=(--exclude onecopy-kernel --exclude onecopy-boot)

# ------------------------------------------------------------------ cleanup
shm_list() { find /dev/shm -maxdepth 1 -name 'onecopy-*' 2>/dev/null | sort; }
SHM_BEFORE=$(shm_list)

cleanup() {
    local rc=$? d f
    trap '' INT TERM HUP
    trap - EXIT
    # Clusters of test runs that were not stopped (a killed test binary).
    for d in "$TEST_RUNS"/*/ "$TEST_RUNS_TMP"/*/; do
        [[ -d $d ]] || continue
        if compgen -G "${d}*.pid" >/dev/null; then
            echo "tests/run.sh: stopping a leftover cluster in $d" >&2
            "$ROOT/qemu-run.sh" stop --run-dir "${d%/}" >/dev/null 2>&1 || true
        fi
    done
    # Shared regions created during this run and used by no process.
    for f in $(comm -13 <(echo "$SHM_BEFORE") <(shm_list)); do
        if ! grep -qsF -- "$f" /proc/[0-9]*/cmdline; then
            echo "tests/run.sh: removing leftover $f" >&2
            rm -f -- "$f"
        fi
    done
    exit "$rc"
}
on_signal() {
    echo "tests/run.sh: interrupted" >&2
    exit 130
}
trap cleanup EXIT
trap on_signal INT TERM HUP

# ------------------------------------------------------------------ steps
RESULTS=()
FAILED=()
step() { # step NAME COMMAND...
    local name=$1 start rc=0
    shift
    echo
    echo "==> [$name] $*"
    start=$(date +%s)
    "$@" || rc=$?
    local secs=$(($(date +%s) - start))
    if [[ $rc == 0 ]]; then
        RESULTS+=("ok      $name (${secs}s)")
    else
        RESULTS+=("FAILED  $name (exit $rc, ${secs}s)")
        FAILED+=("$name")
    fi
    return "$rc"
}
skip() { # skip NAME REASON
    RESULTS+=("skipped $1 ($2)")
}

host_unit_tests() {
    cargo test --workspace "${HOST_EXCLUDES[@]}" --exclude onecopy-tests &&
        cargo test -p onecopy-tests --lib --bins &&
        # host-only fuzzing of the launcher's flags and the net client, and
        # the docs checked against the code
        cargo test -p onecopy-tests --test launcher_fuzz --test net_fuzz --test docs &&
        cargo test -p onecopy-tests --doc
}
model_check() {
    # Every interleaving of the directory protocol (the real PageDir) with
    # 3 nodes x 2 pages, strong and relaxed, with a node failure and rejoin;
    # state counts and times are printed.
    cargo test --release -p dirsvc --test model -- --ignored --nocapture three_nodes
}
host_clippy() {
    cargo clippy --workspace "${HOST_EXCLUDES[@]}" --all-targets -- -D warnings &&
        # --all-targets skips the QEMU tests (test = false in tests/Cargo.toml)
        cargo clippy -p onecopy-tests "${QEMU_TESTS[@]}" -- -D warnings
}
# Every [[test]] of tests/Cargo.toml, as --test NAME arguments.
mapfile -t QEMU_TESTS < <(sed -n '/^\[\[test\]\]/,/^name/s/^name = "\(.*\)"/--test\n\1/p' "$ROOT/tests/Cargo.toml")
kernel_clippy() {
    cargo clippy -p onecopy-kernel -p onecopy-boot --target x86_64-unknown-none -- -D warnings
}
shell_check() {
    local scripts=(qemu-run.sh tests/run.sh .ci/run)
    local s
    for s in tools/*.sh tools/lib/*.sh; do [[ -f $s ]] && scripts+=("$s"); done
    shellcheck "${scripts[@]}"
}
release_build() {
    cargo build --release -p onecopy-kernel --target x86_64-unknown-none &&
        cargo build --release -p flatfs --bins &&
        cargo build --release -p onecopy-ivshmem-server &&
        cargo build --release -p onecopy-tests --bin onecopy-calibrate
}
integration_tests() {
    # Run dirs kept by earlier failed runs (logs, disk copies): stop, remove.
    local d
    for d in "$TEST_RUNS"/*/ "$TEST_RUNS_TMP"/*/; do
        [[ -d $d ]] || continue
        "$ROOT/qemu-run.sh" stop --run-dir "${d%/}" >/dev/null 2>&1 || true
        rm -rf -- "$d"
    done
    cargo test --no-fail-fast -p onecopy-tests --test cluster --test appends --test lifecycle --test crash --test fence --test launcher --test pagecache --test deleg --test asyncstore --test policy --test dirty --test net --test daxfs --test doorbell --test replace --test tasks --test fio --test apps --test trace -- --test-threads=1 &&
        cargo test -p onecopy-ivshmem-server --test qemu -- --ignored --test-threads=1
}

short_sweep() {
    # The data-path simulation's sweep in release, strict checker, failure
    # injection and a phase of frequent node failures (a debug build is too
    # slow for hundreds): 300 seeds in every mode (well under a minute of
    # CPU in all). The --long tier runs 10,000 per mode.
    ONECOPY_SIM_SWEEP=300 cargo test --release -p nodepath sim_sweep -- --ignored --nocapture
}
long_sweep() {
    # Every mode's seeds, strict checker, failure injection (see
    # kernel/nodepath/src/sim/datapath.rs, `sim_sweep`).
    ONECOPY_SIM_SWEEP="${ONECOPY_SIM_SWEEP:-10000}" \
        cargo test --release -p nodepath sim_sweep -- --ignored --nocapture
}

bench_smoke() {
    # The benchmark report in --quick mode, its application study and its
    # eviction-policy section (about 9 minutes): checks that every figure
    # is produced and is a number, not that it is fast.
    cargo test -p onecopy-tests --test bench -- --ignored --test-threads=1
}

if ! step setup tools/setup.sh; then
    echo "tests/run.sh: setup failed; nothing else can run" >&2
else
    if [[ $MODE == long ]]; then
        step sim-sweep long_sweep || true
    fi
    if [[ $MODE != integration && $MODE != long ]]; then
        step fmt cargo fmt --all -- --check || true
        step clippy-host host_clippy || true
        step clippy-kernel kernel_clippy || true
        if ! command -v shellcheck >/dev/null 2>&1 && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
            echo "tests/run.sh: installing shellcheck (Debian package) for the script checks..."
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null 2>&1 ||
                { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null 2>&1; } || true
        fi
        if command -v shellcheck >/dev/null 2>&1; then
            step shellcheck shell_check || true
        else
            skip shellcheck "not installed: apt-get install -y shellcheck"
        fi
        step unit-tests host_unit_tests || true
        step model-check model_check || true
        step sim-sweep-short short_sweep || true
    fi
    if [[ $MODE != unit && $MODE != long ]]; then
        if step release-build release_build; then
            step integration-tests integration_tests || true
            step bench-smoke bench_smoke || true
        else
            skip integration-tests "the release build failed"
        fi
    fi
fi

echo
echo "==== tests/run.sh ($MODE) ===="
for r in "${RESULTS[@]}"; do echo "  $r"; done
if [[ ${#FAILED[@]} -gt 0 ]]; then
    echo "tests/run.sh: FAILED steps: ${FAILED[*]}"
    exit 1
fi
echo "tests/run.sh: every step succeeded"
exit 0
