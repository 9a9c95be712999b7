#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI benchmark driver: in ONE run on one device, MPI latency and bandwidth
# (mpi-tests/zv_osu, 2 ranks, every received byte checked) over
#   - each zv transport the module offers (rc_zv ud_zv uc_zv), pml ucx,
#     UCX_TLS=<tl>,self, the module brought in by the build tree's Open MPI
#     component;
#   - UCX's rc_verbs (+ud_verbs for wireup) and ud_verbs, pml ucx, stock:
#     zv not loaded;
#   - raw verbs on the same device, perftest ib_send_lat / ib_write_bw (the
#     floor; its bandwidth converted from MiB/s to MB/s; in the short sweep
#     only the smallest size's latency and the largest size's bandwidth);
#   - Open MPI's openib BTL (pml ob1) where it can run: its Open MPI has it
#     and the device's link layer is InfiniBand (Debian's build connects
#     only through udcm, which needs one). Elsewhere it is named once, with
#     the reason, and not run.
# ROUNDS rounds (default 5); in each, every peer runs once, in an order
# that rotates from round to round, so that a slow spell of a shared host
# falls on all of them. Figures are the median of the rounds with the
# min-max spread. Sizes: 8 B, 4 KiB, 64 KiB, 1 MiB, and each side of every
# pml ucx peer's eager->rendezvous switch (read from `ucx_info -e -u t`:
# tag_send's for MPI_Isend, the bandwidth test; tag_send_nbr's for blocking
# MPI_Send, the latency test). With the OSU micro-benchmarks installed
# (OSU_DIR=their directory, or osu_latency and osu_bw on PATH), each pml
# ucx peer's turn also runs osu_latency and osu_bw (-c: validated, where
# this OSU has it) at the same sizes. The registration cache's effect: rc_zv's
# bandwidth above its switch with a fresh malloc'd buffer per message
# (bw-fresh) and with the cache off (UCX_ZV_RCACHE_MONITOR=none, its own
# run in the rotation).
#
# usage: contrib/bench/mpi-bench.sh [--full] [BUILD_DIR]   (default ./build)
#   --full: every power of 2 from 1 B to ZV_BENCH_MAX (default 4 MiB). On a
#   host with an active RDMA port the sweep is full by default
#   (ZV_BENCH_FULL=0 for the short one); without, it runs in the Soft-RoCE
#   VM, short.
# Environment: ZV_BENCH_ROUNDS (default 5), ZV_BENCH_ITERS (zv_osu -i, the
# iterations up to 8 KiB, default 2000), ZV_BENCH_BYTES (zv_osu -b, what a
# larger size moves, default 2 MiB: the rounds, not long runs, are what
# tames a shared host's noise), ZV_BENCH_SECONDS (zv_osu -T, at most
# about that long per size, default 0.2: a loaded host's slow ping-pongs
# are cut to what fits, not waited for), ZV_BENCH_WINDOW (zv_osu -w,
# default 8), ZV_BENCH_SIZES (the short sweep's sizes), ZV_BENCH_PEERS
# (default "rc_zv rc_verbs ud_zv ud_verbs uc_zv perftest openib"),
# ZV_BENCH_OUT (default BUILD_DIR/mpi-bench), ZV_BENCH_TIMEOUT (VM, s),
# ZV_MAIN_T0 (the main job's start, epoch seconds, for its progress lines),
# OSU_DIR.
# Files in ZV_BENCH_OUT: raw/ (each run's lines), stats.dat ("test peer
# size median min max rounds errors"), switch.dat, na.txt, meta.txt,
# table.txt; plots by contrib/bench/mpi-plot.sh.
# Exit status: 0, or 1 when a zv run failed or delivered corrupted data.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
full=${ZV_BENCH_FULL:-}
if [ "${1:-}" = --full ]; then full=1; shift; fi
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
have_port() { ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; }
[ -n "$full" ] || { if have_port; then full=1; else full=0; fi; }
rounds=${ZV_BENCH_ROUNDS:-5}
iters=${ZV_BENCH_ITERS:-2000}
bytes=${ZV_BENCH_BYTES:-2097152}
seconds=${ZV_BENCH_SECONDS:-0.2}
window=${ZV_BENCH_WINDOW:-8}
max=${ZV_BENCH_MAX:-4194304}
peers=${ZV_BENCH_PEERS:-rc_zv rc_verbs ud_zv ud_verbs uc_zv perftest openib}
out=${ZV_BENCH_OUT:-$b/mpi-bench}
if [ "$full" = 1 ]; then
    sizes=$(s=1; while [ $s -le "$max" ]; do printf '%d ' $s; s=$((s * 2)); done)
else
    sizes=${ZV_BENCH_SIZES:-8 4096 65536 1048576}
fi
t0=${ZV_MAIN_T0:-$(date +%s)}
# clock: elapsed time since the start, m:ss
clock() { local s=$(( $(date +%s) - t0 )); printf '%d:%02d' $((s / 60)) $((s % 60)); }

if [ -z "${ZV_BENCH_ON_DEVICE:-}${ZV_BENCH_TABLES:-}" ]; then
    mkdir -p "$out"
    rm -rf "$out"/raw "$out"/*.dat "$out"/*.png "$out"/table.txt
    st=0
    out=$(cd "$out" && pwd)
    # the OSU micro-benchmarks found here are the ones used there
    if [ -z "${OSU_DIR:-}" ] && command -v osu_latency > /dev/null; then
        OSU_DIR=$(dirname "$(readlink -f "$(command -v osu_latency)")")
    fi
    vars=(${OSU_DIR:+OSU_DIR="$OSU_DIR"} ZV_BENCH_ON_DEVICE=1 ZV_BENCH_FULL="$full" ZV_BENCH_ROUNDS="$rounds" ZV_BENCH_ITERS="$iters" ZV_BENCH_BYTES="$bytes" ZV_BENCH_SECONDS="$seconds" ZV_BENCH_WINDOW="$window"
          ZV_BENCH_MAX="$max" ZV_BENCH_SIZES="$sizes" ZV_BENCH_PEERS="$peers" ZV_BENCH_OUT="$out"
          ZV_MAIN_T0="$t0")
    if have_port; then
        env "${vars[@]}" "$0" "$b" || st=$?
    else
        shares=(--share "$src" --share "$b")
        case $out/ in "$b"/*|"$src"/*) ;; *) shares+=(--share "$out") ;; esac
        # (the VM has a /tmp of its own: OSU's directory is shared as it is)
        [ -z "${OSU_DIR:-}" ] || shares+=(--share "$OSU_DIR")
        for v in "${vars[@]}"; do shares+=(-e "$v"); done
        "$src/contrib/vm/run.sh" --timeout "${ZV_BENCH_TIMEOUT:-3000}" --cpus 2 "${shares[@]}" \
            -- "$0" "$b" || st=$?
    fi
    # tables here, not in the emulated VM
    if [ -s "$out/meta.txt" ]; then
        ZV_BENCH_TABLES=1 ZV_BENCH_OUT=$out "$0" "$b" || st=1
        "$src/contrib/bench/mpi-plot.sh" "$out" || echo "mpi-bench: plotting failed" >&2
    fi
    exit $st
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
is_zv() { case $1 in *_zv) return 0 ;; *) return 1 ;; esac; }
if [ -z "${ZV_BENCH_TABLES:-}" ]; then
# ------------------------------------------------------------ on the device
rm -rf "$out/raw"; mkdir -p "$out/raw"
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
mod=$b/.libs/libuct_zv.so.0
osu=$b/mpi-tests/zv_osu
[ -x "$osu" ] || { echo "mpi-bench: $osu is not built (contrib/build.sh builds it)"; exit 1; }
link=$(ibv_devinfo -d "$dev" | awk '/link_layer:/ {print $2; exit}')
# perftest's GID: on RoCE the IPv4-mapped one (like UCX_ZV_GID_INDEX=auto)
gid=$(ibv_devinfo -v -d "$dev" | awk '/GID\[ *[0-9]+\]:.*::ffff:/ {gsub(/[^0-9]/, "", $1); print $1; exit}')
gid=${ZV_BENCH_GID:-${gid:-0}}
# ud_verbs on RoCE drops every packet without this; the zv runs do not use
# it, so UCX must not warn about it there (UCX logs go to stdout)
export UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n
# The zv peers get the module through the build tree's Open MPI component
# (nothing installed); the UCX peers run without it, as UCX ships. The
# component path on mpirun's command line: Open MPI 5's mpirun overrides
# an OMPI_MCA_mca_base_component_path given with -x by PMIx's directory.
if [ -e "$b/.libs/mca_rcache_zverbs.so" ]; then
    zv_args=(--mca mca_base_component_path "$("$src/contrib/ompi-rank-path.sh" "$b/.libs")"
             --mca rcache_zverbs_module "$mod")
else   # configured --without-ompi: preload the module
    zv_args=(-x LD_PRELOAD="$mod")
fi
LD_PRELOAD=$mod ucx_info -d > "$tmp/tls" 2>&1 || true

declare -A na      # peer -> why it is not run (named once in the report)
for p in $peers; do
    if is_zv "$p" && ! grep -q "Transport: $p\$" "$tmp/tls"; then na[$p]="the module does not offer it"; fi
done
if [[ " $peers " == *" openib "* ]]; then
    if ! ompi_info 2>/dev/null | grep -q "MCA btl: openib"; then
        na[openib]="this Open MPI has no openib BTL (Open MPI 5 removed it)"
    elif [ "$link" != InfiniBand ] &&
         ! ompi_info --param btl openib --level 9 2>/dev/null | grep -A1 cpc_include | grep -q rdmacm; then
        na[openib]="not run: it connects only through udcm, which needs an InfiniBand link layer, and $dev is $link (RoCE); UCX's rc_verbs is the verbs peer here"
    fi
fi
if [[ " $peers " == *" perftest "* ]] && ! command -v ib_send_lat > /dev/null; then
    na[perftest]="perftest is not installed (contrib/setup.sh installs it)"
fi

ucx_tls() { case $1 in rc_verbs) echo rc_verbs,ud_verbs ;; *) echo "$1" ;; esac; }

# ---- eager -> rendezvous switch of each pml ucx peer (tag_send ranges)
rndv_of() { # OP FILE: where <rndv> starts in OP's protocol ranges, or "-"
    awk -v op="$1" '$0 ~ "^# *" op ":" { if (match($0, /\.\.[0-9]+\.\.<rndv>/)) {
                        print substr($0, RSTART + 2, RLENGTH - 10); f = 1; exit } }
                    END { if (!f) print "-" }' "$2"
}
declare -A thresh
for p in $peers; do
    case $p in openib|perftest) continue ;; esac
    [ -z "${na[$p]:-}" ] || continue
    pre=; ! is_zv "$p" || pre=$mod
    LD_PRELOAD=$pre UCX_TLS=$(ucx_tls "$p") UCX_NET_DEVICES="$dev:1" timeout 120 ucx_info -e -u t > "$tmp/e.$p" 2>&1 &
done
wait
for p in $peers; do
    [ -e "$tmp/e.$p" ] || continue
    # MPI_Isend (bw test) uses tag_send's ranges, blocking MPI_Send (lat
    # test) tag_send_nbr's
    thresh[$p]="$(rndv_of tag_send "$tmp/e.$p") $(rndv_of tag_send_nbr "$tmp/e.$p")"
done

# switch_sizes PEER FIELD: the sizes each side of its switch (1: bw, 2: lat)
switch_sizes() {
    local t
    t=$(echo "${thresh[$1]:-- -}" | cut -d' ' -f"$2")
    case $t in ''|*[!0-9]*) return 0 ;; esac
    [ "$t" -gt 1 ] && echo "$((t - 1)) $t"
}
list() { tr ' ' '\n' | grep -v '^$' | sort -n -u | paste -sd, -; }
# rc_zv's cache figures: the sizes at or above its bandwidth switch
cache_sizes=
if [ -n "${thresh[rc_zv]:-}" ]; then
    ts=$(echo "${thresh[rc_zv]}" | cut -d' ' -f1)
    case $ts in ''|*[!0-9]*) ;; *) cache_sizes=$(for s in $sizes; do [ "$s" -lt "$ts" ] || echo "$s"; done | list) ;; esac
fi

# mpi PEER OUTFILE [mpirun args] -- PROGRAM [args]: one MPI run; 0 on success
mpi() {
    local p=$1 f=$2; shift 2
    local margs=()
    while [ "$1" != -- ]; do margs+=("$1"); shift; done; shift
    # shellcheck disable=SC2054  # commas separate BTL names
    case $p in
    openib) margs+=(--mca pml ob1 --mca btl openib,self --mca btl_openib_allow_ib 1
                    --mca btl_openib_if_include "$dev") ;;
    *)      local t; t=$(ucx_tls "$p")
            is_zv "$p" && margs+=("${zv_args[@]}")
            # (no BTL but self: pml ucx needs none, and the others only
            # slow MPI_Init down, several seconds under emulation)
            margs+=(--mca pml ucx --mca btl self --mca pml_ucx_tls "$t" --mca pml_ucx_devices "$dev"
                    -x UCX_TLS="$t,self" -x UCX_NET_DEVICES="$dev:1") ;;
    esac
    timeout 300 mpirun --allow-run-as-root -np 2 "${margs[@]}" "$@" > "$f" 2> "$f.err"
}

# The OSU micro-benchmarks, when installed (OSU_DIR, or on PATH): osu_latency
# and osu_bw beside zv_osu in each pml ucx peer's turn, with -c (validation)
# where this OSU has it
osu_lat=; osu_bw=; osu_c=
if [ -n "${OSU_DIR:-}" ]; then
    osu_lat=$(find "$OSU_DIR" -name osu_latency -type f -perm -u+x 2>/dev/null | head -1)
    osu_bw=$(find "$OSU_DIR" -name osu_bw -type f -perm -u+x 2>/dev/null | head -1)
    [ -n "$osu_lat" ] && [ -n "$osu_bw" ] || echo "mpi-bench: OSU_DIR=$OSU_DIR has no osu_latency and osu_bw" >&2
else
    osu_lat=$(command -v osu_latency || true); osu_bw=$(command -v osu_bw || true)
fi
if [ -n "$osu_lat" ] && [ -n "$osu_bw" ]; then
    # (-c, validation, came with OSU 7: the binaries that have it can say
    # "DATA VALIDATION ERROR")
    ! grep -qa 'DATA VALIDATION ERROR' "$osu_bw" || osu_c=-c
else
    osu_lat=; osu_bw=
fi
# osu PEER FILE ROUND: osu_latency and osu_bw over PEER, the sizes of the
# sweep, as "osu-lat SIZE VALUE ERRORS" lines (errors: 1 for a "Fail")
osu() {
    local p=$1 f=$2 lo hi t st=0
    lo=$(tr ' ' '\n' <<< "$sizes" | sort -n | head -1); hi=$(tr ' ' '\n' <<< "$sizes" | sort -n | tail -1)
    : > "$f"
    for t in lat bw; do
        local prog=$osu_lat args=(-i 20 -x 2)
        [ $t = lat ] || { prog=$osu_bw; args=(-i 5 -x 1 -W 8); }
        mpi "$p" "$f.$t" -- "$prog" -m "$lo:$hi" "${args[@]}" $osu_c || st=$?
        awk -v t="osu-$t" -v want=" $sizes " '$1 ~ /^[0-9]+$/ && index(want, " " $1 " ") {
                print t, $1, $2, ($3 == "Fail") ? 1 : 0 }' "$f.$t" >> "$f"
        cat "$f.$t.err" >> "$f.err" 2>/dev/null || true
        rm -f "$f.$t" "$f.$t.err"
    done
    return $st
}

# perftest TOOL SIZE: one server/client pair; prints the client's figure
# (ib_send_lat: t_avg usec; ib_write_bw: BW average converted to MB/s)
perftest() {
    local tool=$1 size=$2 n port spid w
    n=$iters; [ "$size" -le 8192 ] || n=$(( bytes / size )); [ "$n" -ge 10 ] || n=10
    for _ in 1 2; do
        port=$((20000 + RANDOM % 20000))
        timeout 120 "$tool" -d "$dev" -x "$gid" -s "$size" -n "$n" -p $port > "$tmp/pt.srv" 2>&1 &
        spid=$!
        # the server listens once it has opened the device: waited for
        for ((w = 0; w < 50; ++w)); do
            ss -ltn 2>/dev/null | grep -q ":$port " && break
            sleep 0.1
        done
        timeout 120 "$tool" -d "$dev" -x "$gid" -s "$size" -n "$n" -p $port 127.0.0.1 \
            > "$tmp/pt.cli" 2>&1 && { wait $spid || true; break; }
        kill $spid 2> /dev/null || true; wait $spid 2> /dev/null || true
    done
    case $tool in
    ib_send_lat) awk -v s="$size" '$1 == s && NF >= 6 && $6 ~ /^[0-9.]+$/ {print $6; exit}' "$tmp/pt.cli" ;;
    ib_write_bw) awk -v s="$size" '$1 == s && NF >= 4 && $4 ~ /^[0-9.]+$/ {printf "%.2f\n", $4 * 1.048576; exit}' "$tmp/pt.cli" ;;
    esac
}

failed=0
declare -A fails gone   # peer -> its failures; peer -> left the rounds
# run_peer PEER ROUND: its lines into raw/PEER.ROUND ("test size value errors")
run_peer() {
    local p=$1 r=$2 f=$out/raw/$1.$2 args=() lat bw s v t tool
    [ -z "${na[$p]:-}" ] || return 0
    if [ "$p" = perftest ]; then
        : > "$f"
        for t in lat bw; do
            tool=ib_send_lat; [ $t = lat ] || tool=ib_write_bw
            # the short sweep: the floor where it is most telling, the
            # smallest size's latency and the largest size's bandwidth
            local at=$sizes
            [ "$full" = 1 ] || at=$(tr ' ' '\n' <<< "$sizes" | sort -n | if [ $t = lat ]; then head -1; else tail -1; fi)
            for s in $at; do
                v=$(perftest $tool "$s")
                [ -n "$v" ] && { echo "$t $s $v 0" >> "$f"; continue; }
                [ -s "$f" ] || { na[$p]="$tool did not run: $(grep -m1 -iE 'error|fail|unable|couldn' "$tmp/pt.cli" "$tmp/pt.srv" | cut -c1-70)"; return 0; }
            done
        done
        return 0
    fi
    case $p in
    cacheoff) args=(-t "bw=$cache_sizes") ;;
    *)  lat=$( { echo "$sizes"; switch_sizes "$p" 2; } | list)
        bw=$( { echo "$sizes"; switch_sizes "$p" 1; } | list)
        args=(-t "lat=$lat" -t "bw=$bw")
        [ "$p" != rc_zv ] || [ -z "$cache_sizes" ] || args+=(-t "bw-fresh=$cache_sizes") ;;
    esac
    local run=$p extra=()
    # (one test: zv_osu's lines carry no test name; a second, empty-handed
    # name would cost a run of its own, so the name is added here)
    [ "$p" != cacheoff ] || { run=rc_zv; extra=(-x UCX_ZV_RCACHE_MONITOR=none); }
    local st=0
    mpi "$run" "$f" "${extra[@]}" -- "$osu" -q -i "$iters" -b "$bytes" -T "$seconds" -w "$window" "${args[@]}" || st=$?
    if [ -n "$osu_lat" ] && [ "$p" != cacheoff ] && [ "$p" != openib ]; then
        osu "$run" "$f.osu" || st=$?
        cat "$f.osu" >> "$f"; cat "$f.osu.err" >> "$f.err" 2>/dev/null || true; rm -f "$f.osu" "$f.osu.err"
    fi
    [ "$p" != cacheoff ] || { awk 'NF == 3 {$0 = "bw " $0} {print}' "$f" > "$f.t" && mv "$f.t" "$f"; }
    [ $st != 0 ] || return 0
    local why
    why=$(grep -m1 -vE '^ *$|^-+$|^\*+$' "$f.err" | sed 's/^ *//' | cut -c1-90)
    [ "$p" != openib ] || why=$(grep -m1 -iE 'openib|OpenFabrics|BTL|unreachable' "$f.err" | sed 's/^ *//' | cut -c1-90)
    why="round $r: ${why:-mpirun failed (status $st)}"
    fails[$p]="${fails[$p]:+${fails[$p]}; }$why"
    is_zv "$run" && failed=1
    echo "[$(clock)] FAILED: $p, $why" >&2
    # Corrupted data (zv_osu's own exit) is a result: the peer stays in the
    # rounds, so the verdict can say how often. Anything else (a crash, a
    # hang cut by the timeout) would only repeat: it leaves the rounds.
    if ! grep -q 'arrived corrupted' "$f.err"; then
        tail -n 20 "$f.err" >&2
        gone[$p]=1
    fi
}

order=()
for p in $peers; do
    [ -z "${na[$p]:-}" ] || continue
    order+=("$p")
    [ "$p" != rc_zv ] || [ -z "$cache_sizes" ] || order+=(cacheoff)
done
n=${#order[@]}
echo "[$(clock)] MPI on $dev ($link): ${order[*]}; $rounds rounds, peers interleaved;" \
     "sizes $(tr ' ' , <<< "$sizes") and each side of every rendezvous switch" >&2
if [ -n "$osu_lat" ]; then
    echo "[$(clock)] and the OSU micro-benchmarks of $(dirname "$osu_lat"): osu_latency, osu_bw${osu_c:+ -c} in each pml ucx peer's turn" >&2
else
    echo "[$(clock)] (no OSU micro-benchmarks: ${OSU_DIR:+none in $OSU_DIR}${OSU_DIR:-OSU_DIR unset and no osu_latency on PATH})" >&2
fi
start=$(date +%s)
for ((r = 1; r <= rounds; ++r)); do
    rs=$(date +%s)
    for ((i = 0; i < n; ++i)); do
        p=${order[$(( (i + r - 1) % n ))]}
        if [ -n "${na[$p]:-}" ] || [ -n "${gone[$p]:-}" ]; then continue; fi
        echo "[$(clock)] round $r/$rounds: $p" >&2
        run_peer "$p" "$r"
    done
    now=$(date +%s)
    left=$(( (now - start) * (rounds - r) / r ))
    echo "[$(clock)] round $r/$rounds done in $((now - rs)) s; the MPI rounds need about $((left / 60)) min $((left % 60)) s more" >&2
done
: > "$out/switch.dat"
for p in "${!thresh[@]}"; do echo "$p ${thresh[$p]}" >> "$out/switch.dat"; done   # peer isend send
: > "$out/na.txt"
for p in "${!na[@]}"; do echo "$p ${na[$p]}" >> "$out/na.txt"; done
: > "$out/failures.txt"
for p in "${!fails[@]}"; do
    q=$p; [ "$p" != cacheoff ] || q="rc_zv (cache off)"
    echo "$q ${fails[$p]}${gone[$p]:+; left the rounds}" >> "$out/failures.txt"
done
{ echo "device $dev"; echo "link $link"
  echo "where $([ -n "${ZV_VM:-}" ] && echo vm || echo device)"
  echo "sweep $([ "$full" = 1 ] && echo full || echo short)"
  echo "rounds $rounds"; echo "sizes $sizes"; echo "cache_sizes $cache_sizes"; echo "window $window"
  echo "peers ${order[*]}"; echo "seconds $(( $(date +%s) - start ))"
  echo "osu ${osu_lat:+$(dirname "$osu_lat") ${osu_c:-no-validation}}"
  echo "failed $failed"; } > "$out/meta.txt"
exit "$failed"
fi

# ------------------------------------------------------------ tables (host)
# stats.dat: per test, peer and size, the median, min and max over the
# rounds, how many rounds, and the corrupted messages of all of them. The
# cache-off runs' bandwidth is rc_zv's "bw-off".
for f in "$out"/raw/*.[0-9]*; do
    case $f in *.err) continue ;; esac
    p=$(basename "$f"); p=${p%.*}
    awk -v p="$p" 'NF == 4 && $2 ~ /^[0-9]+$/ {
        t = $1; q = p; if (p == "cacheoff") { q = "rc_zv"; t = t "-off" }; print t, q, $2, $3, $4 }' "$f"
done | sort -k1,1 -k2,2 -k3,3n -k4,4g | awk '
    function flush() { if (n) printf "%s %s %d %s %s %s %d %d\n", t, p, s, (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2, v[1], v[n], n, e }
    $1 != t || $2 != p || $3 != s { flush(); t = $1; p = $2; s = $3; n = 0; e = 0 }
    { v[++n] = $4; e += $5 }
    END { flush() }' > "$out/stats.dat"
"$src/contrib/bench/mpi-report.sh" "$out" | tee "$out/table.txt"
failed=$(awk '$1 == "failed" {print $2}' "$out/meta.txt")
errors=$(awk '{e += $8} END {print e + 0}' "$out/stats.dat")
[ "$errors" = 0 ] || failed=1
exit "${failed:-1}"
