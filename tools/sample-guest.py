#!/usr/bin/env python3
"""tools/sample-guest.py: a sampling profiler for one guest, through QEMU's gdb stub.

    tools/sample-guest.py --port PORT --elf KERNEL [--seconds S] [--hz H] [--top N]

Connects to the gdb stub of one instance (`qemu-run.sh --gdb K` listens on
127.0.0.1:1234+K), and for S seconds (default 10) stops the vCPU H times a
second (default 200), reads its instruction pointer and lets it go on. Then
maps each sample to the kernel's function (`nm -C` of KERNEL) and prints the
functions by share of the samples, busy samples apart from those in the
idle halt (a halted vCPU's pointer sits right after its `hlt`).

What it says: where this guest's vCPU spends its time under TCG, which is
not what host instruction counts say (page-table changes, TLB fills and
halts cost far more in the guest). What it costs: each sample stops the
guest for a gdb round trip (tens of microseconds), so absolute times in the
guest are slowed; compare shares between runs sampled the same way.
Reads the stub over 127.0.0.1 only.
"""

import argparse
import bisect
import socket
import subprocess
import sys
import time


def checksum(data: bytes) -> bytes:
    return b"%02x" % (sum(data) % 256)


class Stub:
    """The gdb remote protocol, just what sampling needs (no-ack mode)."""

    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        self.ack = True
        self.command(b"QStartNoAckMode")
        self.ack = False

    def send(self, payload: bytes):
        self.s.sendall(b"$" + payload + b"#" + checksum(payload))

    def packet(self) -> bytes:
        while True:
            start = self.buf.find(b"$")
            if start >= 0:
                end = self.buf.find(b"#", start)
                if end >= 0 and len(self.buf) >= end + 3:
                    body = self.buf[start + 1:end]
                    self.buf = self.buf[end + 3:]
                    if self.ack:
                        self.s.sendall(b"+")
                    return body
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("gdb stub closed the connection")
            self.buf += chunk

    def command(self, payload: bytes) -> bytes:
        self.send(payload)
        return self.packet()

    def interrupt(self) -> bytes:
        """Stop the guest: its stop reply (`T..`/`S..`); other packets
        before it (late answers) are skipped."""
        self.s.sendall(b"\x03")
        while True:
            p = self.packet()
            if p[:1] in (b"T", b"S"):
                return p

    def rip(self) -> int:
        # QEMU's stub has no `p`: all registers (`g`), rip is the 17th
        # 8-byte register in gdb's x86-64 order (little-endian hex).
        for _ in range(4):
            v = self.command(b"g")
            if len(v) >= 272:
                return int.from_bytes(bytes.fromhex(v[256:272].decode()), "little")
        raise ConnectionError(f"no registers from the stub: {v[:40]!r}")

    def cont(self):
        self.send(b"c")


def symbols(elf: str):
    out = subprocess.run(["nm", "-C", "-n", elf], capture_output=True, text=True, check=True).stdout
    addrs, names = [], []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            addrs.append(int(parts[0], 16))
            names.append(parts[2])
    return addrs, names


def short(name: str) -> str:
    # Drop generic arguments and the trailing hash: the function's path.
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out)
    return s if len(s) < 110 else s[:107] + "..."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--elf", required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--hz", type=float, default=200.0)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    if not (0 < a.seconds <= 600 and 0 < a.hz <= 5000 and 1024 <= a.port <= 65535):
        print("sample-guest.py: error: --seconds in (0, 600], --hz in (0, 5000], --port 1024..65535", file=sys.stderr)
        return 2
    addrs, names = symbols(a.elf)
    stub = Stub(a.port)
    # The stub stops the guest on connect: start it.
    stub.cont()
    rips = []
    end = time.monotonic() + a.seconds
    period = 1.0 / a.hz
    while time.monotonic() < end:
        time.sleep(period)
        stub.interrupt()
        rips.append(stub.rip())
        stub.cont()
    stub.s.close()
    counts = {}
    for r in rips:
        i = bisect.bisect_right(addrs, r) - 1
        name = short(names[i]) if i >= 0 else "?"
        counts[name] = counts.get(name, 0) + 1
    idle = {n: c for n, c in counts.items() if "halt" in n or "wait_for_interrupt" in n or "hlt" in n}
    busy = sum(counts.values()) - sum(idle.values())
    print(f"{len(rips)} samples over {a.seconds:.1f} s; {busy} busy ({100.0 * busy / max(1, len(rips)):.1f}%), idle: "
          + ", ".join(f"{n} {c}" for n, c in sorted(idle.items(), key=lambda x: -x[1])))
    print(f"{'busy %':>7} {'samples':>8}  function")
    for n, c in sorted(counts.items(), key=lambda x: -x[1]):
        if n in idle:
            continue
        print(f"{100.0 * c / max(1, busy):7.2f} {c:8d}  {n}")
        a.top -= 1
        if a.top == 0:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
