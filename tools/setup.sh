#!/usr/bin/env bash
# tools/setup.sh: check (and where possible install) what onecopy needs on the
# host: QEMU (qemu-system-x86_64) and the Rust toolchain, target and
# components pinned in rust-toolchain.toml; optionally Debian's fio and
# fio-examples (the fio compatibility tests skip without them).
#
# Idempotent and fast (well under a second) when everything is present.
# Used by ./qemu-run.sh and ./tests/run.sh; safe to run by hand.
#
#   tools/setup.sh [--qemu-only] [--quiet]
#
#   --qemu-only   check QEMU only (what a launch with --no-build needs)
#   --quiet       print nothing when everything is already present
#
# Exit status: 0 when everything is present (or was installed), 1 otherwise,
# with the exact command to run printed on stderr.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QEMU_ONLY=0
QUIET=0
for arg in "$@"; do
    case "$arg" in
        --qemu-only) QEMU_ONLY=1 ;;
        --quiet) QUIET=1 ;;
        -h | --help)
            sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "setup.sh: error: unknown argument '$arg' (see tools/setup.sh --help)" >&2
            exit 2
            ;;
    esac
done

say() { [[ $QUIET == 1 ]] || echo "setup: $*"; }
fail() {
    echo "setup: error: $*" >&2
    exit 1
}

# ---------------------------------------------------------------- QEMU
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: qemu-system-x86_64 not found; installing Debian package qemu-system-x86 (apt-get, takes a minute)..."
        export DEBIAN_FRONTEND=noninteractive
        if ! apt-get update -qq >/dev/null ||
            ! apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null; then
            fail "installing qemu-system-x86 failed; try by hand: apt-get update && apt-get install -y qemu-system-x86"
        fi
        command -v qemu-system-x86_64 >/dev/null 2>&1 ||
            fail "qemu-system-x86 installed but qemu-system-x86_64 is still not on PATH"
        echo "setup: installed $(qemu-system-x86_64 --version | head -n 1)"
    elif command -v apt-get >/dev/null 2>&1; then
        fail "qemu-system-x86_64 not found; install it with: sudo apt-get update && sudo apt-get install -y qemu-system-x86"
    else
        fail "qemu-system-x86_64 not found; install QEMU (x86_64 system emulator, version 7.2 or later) with your package manager"
    fi
fi

[[ $QEMU_ONLY == 1 ]] && exit 0

# ---------------------------------------------------------------- fio
# Optional: Debian's fio (its post-processing scripts) and fio-examples (its
# job files) let the fio compatibility tests compare against the real thing;
# without them those tests skip, saying so.
if ! command -v fio_jsonplus_clat2csv >/dev/null 2>&1 || [[ ! -d /usr/share/doc/fio/examples ]]; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing Debian packages fio and fio-examples (apt-get; the fio compatibility tests use them)..."
        export DEBIAN_FRONTEND=noninteractive
        if ! { apt-get install -y -qq --no-install-recommends fio fio-examples >/dev/null 2>&1 ||
            { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends fio fio-examples >/dev/null; }; }; then
            echo "setup: note: installing fio and fio-examples failed; the fio compatibility tests will skip (try: apt-get install -y fio fio-examples)" >&2
        fi
    else
        say "note: fio / fio-examples not installed; the fio compatibility tests will skip (install with: sudo apt-get install -y fio fio-examples)"
    fi
fi

# ---------------------------------------------------------------- Rust
# A fresh rustup install puts cargo in ~/.cargo/bin, which may not be on PATH
# in non-login shells yet.
if ! command -v rustup >/dev/null 2>&1 && [[ -x "${CARGO_HOME:-$HOME/.cargo}/bin/rustup" ]]; then
    PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
    say "note: using rustup from ${CARGO_HOME:-$HOME/.cargo}/bin (add it to PATH: source \"${CARGO_HOME:-$HOME/.cargo}/env\")"
fi
if ! command -v rustup >/dev/null 2>&1; then
    if command -v cargo >/dev/null 2>&1; then
        fail "cargo found but rustup is missing; the toolchain pinned in rust-toolchain.toml needs rustup: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --default-toolchain none && source \"\$HOME/.cargo/env\""
    fi
    fail "cargo/rustup not found; install rustup with: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --default-toolchain none && source \"\$HOME/.cargo/env\" (then rerun; the pinned toolchain is installed automatically)"
fi

TOOLCHAIN_FILE="$ROOT/rust-toolchain.toml"
[[ -f $TOOLCHAIN_FILE ]] || fail "missing $TOOLCHAIN_FILE"
# Minimal TOML reading: `key = "value"` and `key = ["a", "b"]` on one line.
toml_value() {
    sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "$TOOLCHAIN_FILE" | head -n 1 |
        tr -d '[]"' | tr ',' ' '
}
CHANNEL=$(toml_value channel | tr -d ' ')
TARGETS=$(toml_value targets)
COMPONENTS=$(toml_value components)
[[ -n $CHANNEL ]] || fail "no channel in $TOOLCHAIN_FILE"

if ! rustup toolchain list | grep -Eq "^${CHANNEL//./\\.}(-[a-z0-9_]+)*( |$)"; then
    say "installing Rust toolchain $CHANNEL (rustup)..."
    comp_args=()
    for c in $COMPONENTS; do comp_args+=(--component "$c"); done
    for t in $TARGETS; do comp_args+=(--target "$t"); done
    rustup toolchain install "$CHANNEL" --profile minimal "${comp_args[@]}" ||
        fail "could not install toolchain $CHANNEL; try: rustup toolchain install $CHANNEL --profile minimal${COMPONENTS:+ -c ${COMPONENTS// /,}}${TARGETS:+ -t ${TARGETS// /,}}"
fi

installed_targets=$(rustup target list --installed --toolchain "$CHANNEL")
for t in $TARGETS; do
    if ! grep -qx "$t" <<<"$installed_targets"; then
        say "adding Rust target $t to $CHANNEL..."
        rustup target add --toolchain "$CHANNEL" "$t" >/dev/null ||
            fail "could not add target $t; try: rustup target add --toolchain $CHANNEL $t"
    fi
done

installed_components=$(rustup component list --installed --toolchain "$CHANNEL")
for c in $COMPONENTS; do
    if ! grep -q "^$c\(-preview\)\{0,1\}-" <<<"$installed_components"; then
        say "adding Rust component $c to $CHANNEL..."
        rustup component add --toolchain "$CHANNEL" "$c" >/dev/null ||
            fail "could not add component $c; try: rustup component add --toolchain $CHANNEL $c"
    fi
done
exit 0
