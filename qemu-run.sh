#!/usr/bin/env bash
# qemu-run.sh: build onecopy, prepare the disk and the shared region, boot a
# cluster (1 directory instance + N node instances, one QEMU each, all on one
# ivshmem region) and give you a shell on a node. Run with --help.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROG="qemu-run.sh"

# Names the kernel defines, written here once each (the launcher must check
# them before it builds anything, so it cannot ask a built tool); the host
# test tests/tests/docs.rs fails when a list differs from the code's:
#   MODES            fabric::config::Mode::ALL (the default first)
#   POLICIES         fabric::config::PolicyName::ALL (the default first)
#   BOOT_OPTIONS     the keys of fabric::config::BOOT_OPTIONS that
#                    --append-extra may set
#   LAUNCHER_OPTIONS the keys the launcher sets from its own flags
#                    (launcher_only there), refused in --append-extra
MODES="strong relaxed private net daxfs"
POLICIES="fifo lru clock lfu mru s3fifo sieve arc get-scan cluster"
BOOT_OPTIONS="mode policy storage cxl_ns doorbell log hb_timeout_ms rpc_timeout_ms dir_spin_us dir_bell_spin_us bell_spin_us tick_hz remote_limit cache_pages ring_reads fill_depth disk_lat_us disk_irq lazy_inv fence doorbell_selftest task_reads baseline_writes readahead_kb faultaround_kb reclaim_low reclaim_high trace delegation"
LAUNCHER_OPTIONS="role id nodes dilation_pct"

# in_list LIST WORD: WORD is one of LIST's space-separated words.
in_list() {
    [[ -n $2 && $2 != *[[:space:]]* && " $1 " == *" $2 "* ]]
}
# joined LIST: LIST's words separated by ", ".
joined() {
    local out=$1
    printf '%s' "${out// /, }"
}

usage() {
    local text options
    # The boot options, wrapped to the help's second column.
    options=$(printf '%s\n' "$BOOT_OPTIONS" | fold -s -w 56 | sed -e 's/ *$//' -e '2,$s/^/                     /')
    text=$(
        cat <<'EOF'
usage: ./qemu-run.sh [options] [-e 'K: command' ...]
       ./qemu-run.sh stop   [--run-dir DIR]
       ./qemu-run.sh status [--run-dir DIR]
       ./qemu-run.sh attach [--run-dir DIR] [--console K]
       ./qemu-run.sh exec   [--run-dir DIR] [--cmd-timeout S] -e 'K: command' ...
       ./qemu-run.sh restart [--run-dir DIR] [--boot-timeout S] K
       ./qemu-run.sh trace  [--run-dir DIR] [--cmd-timeout S] -o FILE.json
       ./qemu-run.sh --help

Boots a onecopy cluster: one directory instance (role=dir, owns the disk) and
N node instances (role=node id=K), each a QEMU with one vCPU and its own serial
console, all sharing one memory region (/dev/shm/onecopy-*, ivshmem). Builds the
kernel and host tools first, creates RUN/disk.img from tools/sample when no
--disk is given, waits until the directory is ready and every node joined, then:

  with -e        runs the commands in order (output prefixed [nK]), then stops
                 the cluster (keeps it with --detach); exit 0 if every command
                 answered ok, 1 otherwise
  with --detach  leaves the cluster running in the background and exits
  on a terminal  attaches to node --console's shell; Ctrl-] detaches, and the
                 cluster stops when the session ends (`shutdown` also ends it)
  otherwise      (piped, CI) runs a short demo through -e, then stops

Options:
  --nodes N          number of node instances, 1..16 (default 2)
  --policy NAME      eviction policy of every node's owned pages (single-copy
                     modes; default fifo), one of:
                     @POLICIES@;
                     `cache policy NAME` changes it on one node at run time
  --mode M           page cache: strong (single copy, coherent writes; the
                     default) | relaxed (single copy for reads, private
                     writable copies reconciled at write-back) | private
                     (independent per-node caches through the directory)
                     | net (NFS-like baseline: private caches, file data
                     over TCP/IP, smoltcp on virtio-net, one unix-socket
                     link per node) | daxfs (DaxFS's decentralized design:
                     one page cache of slots in the region, claimed by
                     compare-and-swap; partial, see docs/ARCHITECTURE.md;
                     needs --accel tcg-multi or kvm)
  --storage P        model the directory's disk: rate caps by QEMU
                     throttling.*, access latency per request added by the
                     directory's driver (up to 64 requests in the device;
                     the directory keeps fill_depth, 32, in flight):
                     none (default) | nvme (3400 MB/s, 500k IOPS, 80 us) |
                     sata-ssd (145 MB/s, 20k IOPS, 120 us) | sas-raid
                     (4000 MB/s, 400k IOPS, 100 us: RAID-0 of four 1 GB/s
                     SAS SSDs, DPC's testbed)
  --cxl-latency-ns N extra latency added to every copy from a peer's frame
                     (emulated CXL access; 0..100000, default 0); mmap loads
                     run at host-memory speed
  --dilation off|auto|D
                     time dilation (default off): the guest's CPU runs D
                     times slower than the host's (TCG), so the storage
                     model's latency and --cxl-latency-ns are multiplied by
                     D and its bytes/s and IOPS divided by D, keeping
                     hardware's ratio of compute to I/O. D: 0.1..100, at
                     most two decimals. auto: measure D first (a 1-node
                     boot runs `bench calibrate`, the host runs the same
                     code with target/release/onecopy-calibrate; D = guest
                     time / host time), printed in the `cluster up` line
                     and recorded in cluster.env
  --doorbell on|off  on (default): start our ivshmem server
                     (target/release/onecopy-ivshmem-server, RUN/ivshmem.sock,
                     log RUN/ivshmem.log) before the instances and give each
                     -device ivshmem-doorbell (interrupts between instances,
                     MSI-X) on the same shared region, kernel option
                     doorbell=1: idle kernels halt until a doorbell or a
                     timer they armed (tickless; net mode keeps its tick);
                     off: ivshmem-plain, polling on the 1 kHz tick
  --pin MODE         auto | off (default auto: with 2+ host CPUs the directory
                     runs on CPU 0, its dedicated core, and the nodes on the
                     others, so a node never waits for the directory's core)
  --accel MODE       auto | tcg | tcg-multi | kvm (default auto: kvm only if
                     the CPU has vmx/svm and /dev/kvm opens, else tcg);
                     tcg-multi is multi-threaded TCG with room for a second
                     vCPU (-smp 1,maxcpus=2), the only TCG where lock-prefixed
                     instructions are atomic across instances (bench atomics)
  --disk IMG         disk image for the directory (default RUN/disk.img, made
                     with mkfs from tools/sample, 64 MiB, if missing)
  --dataset SPEC     application datasets built on the host into the default
                     disk (RUN/disk-apps.img, rebuilt when SPEC changes):
                     NAME:SIZE[:SEED] entries separated by commas (NAME one
                     of webserver fileserver varmail kv infer ann search,
                     SIZE like 64m), or 'apps' for the first six at 32m; not
                     with --disk
  --put HOST_PATH:GUEST_PATH
                     place the host file HOST_PATH (no ':' in it) at the
                     absolute GUEST_PATH of the disk (e.g. a fio job file
                     for the shell's `fio GUEST_PATH`); repeatable; the disk
                     (RUN/disk-put.img: tools/sample, the --dataset data,
                     these files) is rebuilt at every run; not with --disk
  --shm-mb M         shared region size in MiB: a power of two, 16..8192 (the
                     nodes' fixed kernel heap limits it; default 64)
  --shm-path PATH    use this existing file or device as the shared region
                     instead of a new /dev/shm file (a hugetlbfs file, a file
                     another tool made, a DAX-like device; what a user with
                     real CXL shared memory passes): a file must hold at
                     least --shm-mb MiB; the directory formats it; it is
                     never removed; the ivshmem server gets the same path
  --mem-mb M         guest memory per instance in MiB, 32..16384 (default 128)
  --run-dir DIR      logs, console sockets, pid files (default ./run); one
                     cluster per run dir: a second launch there is refused
  --detach           leave the cluster running in the background
  --console K        node whose console to attach (0 = directory; default 1)
  --gdb K            gdb stub for instance K (0 = directory) on
                     127.0.0.1:(1234+K), refused if that port is in use; the
                     boot is not paused
  --no-build         do not run cargo build (binaries must exist)
  -e 'K: command'    run a shell command on node K (repeatable, in order); one
                     line, no control characters
  --boot-timeout S   seconds to wait for the cluster to come up (default 30)
  --cmd-timeout S    seconds to wait for each -e command (default 60)
  --append-extra S   extra key=value boot options for every kernel command
                     line, after the launcher's own, so they win (e.g.
                     'hb_timeout_ms=600 lazy_inv=0'); an unknown key is
                     refused before anything is built or booted; keys:
                     @BOOT_OPTIONS@
                     (docs/USAGE.md describes each one)
  --kernel ELF       kernel to boot (default the release build)
  --check            validate the flags (as below, for any subcommand) and
                     exit: 0 and "qemu-run.sh: flags ok" if they are
                     accepted, 2 and one error line if not; builds, boots,
                     locks and touches nothing (no port or run-dir checks)
  -h, --help         this help

Subcommands:
  stop     stop the cluster of a run dir: SIGTERM every process of it (its
           QEMUs, and a launcher still running; found through the pid files
           and the lock RUN/cluster.lock), SIGKILL after 5 s; remove its
           shared region, sockets and pid files; keep logs
  status   show each instance's state (running, or exited with its code and
           what it means) and whether the shared region still has its size;
           exit 0 only if every instance runs
  attach   attach to a running cluster's console (Ctrl-] detaches, the cluster
           keeps running)
  exec     run -e commands on a running cluster and leave it running
  restart  boot a new instance of node K into the running cluster after
           its QEMU died or was killed (same flags as launched, from
           cluster.env; the old log is kept as nodeK.log.<ms>); waits until
           it joined; refused while node K runs and in net mode
  trace    collect the protocol timeline: `trace dump` on the directory's
           console and every node's shell (record first with `trace on` on
           each, or boot with --append-extra trace=1), merged onto the
           directory's TSC (each instance's offset and its uncertainty are
           printed: the skew check) as Chrome trace-event JSON in FILE.json
           (open it in Perfetto's UI or chrome://tracing)

Files in the run dir: dir.log, nodeK.log (serial output), *.sock (consoles;
netK.sock: node K's network link in net mode),
*.pid (QEMU pids), *.exit (QEMU exit status: 1 = clean shutdown, 3 = kernel
panic, 135 = SIGBUS: the shared region shrank or vanished, 128+N = killed by
signal N, 0 = stopped), *.stderr (QEMU's own messages), cluster.env (what was
launched), cluster.lock (held while the cluster lives).
Environment: ONECOPY_CTL overrides the path of the onecopy-ctl helper.
EOF
    )
    text=${text//@POLICIES@/$POLICIES}
    text=${text//@BOOT_OPTIONS@/$options}
    printf '%s\n' "$text"
}

# Error messages are one line, whatever a value quoted in them holds.
one_line() {
    local m=$*
    printf '%s' "${m//[[:cntrl:]]/?}"
}
die_usage() {
    echo "$PROG: error: $(one_line "$*") (see ./qemu-run.sh --help)" >&2
    exit 2
}
# refuse MESSAGE: a launch that cannot work as asked (exit 2, nothing started).
refuse() {
    echo "$PROG: error: $(one_line "$*")" >&2
    exit 2
}
die() {
    echo "$PROG: error: $(one_line "$*")" >&2
    exit 1
}
info() { echo "$*" 2>/dev/null; } # a closed stdout ends us through the PIPE trap

# ------------------------------------------------------------------ arguments
SUB=run
if [[ $# -gt 0 ]]; then
    case "$1" in
        stop | status | attach | exec | restart | trace)
            SUB=$1
            shift
            ;;
    esac
fi

NODES=2
ACCEL_REQ=auto
DISK=
DATASETS=()
DATASET_SPEC=
# --put: host files and where they go on the disk, pairwise.
PUT_HOST=()
PUT_GUEST=()
SHM_MB=64
SHM_USER= # --shm-path: an existing region the user owns
# The largest shared region a node can use. A node keeps one 8-byte entry per
# frame of its pool on its kernel heap (the free list of dirsvc's NodeCache),
# and that heap is half the node's RAM, at least HEAP_BYTES = 24 MiB and at
# most 64 MiB (kernel/src/mm/mod.rs), a third of it for the node's own page
# cache; the limit holds for the smallest heap. With
# --nodes 1 the node's pool is the whole region: 8192 MiB is 2M frames, 16 MiB
# of list, and boots and works (measured: fill, sum, mmap-read of 16 MiB, fio,
# every mode); 16384 MiB needs 32 MiB and the node panics at boot ("memory
# allocation of 33552840 bytes failed"). Raise it with HEAP_BYTES.
SHM_MB_MAX=8192
MEM_MB=128
RUN_DIR_ARG="$ROOT/run"
DETACH=0
CONSOLE=1
CONSOLE_SET=0
GDB=
BUILD=1
BOOT_TIMEOUT=30
CMD_TIMEOUT=60
APPEND_EXTRA=
MODE=strong
POLICY=fifo
PIN=auto
DOORBELL=on
STORAGE=none
CXL_NS=0
DILATION=off
DILATION_PCT=100
DILATION_HOW=
KERNEL=
CHECK=0
EXECS=()
SEEN=" "
RESTART_NODE=
TRACE_OUT=

# flags each subcommand accepts
case "$SUB" in
    run) ALLOWED="--check --nodes --mode --policy --doorbell --storage --cxl-latency-ns --dilation --pin --accel --disk --dataset --put --shm-mb --shm-path --mem-mb --run-dir --detach --console --gdb --no-build -e --boot-timeout --cmd-timeout --append-extra --kernel" ;;
    stop | status) ALLOWED="--check --run-dir" ;;
    attach) ALLOWED="--check --run-dir --console" ;;
    exec) ALLOWED="--check --run-dir -e --cmd-timeout" ;;
    restart) ALLOWED="--check --run-dir --boot-timeout" ;;
    trace) ALLOWED="--check --run-dir --cmd-timeout -o" ;;
esac

is_uint() { [[ $1 =~ ^[0-9]{1,9}$ ]]; }

# dilation_pct D: print the factor D (e.g. 4, 4.5, 0.25) in hundredths,
# or fail unless it is in 0.1..100 with at most two decimals.
dilation_pct() {
    [[ $1 =~ ^([0-9]{1,4})(\.([0-9]{1,2}))?$ ]] || return 1
    local int=$((10#${BASH_REMATCH[1]})) frac=${BASH_REMATCH[3]:-0}
    [[ ${#frac} == 1 ]] && frac="${frac}0"
    local pct=$((int * 100 + 10#$frac))
    ((pct >= 10 && pct <= 10000)) || return 1
    echo "$pct"
}

# int_in VAR NAME VALUE MIN MAX: set VAR to VALUE as a decimal integer or fail.
int_in() {
    local var=$1 name=$2 v=$3 min=$4 max=$5
    is_uint "$v" || die_usage "$name needs an integer in $min..$max, got '$v'"
    v=$((10#$v))
    ((v >= min && v <= max)) || die_usage "$name must be in $min..$max, got $v"
    printf -v "$var" '%s' "$v"
}

# put_add HOST_PATH:GUEST_PATH: check one --put and remember it. The
# guest path is absolute, its names are flatfs names (1..59 bytes, not
# . or ..), and no two --put name the same one.
put_add() {
    [[ $1 == *:* ]] || die_usage "--put needs HOST_PATH:GUEST_PATH, got '$1'"
    local host=${1%%:*} guest=${1#*:} name
    [[ -n $host ]] || die_usage "--put '$1': empty HOST_PATH"
    [[ -e $host ]] || die_usage "--put: no such host file: $host"
    [[ -f $host && -r $host ]] || die_usage "--put: not a readable regular file: $host"
    [[ $guest == /?* && $guest != */ ]] ||
        die_usage "--put '$1': GUEST_PATH must be an absolute path to a file (like /jobs/my.fio)"
    # Names are counted in bytes, as flatfs does.
    local -a names
    local LC_ALL=C
    IFS=/ read -r -a names <<<"${guest#/}"
    for name in "${names[@]}"; do
        [[ -n $name && $name != . && $name != .. ]] ||
            die_usage "--put '$1': GUEST_PATH may not hold an empty, . or .. name"
        ((${#name} <= 59)) || die_usage "--put '$1': the name '$name' is longer than 59 bytes"
    done
    local g
    for g in "${PUT_GUEST[@]}"; do
        [[ $g != "$guest" ]] || die_usage "--put: $guest given twice"
    done
    PUT_HOST+=("$(realpath -- "$host")")
    PUT_GUEST+=("$guest")
}

while [[ $# -gt 0 ]]; do
    arg=$1
    shift
    val=
    has_inline=0
    case "$arg" in
        -h | --help)
            usage
            exit 0
            ;;
        --*=*)
            val=${arg#*=}
            arg=${arg%%=*}
            has_inline=1
            ;;
        -e?*)
            val=${arg#-e}
            arg=-e
            has_inline=1
            ;;
    esac
    case "$arg" in
        --nodes | --mode | --policy | --doorbell | --storage | --cxl-latency-ns | --dilation | --pin | --accel | --disk | --dataset | --put | --shm-mb | --shm-path | --mem-mb | --run-dir | --console | --gdb | -e | \
            --boot-timeout | --cmd-timeout | --append-extra | --kernel | -o)
            if [[ $has_inline == 0 ]]; then
                [[ $# -gt 0 ]] || die_usage "$arg needs a value"
                val=$1
                shift
            fi
            # A value never looks like an option (`--x`, `-x`): an option
            # whose value is missing would swallow the next one
            # (`--append-extra --check`). Only -e's value is checked on its
            # own, and only --append-extra's may be empty.
            if [[ $arg != -e && ($val == --* || $val == -[a-zA-Z]* || ($arg != --append-extra && -z $val)) ]]; then
                die_usage "$arg needs a value, got '${val}'"
            fi
            ;;
        --detach | --no-build | --check)
            [[ $has_inline == 0 ]] || die_usage "$arg takes no value"
            ;;
        -*)
            die_usage "unknown option '$arg'"
            ;;
        *)
            if [[ $SUB == exec ]]; then
                EXECS+=("$arg")
                continue
            fi
            if [[ $SUB == restart && -z $RESTART_NODE ]]; then
                int_in RESTART_NODE "restart's node" "$arg" 1 16
                continue
            fi
            die_usage "unexpected argument '$arg'"
            ;;
    esac
    [[ " $ALLOWED " == *" $arg "* ]] || die_usage "option $arg does not apply to '$SUB'"
    if [[ $arg != -e && $arg != --put && $SEEN == *" $arg "* ]]; then
        die_usage "$arg given twice"
    fi
    SEEN+="$arg "
    case "$arg" in
        --nodes) int_in NODES --nodes "$val" 1 16 ;;
        --accel)
            case "$val" in
                auto | tcg | tcg-multi | kvm) ACCEL_REQ=$val ;;
                *) die_usage "--accel must be auto, tcg, tcg-multi or kvm, got '$val'" ;;
            esac
            ;;
        --policy)
            in_list "$POLICIES" "$val" || die_usage "--policy must be one of $(joined "$POLICIES"), got '$val'"
            POLICY=$val
            ;;
        --mode)
            in_list "$MODES" "$val" || die_usage "--mode must be one of $(joined "$MODES"), got '$val'"
            MODE=$val
            ;;
        --storage)
            case "$val" in
                none | nvme | sata-ssd | sas-raid) STORAGE=$val ;;
                *) die_usage "--storage must be none, nvme, sata-ssd or sas-raid, got '$val'" ;;
            esac
            ;;
        --cxl-latency-ns) int_in CXL_NS --cxl-latency-ns "$val" 0 100000 ;;
        --dilation)
            case "$val" in
                off | auto) DILATION=$val ;;
                *)
                    DILATION_PCT=$(dilation_pct "$val") ||
                        die_usage "--dilation must be off, auto or a factor D in 0.1..100 with at most two decimals (e.g. 4.5), got '$val'"
                    DILATION=$val
                    ;;
            esac
            ;;
        --doorbell)
            case "$val" in
                on | off) DOORBELL=$val ;;
                *) die_usage "--doorbell must be on or off, got '$val'" ;;
            esac
            ;;
        --pin)
            case "$val" in
                auto | off) PIN=$val ;;
                *) die_usage "--pin must be auto or off, got '$val'" ;;
            esac
            ;;
        --disk) DISK=$val ;;
        --dataset)
            [[ $val == apps ]] && val=webserver:32m,fileserver:32m,varmail:32m,kv:32m,infer:32m,ann:32m
            DATASETS=()
            IFS=, read -r -a ds_items <<<"$val"
            ((${#ds_items[@]} > 0)) || die_usage "--dataset needs NAME:SIZE[:SEED][,...] or apps"
            for ds in "${ds_items[@]}"; do
                [[ $ds =~ ^(webserver|fileserver|varmail|kv|infer|ann|search):[0-9]+[kKmMgG]?(:[0-9]+)?$ ]] ||
                    die_usage "--dataset: '$ds' is not NAME:SIZE[:SEED] (NAME: webserver fileserver varmail kv infer ann search; SIZE like 64m; SEED digits)"
                for prev in "${DATASETS[@]}"; do
                    [[ ${prev%%:*} != "${ds%%:*}" ]] || die_usage "--dataset: ${ds%%:*} given twice"
                done
                DATASETS+=("$ds")
            done
            DATASET_SPEC=$val
            ;;
        --put) put_add "$val" ;;
        --shm-path)
            [[ -n $val ]] || die_usage "--shm-path needs a path"
            SHM_USER=$val
            ;;
        --shm-mb)
            is_uint "$val" || die_usage "--shm-mb needs a power of two in 16..$SHM_MB_MAX, got '$val'"
            SHM_MB=$((10#$val))
            ;;
        --mem-mb) int_in MEM_MB --mem-mb "$val" 32 16384 ;;
        --run-dir) RUN_DIR_ARG=$val ;;
        --detach) DETACH=1 ;;
        --console)
            CONSOLE=$val
            CONSOLE_SET=1
            ;;
        --gdb) GDB=$val ;;
        --no-build) BUILD=0 ;;
        --check) CHECK=1 ;;
        -e) EXECS+=("$val") ;;
        --boot-timeout) int_in BOOT_TIMEOUT --boot-timeout "$val" 1 3600 ;;
        --cmd-timeout) int_in CMD_TIMEOUT --cmd-timeout "$val" 1 3600 ;;
        --append-extra) APPEND_EXTRA=$val ;;
        --kernel) KERNEL=$val ;;
        -o) TRACE_OUT=$val ;;
    esac
done

# Cross-checks that need every flag.
((SHM_MB >= 16)) || die_usage "--shm-mb must be at least 16, got $SHM_MB"
(((SHM_MB & (SHM_MB - 1)) == 0)) || die_usage "--shm-mb must be a power of two (QEMU's ivshmem BAR), got $SHM_MB"
((SHM_MB <= SHM_MB_MAX)) ||
    die_usage "--shm-mb $SHM_MB is too large: the maximum is $SHM_MB_MAX, because a node keeps 8 bytes per frame of its pool (with --nodes 1 the whole region) on its kernel heap, which is at least 24 MiB (HEAP_BYTES in kernel/src/mm/mod.rs): $SHM_MB MiB would take $((SHM_MB / 512)) MiB of it"
[[ -n $RUN_DIR_ARG ]] || die_usage "--run-dir needs a value"
RUN_DIR=$(realpath -m -- "$RUN_DIR_ARG")
[[ ! -e $RUN_DIR || -d $RUN_DIR ]] || die_usage "--run-dir $RUN_DIR exists and is not a directory"
[[ $RUN_DIR != *[,\'\"]* ]] || die_usage "--run-dir may not contain a comma or quote (QEMU option syntax): $RUN_DIR"
# A unix socket path must fit in sun_path (108 bytes with the NUL).
((${#RUN_DIR} + 12 <= 107)) ||
    die_usage "--run-dir path is too long for unix sockets (${#RUN_DIR} chars; keep it under 95): $RUN_DIR"

if [[ $SUB == run || $SUB == attach ]]; then
    if [[ $SUB == attach ]]; then
        # The cluster's size is only known from its cluster.env.
        max=16
        if [[ -f $RUN_DIR/cluster.env ]]; then
            max=$(sed -n "s/^NODES='\{0,1\}\([0-9]*\)'\{0,1\}$/\1/p" "$RUN_DIR/cluster.env" | head -n 1)
            max=${max:-16}
        fi
        int_in CONSOLE --console "$CONSOLE" 0 "$max"
    else
        int_in CONSOLE --console "$CONSOLE" 0 "$NODES"
    fi
fi
if [[ -n $GDB ]]; then
    int_in GDB --gdb "$GDB" 0 "$NODES"
fi
[[ -z $DATASET_SPEC || -z $DISK ]] || die_usage "--dataset builds its own disk (RUN/disk-apps.img); drop --disk, or build IMG with mkfs --dataset"
((${#PUT_GUEST[@]} == 0)) || [[ -z $DISK ]] || die_usage "--put builds its own disk (RUN/disk-put.img); drop --disk"
if [[ -n $DISK ]]; then
    [[ -f $DISK ]] || die_usage "--disk $DISK is not an existing file"
    [[ -r $DISK && -w $DISK ]] || die_usage "--disk $DISK must be readable and writable"
    DISK=$(realpath -- "$DISK")
    [[ $DISK != *[,\'\"]* ]] || die_usage "--disk path may not contain a comma or quote (QEMU option syntax): $DISK"
fi
if [[ -n $KERNEL ]]; then
    [[ -f $KERNEL ]] || die_usage "--kernel $KERNEL is not an existing file"
    KERNEL=$(realpath -- "$KERNEL")
    [[ $KERNEL != *[,\'\"]* ]] || die_usage "--kernel path may not contain a comma or quote: $KERNEL"
fi
if [[ -n $APPEND_EXTRA ]]; then
    [[ $APPEND_EXTRA =~ ^[A-Za-z0-9_.,:/=+\ -]+$ ]] ||
        die_usage "--append-extra takes space-separated key=value pairs (letters, digits, _ . , : / = + -), got '$APPEND_EXTRA'"
    # The kernel only logs a key it does not know, so a typo would boot a
    # cluster that silently ignores it: refuse it here, before anything runs.
    read -r -a extra_words <<<"$APPEND_EXTRA"
    for word in "${extra_words[@]}"; do
        [[ $word == ?*=* ]] || die_usage "--append-extra takes key=value pairs, got '$word'"
        key=${word%%=*}
        ! in_list "$LAUNCHER_OPTIONS" "$key" ||
            die_usage "--append-extra: $key= is set by the launcher (use --nodes)"
        in_list "$BOOT_OPTIONS" "$key" ||
            die_usage "--append-extra: unknown boot option '$key' (known: $(joined "$BOOT_OPTIONS"))"
    done
fi
# exec specs: "K: command" with K in 1..N (N from cluster.env for `exec`).
SPEC_NODES=$NODES
if [[ $SUB == exec ]]; then
    SPEC_NODES=16
    if [[ -f $RUN_DIR/cluster.env ]]; then
        SPEC_NODES=$(sed -n "s/^NODES='\{0,1\}\([0-9]*\)'\{0,1\}$/\1/p" "$RUN_DIR/cluster.env" | head -n 1)
        SPEC_NODES=${SPEC_NODES:-16}
    fi
    [[ ${#EXECS[@]} -gt 0 ]] || die_usage "exec needs at least one -e 'K: command'"
fi
for spec in ${EXECS[@]+"${EXECS[@]}"}; do
    # A command is one shell line: a newline would start another command (and
    # onecopy-ctl refuses it), other control characters are line editing.
    if [[ $spec == *[[:cntrl:]]* ]]; then
        die_usage "-e 'K: command' is one line without control characters (newline, CR, tab, ESC, DEL...), got ${spec@Q}"
    fi
    if [[ ! $spec =~ ^[[:space:]]*([0-9]{1,3})[[:space:]]*:[[:space:]]*([^[:space:]].*)$ ]]; then
        die_usage "-e expects 'K: command' (e.g. -e '1: ls /'), got '$spec'"
    fi
    k=$((10#${BASH_REMATCH[1]}))
    ((k >= 1 && k <= SPEC_NODES)) || die_usage "-e '$spec': node $k is not in 1..$SPEC_NODES"
done
if [[ $SUB == trace && -z $TRACE_OUT ]]; then
    die_usage "trace needs -o FILE.json"
fi
if [[ $SUB == restart && -z $RESTART_NODE ]]; then
    die_usage "restart needs the node to boot again: ./qemu-run.sh restart [--run-dir DIR] K"
fi
if ((CHECK)); then
    echo "$PROG: flags ok"
    exit 0
fi

# ------------------------------------------------------------------ helpers
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
[[ $TARGET_DIR == /* ]] || TARGET_DIR="$ROOT/$TARGET_DIR"
MKFS="$TARGET_DIR/release/mkfs"
INSPECT="$TARGET_DIR/release/inspect"

# The mount error of an image in an on-disk format this build does not read
# (e.g. version 1, before data checksums), or nothing. Needs inspect (built
# with mkfs); without it the kernel's mount reports the problem at boot.
stale_format() {
    [[ -x $INSPECT ]] || return 0
    "$INSPECT" "$1" 2>&1 >/dev/null | grep -o 'unsupported format version.*' || true
}
IVSERVER="$TARGET_DIR/release/onecopy-ivshmem-server"
[[ -n $KERNEL ]] || KERNEL="$TARGET_DIR/x86_64-unknown-none/release/onecopy-kernel"

find_ctl() {
    if [[ -n ${ONECOPY_CTL:-} ]]; then
        [[ -x $ONECOPY_CTL ]] || die "ONECOPY_CTL=$ONECOPY_CTL is not executable"
        CTL=$ONECOPY_CTL
        return
    fi
    if [[ $BUILD == 1 && -x $TARGET_DIR/release/onecopy-ctl ]]; then
        CTL=$TARGET_DIR/release/onecopy-ctl # just built
        return
    fi
    local c best=
    for c in "$TARGET_DIR/release/onecopy-ctl" "$TARGET_DIR/debug/onecopy-ctl"; do
        if [[ -x $c && (-z $best || $c -nt $best) ]]; then best=$c; fi
    done
    [[ -n $best ]] || die "onecopy-ctl not built; run: cargo build --release -p onecopy-tests --bin onecopy-ctl (or drop --no-build)"
    CTL=$best
}

now_ms() { date +%s%3N; }

# pid_alive PID: the process exists and is not a zombie.
pid_alive() {
    local stat
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z && ${stat:0:1} != X ]]
}

# pid_ours PID: the process belongs to this run dir (guards against pid reuse).
pid_ours() {
    pid_alive "$1" || return 1
    tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$RUN_DIR/"
}

# read_pid FILE: the number in FILE, or nothing (never fails).
read_pid() {
    { tr -dc '0-9' <"$1"; } 2>/dev/null || true
}

# Pids (QEMU and wrappers) of this run dir that are still running.
running_pids() {
    local f p
    for f in "$RUN_DIR"/*.pid "$RUN_DIR"/*.pgid; do
        [[ -f $f ]] || continue
        p=$(read_pid "$f")
        if [[ -n $p ]] && pid_ours "$p"; then echo "$p"; fi
    done
}

# fd_holders LINK...: pids (sorted) of the processes with an open file
# descriptor whose /proc link reads exactly one of LINK (a path, or
# socket:[INODE]). Never fails.
fd_holders() {
    find /proc/[0-9]*/fd -maxdepth 1 -type l -printf '%h\t%l\n' 2>/dev/null |
        awk -F '\t' 'BEGIN { for (i = 1; i < ARGC; i++) want[ARGV[i]] = 1; ARGC = 1 }
            ($2 in want) { split($1, p, "/"); print p[3] }' "$@" | sort -un || true
}

# describe_pids PID...: "pid 12 (qemu-system-x86), pid 34 (bash)".
describe_pids() {
    local p out=
    for p in "$@"; do
        out+="${out:+, }pid $p ($(cat "/proc/$p/comm" 2>/dev/null || echo gone))"
    done
    printf '%s' "$out"
}

# port_users PORT: the processes holding a TCP socket on 127.0.0.1:PORT or on
# a wildcard address (what QEMU's `-gdb tcp:127.0.0.1:PORT` cannot bind
# beside), as describe_pids text, "an unknown process" if the socket's owner
# is not visible, nothing if the port is free. Reads /proc/net/tcp{,6}: it
# never connects (a connection to another QEMU's gdb stub pauses that VM).
port_users() {
    local hex inodes pids=() i
    printf -v hex '%04X' "$1"
    inodes=$(awk -v hex="$hex" 'FNR > 1 {
            n = split($2, a, ":")
            if (a[n] != hex || $4 == "06") next  # another port, or TIME_WAIT
            if (a[1] == "0100007F" || a[1] == "00000000" ||
                a[1] == "00000000000000000000000000000000" ||
                a[1] == "0000000000000000FFFF00000100007F" ||
                a[1] == "0000000000000000FFFF000000000000") print $10
        }' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u) || true
    [[ -n $inodes ]] || return 0
    for i in $inodes; do pids+=("socket:[$i]"); done
    mapfile -t pids < <(fd_holders "${pids[@]}")
    if [[ ${#pids[@]} -gt 0 ]]; then describe_pids "${pids[@]}"; else printf 'an unknown process'; fi
}

# check_gdb_port: refuse --gdb K when 127.0.0.1:1234+K is taken (QEMU would
# fail to start after the launcher said the stub listens there).
check_gdb_port() {
    [[ -n $GDB ]] || return 0
    local port=$((1234 + GDB)) users
    users=$(port_users "$port")
    [[ -z $users ]] ||
        refuse "--gdb $GDB: 127.0.0.1:$port (the gdb stub's port, 1234+K) is already in use by $users; stop it or debug another instance"
}

# exit_meaning CODE: what a QEMU exit status (RUN/NAME.exit) means.
exit_meaning() {
    local c=$1 sig
    case "$c" in
        0) echo "QEMU quit: SIGTERM from stop, or a QEMU quit" ;;
        1) echo "clean shutdown, or a QEMU error: see its .stderr" ;;
        3) echo "kernel panic or CPU exception: see its .log" ;;
        135) echo "SIGBUS: the shared region shrank or vanished" ;;
        *)
            if ((c > 128 && c < 192)); then
                sig=$(kill -l $((c - 128)) 2>/dev/null) || sig=
                echo "killed by ${sig:+SIG$sig, }signal $((c - 128))"
            else
                echo "QEMU error: see its .stderr"
            fi
            ;;
    esac
}

env_get() { # env_get KEY: value from RUN/cluster.env
    [[ -f $RUN_DIR/cluster.env ]] || return 0
    sed -n "s/^$1='\{0,1\}\([^']*\)'\{0,1\}$/\1/p" "$RUN_DIR/cluster.env" | head -n 1
}

# The launcher's hold on RUN/cluster.lock (a file descriptor number), once it
# has it; see step 1 of a launch.
LOCK_FD=

# cluster_pids: every live process of the cluster of RUN_DIR, sorted: those
# of its pid files and, unless this script holds the lock itself (a
# launcher cleaning up after itself), every process holding RUN/cluster.lock:
# a launcher still running, every instance's wrapper and QEMU.
cluster_pids() {
    {
        running_pids
        if [[ -z $LOCK_FD && -e $RUN_DIR/cluster.lock ]]; then fd_holders "$RUN_DIR/cluster.lock"; fi
    } | sort -un
}

# shm_of PID...: the shared regions (/dev/shm/onecopy-*) these processes'
# command lines name (a QEMU's memory backend, the ivshmem server's
# --shm-path).
shm_of() {
    local p
    for p in "$@"; do
        tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null |
            awk 'prev == "--shm-path" && /^\/dev\/shm\/onecopy-/ { print }
                match($0, /^memory-backend-file,.*mem-path=\/dev\/shm\/onecopy-[^,]*/) {
                    v = substr($0, 1, RLENGTH); sub(/^.*mem-path=/, "", v); print v
                }
                { prev = $0 }'
    done | sort -u || true
}

# Stop every process of the cluster of RUN_DIR; remove its shared regions
# (the one cluster.env names, if not removed yet, and any one its processes
# map), sockets, pid files and half-written files. Logs stay.
stop_cluster() {
    local quiet=${1:-0} pids p f g i shm user_shm wrappers=" " regions=()
    pids=$(cluster_pids)
    if [[ -n $pids ]]; then
        [[ $quiet == 1 ]] || info "stopping cluster in $RUN_DIR"
        # shellcheck disable=SC2086 # one pid per word
        mapfile -t regions < <(shm_of $pids)
        # Never the user's own region (--shm-path), whatever its name.
        if [[ $(env_get SHM_OWNED) == 0 && -n $(env_get SHM_PATH) ]]; then
            user_shm=$(env_get SHM_PATH)
            for i in "${!regions[@]}"; do
                [[ ${regions[$i]} != "$user_shm" ]] || unset 'regions[i]'
            done
        fi
        # SIGTERM to all but the wrappers: QEMU quits (its wrapper then
        # records the exit status), a launcher still running stops its part.
        # Whole process groups and whatever is left get SIGKILL after 5 s.
        for f in "$RUN_DIR"/*.pgid; do
            [[ -f $f ]] && wrappers+="$(read_pid "$f") "
        done
        for p in $pids; do
            [[ $wrappers == *" $p "* ]] || kill -TERM "$p" 2>/dev/null || true
        done
        for ((i = 0; i < 50; i++)); do
            [[ -n $(cluster_pids) ]] || break
            sleep 0.1
        done
        if [[ -n $(cluster_pids) ]]; then
            [[ $quiet == 1 ]] || info "some processes did not stop within 5 s: SIGKILL"
            for f in "$RUN_DIR"/*.pgid; do
                [[ -f $f ]] || continue
                g=$(read_pid "$f")
                if [[ -n $g ]] && pid_ours "$g"; then kill -KILL -- "-$g" 2>/dev/null || true; fi
            done
            for p in $(cluster_pids); do kill -KILL "$p" 2>/dev/null || true; done
            for ((i = 0; i < 50; i++)); do
                [[ -n $(cluster_pids) ]] || break
                sleep 0.1
            done
        fi
        if [[ -n $(cluster_pids) ]]; then
            echo "$PROG: warning: could not stop pids: $(cluster_pids | tr '\n' ' ')" >&2
        fi
    elif [[ $quiet != 1 ]]; then
        info "no cluster running in $RUN_DIR"
    fi
    shm=$(env_get SHM_PATH)
    [[ -n $shm && $(env_get SHM_OWNED) == 1 ]] || shm=
    for shm in $shm ${regions[@]+"${regions[@]}"}; do
        if [[ -e $shm ]]; then
            rm -f -- "$shm"
            [[ $quiet == 1 ]] || info "removed shared region $shm"
        fi
    done
    rm -f -- "$RUN_DIR"/*.sock "$RUN_DIR"/*.pid "$RUN_DIR"/*.pgid "$RUN_DIR"/*.pid.tmp \
        "$RUN_DIR/cluster.env.tmp" "$RUN_DIR/disk.img.tmp"
    if [[ -f $RUN_DIR/cluster.env ]]; then
        sed -i -e "s/^STATE=.*/STATE='stopped'/" -e "s/^SHM_OWNED=.*/SHM_OWNED='0'/" "$RUN_DIR/cluster.env" 2>/dev/null || true
    fi
}

# Prints the tail of every log of the run dir.
print_log_tails() {
    local f
    for f in "$RUN_DIR"/dir.log "$RUN_DIR"/node*.log "$RUN_DIR"/*.stderr; do
        [[ -f $f ]] || continue
        [[ $f != *.stderr || -s $f ]] || continue
        echo "----- tail of $f -----" >&2
        tail -n 20 "$f" | tr -d '\r' >&2
        echo >&2
    done
}

# CPU placement: the directory's vCPU gets CPU 0 to itself (its dedicated
# core); nodes share the rest.
HOST_CPUS=$(nproc 2>/dev/null || echo 1)
pin_for() { # pin_for NAME -> "taskset -c LIST" or nothing
    if [[ $PIN == auto && $HOST_CPUS -ge 2 ]] && command -v taskset >/dev/null; then
        if [[ $1 == dir ]]; then echo "taskset -c 0"; else echo "taskset -c 1-$((HOST_CPUS - 1))"; fi
    fi
}

# launch NAME CMDLINE [extra QEMU args...]: starts one instance in its own
# session under a small wrapper that records QEMU's pid and exit status.
# Multi-threaded TCG sets its "parallel" flag (host atomics for lock-prefixed
# instructions) only for a VM that can have more than one vCPU.
launch() {
    local name=$1 cmdline=$2 i pin accel_args=(-accel "$ACCEL" -smp 1)
    shift 2
    # shellcheck disable=SC2054 # commas are QEMU option syntax
    [[ $ACCEL != tcg-multi ]] || accel_args=(-accel tcg,thread=multi -smp 1,maxcpus=2)
    read -r -a pin <<<"$(pin_for "$name")"
    # shellcheck disable=SC2054 # commas are QEMU option syntax
    local qemu=("${pin[@]}" qemu-system-x86_64 -name "onecopy-$name"
        -machine pc -cpu max -m "${MEM_MB}M" "${accel_args[@]}"
        -display none -no-reboot -monitor none -nodefaults
        -chardev "socket,id=ser0,path=$RUN_DIR/$name.sock,server=on,wait=off,logfile=$RUN_DIR/$name.log"
        -serial chardev:ser0
        "${IVSHMEM_ARGS[@]}"
        -device isa-debug-exit,iobase=0xf4,iosize=0x04
        -kernel "$KERNEL" -append "$cmdline" "$@")
    # shellcheck disable=SC2016 # expanded by the wrapper, not here
    setsid bash -c '
        base=$0
        echo "$$" >"$base.pgid"
        "$@" </dev/null >"$base.stderr" 2>&1 &
        q=$!
        echo "$q" >"$base.pid.tmp" && mv -f "$base.pid.tmp" "$base.pid"
        wait "$q"
        rc=$?
        echo "$rc" >"$base.exit"
        # A signal leaves no word of QEMU: say it where its messages go.
        if [ "$rc" -eq 135 ]; then
            echo "qemu-run.sh: QEMU died of SIGBUS (exit status 135): the shared region shrank or vanished under it" >>"$base.stderr"
        elif [ "$rc" -gt 128 ]; then
            echo "qemu-run.sh: QEMU was killed by signal $((rc - 128)) (SIG$(kill -l $((rc - 128)))) (exit status $rc)" >>"$base.stderr"
        fi
    ' "$RUN_DIR/$name" "${qemu[@]}" </dev/null >/dev/null 2>&1 &
    for ((i = 0; i < 500; i++)); do
        [[ -f $RUN_DIR/$name.pid ]] && return 0
        sleep 0.01
    done
    die "$name did not start (no $RUN_DIR/$name.pid after 5 s)"
}

# set_ivshmem_args: IVSHMEM_ARGS for DOORBELL, RUN_DIR, SHM_PATH, SHM_MB.
IVSHMEM_VECTORS=4
set_ivshmem_args() {
    # shellcheck disable=SC2054 # commas are QEMU option syntax
    if [[ $DOORBELL == on ]]; then
        IVSHMEM_ARGS=(-chardev "socket,path=$RUN_DIR/ivshmem.sock,id=iv"
            -device "ivshmem-doorbell,chardev=iv,vectors=$IVSHMEM_VECTORS")
    else
        IVSHMEM_ARGS=(-object "memory-backend-file,id=shm,share=on,mem-path=$SHM_PATH,size=${SHM_MB}M"
            -device ivshmem-plain,memdev=shm)
    fi
}

# restart_node K: boot a new instance of node K into the running cluster of
# RUN_DIR (after its QEMU died or was killed), with what cluster.env says
# was launched; it inherits RUN/cluster.lock like the others. The old log
# is kept as nodeK.log.<epoch ms>. Waits until it joined.
restart_node() {
    local k=$1 name=node$1 p hold start old
    [[ -f $RUN_DIR/cluster.env ]] || die "no cluster in $RUN_DIR (no cluster.env)"
    [[ $(env_get STATE) == running ]] || die "the cluster in $RUN_DIR is not running (state $(env_get STATE))"
    NODES=$(env_get NODES)
    ((k >= 1 && k <= NODES)) || die_usage "restart: node $k is not in 1..$NODES"
    p=$(read_pid "$RUN_DIR/dir.pid")
    if [[ -z $p ]] || ! pid_ours "$p"; then
        die "the directory of $RUN_DIR is not running: restart the whole cluster instead"
    fi
    p=$(read_pid "$RUN_DIR/$name.pid")
    if [[ -n $p ]] && pid_ours "$p"; then
        die "node $k is still running (pid $p): a restart boots a replacement for an instance that died"
    fi
    ACCEL=$(env_get ACCEL) SHM_PATH=$(env_get SHM_PATH) SHM_MB=$(env_get SHM_MB)
    MEM_MB=$(env_get MEM_MB) MODE=$(env_get MODE) DOORBELL=$(env_get DOORBELL)
    STORAGE=$(env_get STORAGE) CXL_NS=$(env_get CXL_NS) KERNEL=$(env_get KERNEL)
    APPEND_EXTRA=$(env_get APPEND_EXTRA) DILATION_PCT=$(env_get DILATION_PCT)
    [[ $MODE != net ]] || die "restart: net mode is not supported (QEMU 7.2's stream netdev does not take a new client on node $k's link)"
    [[ -e $SHM_PATH ]] || die "the shared region $SHM_PATH is gone"
    [[ -f $KERNEL ]] || die "kernel not found: $KERNEL"
    if [[ $DOORBELL == on && ! -S $RUN_DIR/ivshmem.sock ]]; then
        die "the ivshmem server of $RUN_DIR is not running (no ivshmem.sock)"
    fi
    set_ivshmem_args
    old="$RUN_DIR/$name.log.$(now_ms)"
    [[ ! -f $RUN_DIR/$name.log ]] || mv -f -- "$RUN_DIR/$name.log" "$old"
    [[ ! -f $RUN_DIR/$name.stderr ]] || mv -f -- "$RUN_DIR/$name.stderr" "$old.stderr"
    rm -f -- "$RUN_DIR/$name.pid" "$RUN_DIR/$name.pgid" "$RUN_DIR/$name.exit" "$RUN_DIR/$name.sock"
    # The new instance holds RUN/cluster.lock like the others (inherited).
    exec {hold}>>"$RUN_DIR/cluster.lock" || die "cannot open $RUN_DIR/cluster.lock"
    local extra=" mode=$MODE storage=$STORAGE cxl_ns=$CXL_NS"
    [[ ${DILATION_PCT:-100} == 100 ]] || extra+=" dilation_pct=$DILATION_PCT"
    [[ $DOORBELL != on ]] || extra+=" doorbell=1"
    extra+="${APPEND_EXTRA:+ $APPEND_EXTRA}"
    start=$(now_ms)
    launch "$name" "role=node id=$k nodes=$NODES$extra"
    exec {hold}>&-
    PIDS=$(for n in dir $(seq -f 'node%g' 1 "$NODES"); do read_pid "$RUN_DIR/$n.pid"; echo; done | grep . | tr '\n' ' ' | sed 's/ $//')
    sed -i -e "s/^PIDS=.*/PIDS='$PIDS'/" "$RUN_DIR/cluster.env"
    find_ctl
    if "$CTL" wait-ready --run-dir "$RUN_DIR" --nodes "$NODES" \
        --timeout-ms "$((BOOT_TIMEOUT * 1000))" --since-ms "$start" >"$RUN_DIR/ready.out"; then
        info "node $k restarted (pid $(read_pid "$RUN_DIR/$name.pid")) and joined in $(tr -dc '0-9' <"$RUN_DIR/ready.out") ms${old:+; its previous log is $old}"
    else
        die "node $k did not join within $BOOT_TIMEOUT s (see $RUN_DIR/$name.log)"
    fi
}

# kvm_usable: the CPU has vmx/svm and /dev/kvm opens.
kvm_usable() {
    grep -qwE 'vmx|svm' /proc/cpuinfo && (exec 3<>/dev/kvm) 2>/dev/null
}

# check_mode_accel: a mode whose instances update shared words by CAS
# (daxfs) needs lock-prefixed instructions atomic across instances, which
# single-threaded TCG does not give (bench atomics: 4.6% lost updates).
check_mode_accel() {
    [[ $MODE == daxfs ]] || return 0
    case "$ACCEL_REQ" in
        tcg-multi | kvm) ;;
        auto) kvm_usable || refuse "--mode daxfs needs atomics across instances: use --accel tcg-multi (this host has no usable KVM)" ;;
        *) refuse "--mode daxfs needs atomics across instances, which --accel $ACCEL_REQ does not give: use --accel tcg-multi or kvm" ;;
    esac
}

# ------------------------------------------------------------------ subcommands
case "$SUB" in
    stop)
        [[ -d $RUN_DIR ]] || {
            info "no cluster running in $RUN_DIR (no such directory)"
            exit 0
        }
        stop_cluster 0
        exit 0
        ;;
    status)
        if [[ ! -f $RUN_DIR/cluster.env ]]; then
            info "no cluster in $RUN_DIR"
            exit 1
        fi
        n=$(env_get NODES)
        running=0
        total=0
        for name in dir $(seq -f 'node%g' 1 "${n:-0}"); do
            total=$((total + 1))
            p=$(read_pid "$RUN_DIR/$name.pid")
            code=$(read_pid "$RUN_DIR/$name.exit")
            if [[ -n $p ]] && pid_ours "$p"; then
                info "$name: running (pid $p)"
                running=$((running + 1))
            elif [[ -n $code ]]; then
                info "$name: exited with code $code ($(exit_meaning "$code"))"
            elif [[ -n $p ]]; then
                info "$name: gone (pid $p ended and no exit code was recorded)"
            else
                info "$name: not running"
            fi
        done
        state=$(env_get STATE)
        shm=$(env_get SHM_PATH)
        shm_mb=$(env_get SHM_MB)
        shm_ok=1
        # Instances die of SIGBUS only when they touch the missing part: the
        # region itself tells at once.
        if [[ $state != stopped && -n $shm ]]; then
            if [[ ! -e $shm ]]; then
                shm_ok=0
                info "shared region $shm: missing (removed under the cluster; an instance dies of SIGBUS on its next access)"
            else
                size=$(stat -c %s -- "$shm" 2>/dev/null) || size=0
                if [[ $shm_mb =~ ^[0-9]+$ ]] && ((size < shm_mb * 1048576)); then
                    shm_ok=0
                    info "shared region $shm: $size bytes instead of $((shm_mb * 1048576)) ($shm_mb MiB): it shrank under the cluster; an instance dies of SIGBUS on its next access beyond the end"
                fi
            fi
        fi
        if ((running == total && shm_ok == 1)); then
            what=running
        elif ((running > 0)); then
            what="degraded ($running of $total instances running)"
        elif [[ $state == stopped ]]; then
            what=stopped
        else
            what="down (no instance running)"
        fi
        info "state $what, accel $(env_get ACCEL), mode $(env_get MODE), policy $(env_get POLICY), shared region $shm ($shm_mb MiB), disk $(env_get DISK)"
        if [[ $what == running ]]; then exit 0; else exit 1; fi
        ;;
    restart)
        restart_node "$RESTART_NODE"
        exit 0
        ;;
    trace)
        find_ctl
        [[ -n $(running_pids) ]] || die "no cluster running in $RUN_DIR (start one with ./qemu-run.sh --detach --run-dir $RUN_DIR)"
        exec "$CTL" trace --run-dir "$RUN_DIR" --timeout-ms "$((CMD_TIMEOUT * 1000))" -o "$TRACE_OUT"
        ;;
    attach | exec)
        find_ctl
        [[ -n $(running_pids) ]] || die "no cluster running in $RUN_DIR (start one with ./qemu-run.sh --detach --run-dir $RUN_DIR)"
        if [[ $SUB == exec ]]; then
            exec "$CTL" exec --run-dir "$RUN_DIR" --timeout-ms "$((CMD_TIMEOUT * 1000))" "${EXECS[@]}"
        fi
        [[ -t 0 ]] || die "attach needs a terminal on stdin"
        saved=$(stty -g)
        trap 'stty "$saved" 2>/dev/null || stty sane' EXIT
        stty raw -echo
        "$CTL" attach --run-dir "$RUN_DIR" --node "$CONSOLE" || true
        exit 0
        ;;
esac

# ------------------------------------------------------------------ run
# From here on nothing is left half-started: the EXIT trap stops whatever was
# launched unless the cluster is meant to stay (--detach).
LAUNCHED=0
KEEP=0
STTY_SAVED=
CHILD=
# Long-running helpers run in the background and are waited for, so that a
# signal sent to this script (not only a terminal's Ctrl-C) runs the trap at
# once instead of after the helper finishes.
run_bg() {
    local rc=0
    "$@" {LOCK_FD}>&- &
    CHILD=$!
    wait "$CHILD" || rc=$?
    CHILD=
    return "$rc"
}
# shellcheck disable=SC2317 # invoked by trap
on_exit() {
    local rc=$?
    trap '' INT TERM HUP PIPE
    trap - EXIT
    if [[ -n $CHILD ]]; then
        kill -TERM "$CHILD" 2>/dev/null || true
        wait "$CHILD" 2>/dev/null || true
    fi
    if [[ -n $STTY_SAVED ]]; then stty "$STTY_SAVED" 2>/dev/null || stty sane 2>/dev/null || true; fi
    if [[ $LAUNCHED == 1 && $KEEP == 0 ]]; then
        stop_cluster 1
        # even if cluster.env never named it; never a --shm-path region
        [[ -z ${SHM_PATH:-} || ${SHM_OWNED:-1} != 1 ]] || rm -f -- "$SHM_PATH"
        info "cluster stopped (logs in $RUN_DIR)"
    fi
    exit "$rc"
}
# shellcheck disable=SC2317 # invoked by trap
on_signal() {
    trap '' PIPE
    { echo && echo "$PROG: interrupted by SIG$1"; } >&2 2>/dev/null || true
    KEEP=0
    exit 130
}
trap on_exit EXIT
for sig in INT TERM HUP PIPE; do
    # shellcheck disable=SC2064 # expand sig now
    trap "on_signal $sig" "$sig"
done

# 0. what can be checked before anything is built or started
check_gdb_port
check_mode_accel

# 1. one cluster per run dir. This launcher takes flock(1) on RUN/cluster.lock
# and every instance's wrapper and QEMU inherit the lock, so it is held for
# the cluster's whole lifetime (also after --detach) and the kernel releases
# it when the last of them exits. `stop` finds every process of the cluster
# through it. The helpers (setup, cargo, mkfs, onecopy-ctl) run without it.
command -v flock >/dev/null || die "flock not found (util-linux)"
mkdir -p -- "$RUN_DIR" || die "cannot create the run dir $RUN_DIR"
exec {LOCK_FD}>>"$RUN_DIR/cluster.lock" || die "cannot open $RUN_DIR/cluster.lock"
lock_rc=0
flock -n -E 99 "$LOCK_FD" || lock_rc=$? # 99: held by another process
if ((lock_rc != 0 && lock_rc != 99)); then
    die "cannot lock $RUN_DIR/cluster.lock (flock exit status $lock_rc; see above)"
fi
if ((lock_rc == 99)); then
    exec {LOCK_FD}>&-
    LOCK_FD=
    qemus=$(running_pids | sort -un | tr '\n' ' ')
    if [[ -n $qemus ]]; then
        refuse "a cluster is already running in $RUN_DIR (pids ${qemus% }): one cluster per run dir; stop it with ./qemu-run.sh stop --run-dir $RUN_DIR, or use another --run-dir"
    fi
    # shellcheck disable=SC2046 # one pid per word
    refuse "a cluster is already being launched in $RUN_DIR by $(describe_pids $(cluster_pids)): one cluster per run dir; stop it with ./qemu-run.sh stop --run-dir $RUN_DIR, or use another --run-dir"
fi
# A cluster of an earlier qemu-run.sh that took no lock.
if [[ -n $(running_pids) ]]; then
    refuse "a cluster is already running in $RUN_DIR (pids $(running_pids | sort -un | tr '\n' ' ' | sed 's/ $//')): one cluster per run dir; stop it with ./qemu-run.sh stop --run-dir $RUN_DIR, or use another --run-dir"
fi

# 2. dependencies
if [[ $BUILD == 1 ]]; then
    "$ROOT/tools/setup.sh" --quiet {LOCK_FD}>&- || die "setup failed (see above)"
else
    "$ROOT/tools/setup.sh" --quiet --qemu-only {LOCK_FD}>&- || die "setup failed (see above)"
fi

# 3. build
if [[ $BUILD == 1 ]]; then
    info "build: kernel (x86_64-unknown-none) + host tools, release..."
    (
        cd "$ROOT"
        cargo build --quiet --release -p onecopy-kernel --target x86_64-unknown-none &&
            cargo build --quiet --release -p flatfs --bins &&
            cargo build --quiet --release -p onecopy-ivshmem-server &&
            cargo build --quiet --release -p onecopy-tests --bin onecopy-ctl --bin onecopy-calibrate
    ) {LOCK_FD}>&- || die "build failed (see above)"
fi
[[ -f $KERNEL ]] || die "kernel not found: $KERNEL (build it with: cargo build --release -p onecopy-kernel --target x86_64-unknown-none, or drop --no-build)"
find_ctl
if [[ ! -x $IVSERVER ]]; then
    die "ivshmem server not found: $IVSERVER (it is also the fencer of failed nodes; build it with: cargo build --release -p onecopy-ivshmem-server, or drop --no-build)"
fi

# 4. run dir, disk
# Leftovers of an earlier cluster: its shared region (if it was ours) and state.
stop_cluster 1
rm -f -- "$RUN_DIR"/*.log "$RUN_DIR"/*.exit "$RUN_DIR"/*.stderr "$RUN_DIR/cluster.env" "$RUN_DIR/ready.out"

DISK_ARG=$DISK
if ((${#PUT_GUEST[@]} > 0)); then
    # The sample tree, the --put files over it, and the datasets: a fresh
    # disk every run (the files may have changed).
    [[ -x $MKFS ]] || die "mkfs not found: $MKFS (build it with: cargo build --release -p flatfs --bins, or drop --no-build)"
    stage="$RUN_DIR/put-root"
    rm -rf -- "$stage"
    mkdir -p -- "$stage" || die "cannot create $stage"
    [[ -d $ROOT/tools/sample ]] && cp -R -- "$ROOT/tools/sample/." "$stage/"
    for i in "${!PUT_GUEST[@]}"; do
        dest="$stage${PUT_GUEST[$i]}"
        if ! mkdir -p -- "$(dirname -- "$dest")" 2>/dev/null || [[ -d $dest ]] || ! cp -- "${PUT_HOST[$i]}" "$dest"; then
            rm -rf -- "$stage"
            die "--put ${PUT_HOST[$i]}:${PUT_GUEST[$i]}: the path clashes with the disk's tree (a file where a directory must be, or the reverse)"
        fi
    done
    # Room for the files on top of the usual 64 MiB.
    put_mb=$(du -sm --apparent-size -- "$stage" | cut -f1)
    mkfs_args=(--size-mb $((64 + 2 * put_mb)) --from "$stage")
    for ds in "${DATASETS[@]}"; do mkfs_args+=(--dataset "$ds"); done
    DISK="$RUN_DIR/disk-put.img"
    "$MKFS" "${mkfs_args[@]}" "$DISK.tmp" >"$RUN_DIR/mkfs.out" 2>&1 {LOCK_FD}>&- || {
        rm -rf -- "$stage"
        die "mkfs --put failed: $(tail -n 1 "$RUN_DIR/mkfs.out")"
    }
    rm -rf -- "$stage"
    mv -f -- "$DISK.tmp" "$DISK"
    info "disk: created $DISK with ${#PUT_GUEST[@]} --put file(s) ($(cat "$RUN_DIR/mkfs.out"))"
    DISK_ARG=$DISK
fi
if [[ -n $DATASET_SPEC && -z $DISK ]]; then
    # Datasets go into their own image, rebuilt when the spec changes.
    DISK="$RUN_DIR/disk-apps.img"
    if [[ ! -f $DISK || $(cat "$DISK.spec" 2>/dev/null) != "$DATASET_SPEC" || -n $(stale_format "$DISK") ]]; then
        [[ -x $MKFS ]] || die "mkfs not found: $MKFS (build it with: cargo build --release -p flatfs --bins, or drop --no-build)"
        mkfs_args=(--size-mb 64)
        [[ -d $ROOT/tools/sample ]] && mkfs_args+=(--from "$ROOT/tools/sample")
        for ds in "${DATASETS[@]}"; do mkfs_args+=(--dataset "$ds"); done
        "$MKFS" "${mkfs_args[@]}" "$DISK.tmp" >"$RUN_DIR/mkfs.out" 2>&1 {LOCK_FD}>&- ||
            die "mkfs --dataset failed: $(tail -n 1 "$RUN_DIR/mkfs.out")"
        mv -f -- "$DISK.tmp" "$DISK"
        printf '%s\n' "$DATASET_SPEC" >"$DISK.spec"
        info "disk: created $DISK with datasets $DATASET_SPEC ($(cat "$RUN_DIR/mkfs.out"))"
    else
        info "disk: using existing $DISK (datasets $DATASET_SPEC)"
    fi
    DISK_ARG=$DISK
fi
if [[ -z $DISK ]]; then
    DISK="$RUN_DIR/disk.img"
    stale=
    [[ -f $DISK ]] && stale=$(stale_format "$DISK")
    if [[ -n $stale ]]; then
        mv -f -- "$DISK" "$DISK.old"
        info "disk: $DISK: $stale; kept it as $DISK.old, creating a new one"
    fi
    if [[ -f $DISK ]]; then
        info "disk: using existing $DISK"
    else
        [[ -x $MKFS ]] || die "mkfs not found: $MKFS (build it with: cargo build --release -p flatfs --bins, or drop --no-build)"
        if [[ -d $ROOT/tools/sample ]]; then
            "$MKFS" --size-mb 64 --from "$ROOT/tools/sample" "$DISK.tmp" >/dev/null {LOCK_FD}>&- ||
                die "mkfs failed for $DISK"
            info "disk: created $DISK (64 MiB) from tools/sample"
        else
            "$MKFS" --size-mb 64 "$DISK.tmp" >/dev/null {LOCK_FD}>&- || die "mkfs failed for $DISK"
            info "disk: created empty $DISK (64 MiB; tools/sample not found)"
        fi
        mv -f -- "$DISK.tmp" "$DISK"
    fi
fi

if [[ -n $DISK_ARG ]]; then
    stale=$(stale_format "$DISK")
    [[ -z $stale ]] || die "--disk $DISK: $stale (e.g. $MKFS --size-mb 64 --from DIR $DISK)"
fi

# pct_str PCT: hundredths as a decimal factor (450 -> 4.50).
pct_str() { printf '%d.%02d' "$(($1 / 100))" "$(($1 % 100))"; }

# throttle BPS IOPS: QEMU's -drive throttling for rates divided by the
# dilation.
throttle() {
    echo ",throttling.bps-total=$(($1 * 100 / DILATION_PCT)),throttling.iops-total=$(($2 * 100 / DILATION_PCT))"
}

# calibrate_dilation: set DILATION_PCT to the guest's time per round of
# fabric::calibrate over the host's: one 1-node cluster (the same kernel,
# accelerator and doorbells, no dilation) runs `bench calibrate`, and
# onecopy-calibrate runs the same code natively.
calibrate_dilation() {
    local tool=$TARGET_DIR/release/onecopy-calibrate dir=$RUN_DIR/calibrate out host guest pct
    [[ -x $tool ]] || die "onecopy-calibrate not found: $tool (build it with: cargo build --release -p onecopy-tests --bin onecopy-calibrate, or drop --no-build)"
    info "dilation: calibrating (a 1-node boot runs bench calibrate; the host runs onecopy-calibrate)..."
    out=$("$tool" {LOCK_FD}>&-) || die "onecopy-calibrate failed: $out"
    host=$(sed -n 's/^calibrate: .*ns_per_round=\([0-9]*\).*/\1/p' <<<"$out" | head -n 1)
    local args=(--no-build --nodes 1 --mode private --doorbell "$DOORBELL" --accel "$ACCEL"
        --pin "$PIN" --mem-mb "$MEM_MB" --run-dir "$dir" --boot-timeout "$BOOT_TIMEOUT"
        -e '1: bench calibrate')
    args+=(--kernel "$KERNEL")
    out=$("$0" "${args[@]}" 2>&1 {LOCK_FD}>&-) || die "the calibration boot failed (logs in $dir):
$out"
    guest=$(sed -n 's/.*calibrate: .*ns_per_round=\([0-9]*\).*/\1/p' <<<"$out" | head -n 1)
    [[ -n $host && -n $guest && $host -gt 0 ]] || die "calibration: no time per round (host '$host', guest '$guest'; logs in $dir)"
    pct=$(((guest * 100 + host / 2) / host))
    ((pct >= 10)) || pct=10
    ((pct <= 10000)) || die "calibration: the guest runs $(pct_str "$pct") times slower than the host, beyond the 100 --dilation allows (host $host ns per round, guest $guest ns)"
    DILATION_PCT=$pct
    DILATION_HOW="auto: guest $guest ns per round, host $host ns"
}

# 5. accelerator
ACCEL=tcg
case "$ACCEL_REQ" in
    tcg) ACCEL_WHY="requested" ;;
    tcg-multi)
        ACCEL=tcg-multi
        ACCEL_WHY="requested: multi-threaded TCG, -smp 1,maxcpus=2"
        ;;
    kvm)
        (exec 3<>/dev/kvm) 2>/dev/null || die "--accel kvm: /dev/kvm cannot be opened"
        ACCEL=kvm
        if grep -qwE 'vmx|svm' /proc/cpuinfo; then
            ACCEL_WHY="requested"
        else
            ACCEL_WHY="requested; warning: no vmx/svm in /proc/cpuinfo, this KVM may be a slow software hypervisor"
        fi
        ;;
    auto)
        if ! grep -qwE 'vmx|svm' /proc/cpuinfo; then
            ACCEL_WHY="no vmx/svm in /proc/cpuinfo"
        elif ! (exec 3<>/dev/kvm) 2>/dev/null; then
            ACCEL_WHY="/dev/kvm cannot be opened"
        else
            ACCEL=kvm
            ACCEL_WHY="vmx/svm in /proc/cpuinfo and /dev/kvm opens"
        fi
        ;;
esac

# 6. shared region
SHM_OWNED=1
if [[ -n $SHM_USER ]]; then
    [[ -e $SHM_USER ]] || die "--shm-path $SHM_USER: no such file or device"
    [[ -f $SHM_USER || -c $SHM_USER || -b $SHM_USER ]] ||
        die "--shm-path $SHM_USER: not a regular file or a device"
    [[ -r $SHM_USER && -w $SHM_USER ]] || die "--shm-path $SHM_USER: not readable and writable"
    if [[ -f $SHM_USER ]]; then
        size=$(stat -L -c %s -- "$SHM_USER") || die "--shm-path $SHM_USER: cannot stat it"
        ((size >= SHM_MB * 1048576)) ||
            die "--shm-path $SHM_USER holds $size bytes; --shm-mb $SHM_MB needs $((SHM_MB * 1048576)) (size it first, e.g. truncate -s ${SHM_MB}M, or pass a smaller --shm-mb)"
    fi
    SHM_OWNED=0
else
    [[ -d /dev/shm ]] || die "/dev/shm does not exist"
    avail_kb=$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')
    if [[ $avail_kb =~ ^[0-9]+$ ]] && ((avail_kb < SHM_MB * 1024)); then
        die "not enough space in /dev/shm for a $SHM_MB MiB shared region ($((avail_kb / 1024)) MiB free)"
    fi
fi
write_env() {
    local state=$1 pids=${2:-} start=${3:-}
    cat >"$RUN_DIR/cluster.env.tmp" <<EOF
# onecopy cluster launched by qemu-run.sh
STATE='$state'
NODES='$NODES'
ACCEL='$ACCEL'
SHM_PATH='$SHM_PATH'
SHM_MB='$SHM_MB'
SHM_OWNED='$SHM_OWNED'
MEM_MB='$MEM_MB'
DISK='$DISK'
MODE='$MODE'
POLICY='$POLICY'
DOORBELL='$DOORBELL'
STORAGE='$STORAGE'
CXL_NS='$CXL_NS'
DILATION='$DILATION'
DILATION_PCT='$DILATION_PCT'
KERNEL='$KERNEL'
APPEND_EXTRA='$APPEND_EXTRA'
PIDS='$pids'
START_MS='$start'
START_TIME='$(date -u +%Y-%m-%dT%H:%M:%SZ)'
LAUNCHER_PID='$$'
EOF
    mv -f -- "$RUN_DIR/cluster.env.tmp" "$RUN_DIR/cluster.env"
}
if [[ $SHM_OWNED == 1 ]]; then
    SHM_PATH=$(mktemp /dev/shm/onecopy-XXXXXXXX) || die "cannot create a file in /dev/shm"
    LAUNCHED=1 # from here on the EXIT trap cleans up
    write_env starting # names the region at once: `stop` removes it from now on
    truncate -s "${SHM_MB}M" -- "$SHM_PATH" || die "cannot size $SHM_PATH"
else
    SHM_PATH=$(realpath -- "$SHM_USER")
    LAUNCHED=1
    write_env starting # SHM_OWNED=0: `stop` leaves the region alone
    info "shared region: $SHM_PATH (--shm-path; not removed at stop)"
fi


# 7. launch
info "accel: $ACCEL ($ACCEL_WHY)"
if [[ -n $(pin_for dir) ]]; then
    info "cpus: directory pinned to CPU 0 (dedicated), nodes to CPUs 1-$((HOST_CPUS - 1))"
else
    info "cpus: not pinned (--pin $PIN, $HOST_CPUS host CPUs)"
fi

# Time dilation: D measured (auto) or given; applied below to the storage
# model's rates and the CXL latency, and by the directory's disk driver to
# the access latency (boot option dilation_pct).
[[ $DILATION != auto ]] || calibrate_dilation
if [[ $DILATION != off ]]; then
    info "dilation: $(pct_str "$DILATION_PCT")${DILATION_HOW:+ ($DILATION_HOW)}"
fi
# Storage profiles (bytes/s, IOPS), recorded in cluster.env and every result.
case "$STORAGE" in
    none) THROTTLE= ;;
    nvme) THROTTLE=$(throttle 3400000000 500000) ;;
    sata-ssd) THROTTLE=$(throttle 145000000 20000) ;;
    sas-raid) THROTTLE=$(throttle 4000000000 400000) ;;
esac
CXL_NS=$((CXL_NS * DILATION_PCT / 100))
info "storage: $STORAGE${THROTTLE:+ ($THROTTLE)}; cxl latency: $CXL_NS ns"
extra=" mode=$MODE policy=$POLICY storage=$STORAGE cxl_ns=$CXL_NS"
[[ $DILATION == off ]] || extra+=" dilation_pct=$DILATION_PCT"
# The shared region: ivshmem-plain over the memory backend, or (doorbells)
# ivshmem-doorbell, which gets the very same /dev/shm file from our ivshmem
# server (it passes the fd) plus one eventfd per peer and vector. QEMU reads
# the server's setup when the device is realized: the server starts first.
set_ivshmem_args
[[ $DOORBELL != on ]] || extra+=" doorbell=1"
# Last, so the user's --append-extra wins (`doorbell=0`: the device, no interrupts).
extra+="${APPEND_EXTRA:+ $APPEND_EXTRA}"
gdb_args() { # gdb_args K
    if [[ -n $GDB && $GDB == "$1" ]]; then
        echo "-gdb tcp:127.0.0.1:$((1234 + $1))"
    fi
}
# net mode: one point-to-point link per node, a QEMU stream netdev over a
# unix socket in the run dir (never a host address). The directory listens;
# MACs 52:54:00:0c:SS:KK tell the guests which link leads to node KK (SS: 0
# on the directory's side, 1 on the node's). romfile= skips the iPXE ROM.
dir_net=()
node_net() { :; }
if [[ $MODE == net ]]; then
    for ((k = 1; k <= NODES; k++)); do
        dir_net+=(-netdev "stream,id=net$k,server=on,addr.type=unix,addr.path=$RUN_DIR/net$k.sock"
            -device "virtio-net-pci,netdev=net$k,mac=52:54:00:0c:00:$(printf %02x "$k"),romfile=")
    done
    node_net() { # node_net K: QEMU args of node K's NIC
        printf '%s\n' -netdev "stream,id=net0,server=off,addr.type=unix,addr.path=$RUN_DIR/net$1.sock" \
            -device "virtio-net-pci,netdev=net0,mac=52:54:00:0c:01:$(printf %02x "$1"),romfile="
    }
fi
check_gdb_port # again: the build may have taken minutes
START_MS=$(now_ms)
if [[ $DOORBELL == on ]]; then
    # In its own session like the instances; it inherits the lock, so `stop`
    # finds it (and through RUN/ivshmem.pid); SIGTERM makes it remove its
    # socket and pid file.
    # It is also the fencer: it kills the QEMU of a node the directory
    # declared failed and confirms in the region (fabric::fence).
    setsid "$IVSERVER" --socket "$RUN_DIR/ivshmem.sock" --shm-path "$SHM_PATH" \
        --vectors "$IVSHMEM_VECTORS" --pid-file "$RUN_DIR/ivshmem.pid" \
        --fence-run-dir "$RUN_DIR" </dev/null >"$RUN_DIR/ivshmem.log" 2>&1 &
    for ((i = 0; i < 500; i++)); do
        [[ -S $RUN_DIR/ivshmem.sock && -s $RUN_DIR/ivshmem.pid ]] && break
        sleep 0.01
    done
    if [[ ! -S $RUN_DIR/ivshmem.sock || ! -s $RUN_DIR/ivshmem.pid ]]; then
        die "the ivshmem server did not open $RUN_DIR/ivshmem.sock within 5 s: $(tail -n 3 "$RUN_DIR/ivshmem.log" 2>/dev/null | tr '\n' ' ')"
    fi
    info "doorbells: ivshmem server pid $(read_pid "$RUN_DIR/ivshmem.pid") on $RUN_DIR/ivshmem.sock ($IVSHMEM_VECTORS vectors; log RUN/ivshmem.log)"
else
    # No doorbells: the same program runs as the fencer alone (no QEMU
    # connects to its socket), in its own session, found by `stop` through
    # RUN/fencer.pid.
    setsid "$IVSERVER" --socket "$RUN_DIR/fencer.sock" --shm-path "$SHM_PATH" \
        --pid-file "$RUN_DIR/fencer.pid" --fence-run-dir "$RUN_DIR" \
        </dev/null >"$RUN_DIR/fencer.log" 2>&1 &
    for ((i = 0; i < 500; i++)); do
        [[ -s $RUN_DIR/fencer.pid ]] && break
        sleep 0.01
    done
    [[ -s $RUN_DIR/fencer.pid ]] || die "the fencer did not start within 5 s: $(tail -n 3 "$RUN_DIR/fencer.log" 2>/dev/null | tr '\n' ' ')"
    info "fencing: failed nodes are fenced by pid $(read_pid "$RUN_DIR/fencer.pid") (log RUN/fencer.log)"
fi
# shellcheck disable=SC2046 # gdb_args yields zero or two words
launch dir "role=dir nodes=$NODES$extra" \
    -drive "file=$DISK,if=none,id=disk0,format=raw$THROTTLE" -device virtio-blk-pci,drive=disk0 \
    "${dir_net[@]}" $(gdb_args 0)
if [[ $MODE == net ]]; then
    # QEMU 7.2's stream client does not retry: the listening sockets must
    # exist before the nodes start.
    for ((k = 1; k <= NODES; k++)); do
        for ((i = 0; i < 500; i++)); do
            [[ -S $RUN_DIR/net$k.sock ]] && break
            sleep 0.01
        done
        [[ -S $RUN_DIR/net$k.sock ]] || die "the directory did not open $RUN_DIR/net$k.sock within 5 s (see $RUN_DIR/dir.stderr)"
    done
fi
for ((k = 1; k <= NODES; k++)); do
    mapfile -t nic < <(node_net "$k")
    # shellcheck disable=SC2046
    launch "node$k" "role=node id=$k nodes=$NODES$extra" "${nic[@]}" $(gdb_args "$k")
done
PIDS=$(for n in dir $(seq -f 'node%g' 1 "$NODES"); do cat "$RUN_DIR/$n.pid"; done | tr '\n' ' ' | sed 's/ $//')
write_env running "$PIDS" "$START_MS"
if [[ -n $GDB ]]; then
    if [[ $GDB == 0 ]]; then gname=directory; else gname="node $GDB"; fi
    info "gdb: $gname listens on 127.0.0.1:$((1234 + GDB)) (gdb -ex 'target remote 127.0.0.1:$((1234 + GDB))' $KERNEL)"
fi

# 8. wait until up
if run_bg "$CTL" wait-ready --run-dir "$RUN_DIR" --nodes "$NODES" \
    --timeout-ms "$((BOOT_TIMEOUT * 1000))" --since-ms "$START_MS" >"$RUN_DIR/ready.out"; then
    ready_ms=$(tr -dc '0-9' <"$RUN_DIR/ready.out")
    plural=s
    ((NODES > 1)) || plural=
    dil="dilation off"
    [[ $DILATION == off ]] || dil="dilation $(pct_str "$DILATION_PCT")"
    info "cluster up: 1 directory + $NODES node$plural joined in $ready_ms ms (mode $MODE, policy $POLICY), $dil"
else
    echo "$PROG: error: the cluster did not come up (see the reason above); logs in $RUN_DIR" >&2
    print_log_tails
    if [[ $DETACH == 1 ]]; then
        KEEP=1
        echo "$PROG: the cluster was left running (--detach); stop it with: ./qemu-run.sh stop --run-dir $RUN_DIR" >&2
    fi
    exit 1
fi

# 9. what next
run_execs() {
    local rc=0
    run_bg "$CTL" exec --run-dir "$RUN_DIR" --timeout-ms "$((CMD_TIMEOUT * 1000))" "$@" || rc=$?
    return "$rc"
}

if [[ ${#EXECS[@]} -gt 0 ]]; then
    rc=0
    run_execs "${EXECS[@]}" || rc=$?
    if [[ $DETACH == 1 ]]; then
        KEEP=1
        info "cluster left running in $RUN_DIR (stop: ./qemu-run.sh stop --run-dir $RUN_DIR)"
    fi
    exit "$rc"
fi

if [[ $DETACH == 1 ]]; then
    KEEP=1
    rd=$RUN_DIR
    [[ $rd != "$ROOT/run" ]] || rd=
    info "cluster running in the background; logs in $RUN_DIR (dir.log, node1.log, ...)"
    info "  attach a console: ./qemu-run.sh attach${rd:+ --run-dir $rd} --console K   (Ctrl-] detaches)"
    info "  run commands:     ./qemu-run.sh exec${rd:+ --run-dir $rd} -e '1: ls /'"
    info "  stop:             ./qemu-run.sh stop${rd:+ --run-dir $rd}"
    exit 0
fi

if [[ -t 0 && -t 1 ]]; then
    if [[ $CONSOLE == 0 ]]; then cname="the directory"; else cname="node $CONSOLE"; fi
    info "attaching to the console of $cname (Ctrl-] detaches and stops the cluster)"
    STTY_SAVED=$(stty -g)
    stty raw -echo
    # An explicit stdin redirection keeps the terminal for the background job.
    "$CTL" attach --run-dir "$RUN_DIR" --node "$CONSOLE" <&0 {LOCK_FD}>&- &
    CHILD=$!
    wait "$CHILD" || true
    CHILD=
    stty "$STTY_SAVED" 2>/dev/null || stty sane
    STTY_SAVED=
    exit 0
fi

# Not on a terminal: a short demo.
[[ $CONSOLE_SET == 0 ]] || info "(not on a terminal: --console ignored)"
other=$((NODES >= 2 ? 2 : 1))
info "not on a terminal: running a short demo (use --detach to keep the cluster, -e to script it)"
rc=0
run_execs "1: write /demo.txt hello from node 1" "$other: cat /demo.txt" "1: nodes" "1: bench ring 1000" || rc=$?
exit "$rc"
