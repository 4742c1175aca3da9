#!/usr/bin/env bash
# tools/bench-console.sh: how fast a node's shell takes a long line from
# its serial console, doorbells on (tickless kernel, woken by the UART's
# receive interrupt) against off (the 1 kHz tick), measured in one run.
#
#   tools/bench-console.sh [--rounds R] [--no-build]
#
# Boots 1 directory + 1 node with --doorbell on, connects to node 1's
# console socket (RUN/node1.sock) and sends R times (default 5) a 4096-byte
# line `write /bench-console.txt xxx...` (the shell's longest line), timing
# from the send to the echo of the line's end (the line reached the shell)
# and to the command's status line; a short `write` is timed the same way.
# Then the same with --doorbell off. Prints the medians of each, and the
# ratio on / off of the 4 KiB line's time to reach the shell.
# Goal: with doorbells on, a 4 KiB line reaches the shell in under 100 ms.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=5
BUILD=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h | --help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-console.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -gt 0 ]] ||
    { echo "bench-console.sh: error: --rounds takes an integer > 0" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench-console.sh: error: needs python3" >&2; exit 2; }
cd "$ROOT"
nobuild=()
[[ $BUILD == 1 ]] || nobuild=(--no-build)
RUN=$(mktemp -d /tmp/onecopy-bench-console.XXXXXX)
cleanup() { ./qemu-run.sh stop --run-dir "$RUN/on" >/dev/null 2>&1 || true
            ./qemu-run.sh stop --run-dir "$RUN/off" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# time_lines SOCK ROUNDS: prints "long_echo_ms long_ok_ms short_echo_ms
# short_ok_ms" (medians over ROUNDS).
time_lines() {
    python3 - "$1" "$2" <<'EOF'
import socket, statistics, sys, time

sock_path, rounds = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock_path)
s.settimeout(0.05)

def drain(quiet):
    """Read until nothing arrives for `quiet` seconds."""
    s.settimeout(quiet)
    try:
        while True:
            if not s.recv(65536):
                sys.exit("console closed")
    except socket.timeout:
        pass
    s.settimeout(0.05)

def run(line, limit=60.0):
    """(ms until the line's echo ended, ms until its status line)."""
    drain(0.2)
    data = line.encode() + b"\r"
    buf = bytearray()
    t0 = time.monotonic()
    s.sendall(data)
    echo = None
    while True:
        if time.monotonic() - t0 > limit:
            sys.exit(f"no answer within {limit} s to a {len(line)}-byte line: {bytes(buf[-300:])!r}")
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            sys.exit("console closed")
        buf += chunk
        now = time.monotonic()
        if echo is None and line.encode() + b"\r\n" in buf:
            echo = now
        if echo is not None:
            tail = buf[buf.find(line.encode()) + len(line):]
            if b"\r\nok\r\n" in tail or b"\r\nerror:" in tail:
                return (echo - t0) * 1e3, (now - t0) * 1e3

prefix = "write /bench-console.txt "
long_line = prefix + "x" * (4096 - len(prefix))
res = {"long": [], "short": []}
for _ in range(rounds):
    res["long"].append(run(long_line))
    res["short"].append(run(prefix + "hello"))
med = lambda xs, i: statistics.median(x[i] for x in xs)
print(f"{med(res['long'], 0):.1f} {med(res['long'], 1):.1f} "
      f"{med(res['short'], 0):.1f} {med(res['short'], 1):.1f}")
EOF
}

# measure on|off: boots, times, stops; prints time_lines' four numbers.
measure() {
    local db=$1 dir=$RUN/$1
    ./qemu-run.sh "${nobuild[@]}" --doorbell "$db" --nodes 1 --run-dir "$dir" --detach >"$dir.launch" 2>&1 ||
        { echo "bench-console.sh: error: the $db cluster did not boot (see $dir.launch)" >&2; return 1; }
    time_lines "$dir/node1.sock" "$ROUNDS" ||
        { echo "bench-console.sh: error: timing failed with --doorbell $db (logs in $dir)" >&2; return 1; }
    ./qemu-run.sh stop --run-dir "$dir" >/dev/null 2>&1
}

if [[ $BUILD == 1 ]]; then
    nobuild=(--no-build)
    ./qemu-run.sh --check >/dev/null
    cargo build --release -p onecopy-kernel --target x86_64-unknown-none
    cargo build --release -p flatfs --bins
    cargo build --release -p onecopy-ivshmem-server
    cargo build --release -p onecopy-tests --bin onecopy-ctl
fi
read -r on_echo on_ok on_secho on_sok < <(measure on)
read -r off_echo off_ok off_secho off_sok < <(measure off)
[[ -n ${on_echo:-} && -n ${off_echo:-} ]] || { echo "bench-console.sh: error: a measurement failed" >&2; exit 1; }
printf '%-34s %12s %12s\n' "median of $ROUNDS (ms)" "doorbell on" "doorbell off"
printf '%-34s %12s %12s\n' "4 KiB line reaches the shell" "$on_echo" "$off_echo"
printf '%-34s %12s %12s\n' "4 KiB write answered" "$on_ok" "$off_ok"
printf '%-34s %12s %12s\n' "short line reaches the shell" "$on_secho" "$off_secho"
printf '%-34s %12s %12s\n' "short write answered" "$on_sok" "$off_sok"
ratio=$(python3 -c "print(f'{$on_echo / max($off_echo, 0.001):.2f}')")
echo "ratio on / off (4 KiB line reaches the shell): $ratio"
verdict=$(python3 -c "print('met' if $on_echo < 100 else 'NOT met')")
echo "goal (doorbells on, under 100 ms): $verdict"
