#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI benchmark driver: in ONE run on one device, peers interleaved round by
# round, it measures MPI latency and bandwidth (mpi-tests/zv_osu, data
# validated on every receive, 2 ranks) over
#   - each zv transport the module offers (rc_zv ud_zv uc_zv; the others
#     are "n/a: not landed"), pml ucx, UCX_TLS=<tl>,self;
#   - UCX's rc_verbs (+ud_verbs for wireup) and ud_verbs, pml ucx;
#   - Open MPI's openib BTL with pml ob1 (if it cannot start, the column is
#     "n/a: <the reason it printed>", found at run time);
#   - raw verbs, perftest ib_send_lat / ib_write_bw on the same device (the
#     floor; its bandwidth converted from MiB/s to MB/s);
# the registration cache's benefit per zv transport (reused buffers, a
# fresh malloc'd buffer per iteration (-F), cache off:
# UCX_ZV_RCACHE_MONITOR=none); and the eager->rendezvous switch of each
# pml ucx column, read from `ucx_info -e -u t` (the tag_send protocol
# ranges of an endpoint on the same device and transports: the start of
# <rndv>). Prints tables of figures and ratios, writes data files, and
# (contrib/bench/mpi-plot.sh, on the host afterwards) PNG plots.
#
# usage: contrib/bench/mpi-bench.sh [--full] [BUILD_DIR]   (default ./build)
#   short sweep (default): 1 B..1 MiB, 1 round; --full: 1 B..4 MiB, 3 rounds
#   (medians). Without an active RDMA port here it runs in the Soft-RoCE VM.
# Environment: ZV_BENCH_MAX, ZV_BENCH_ITERS, ZV_BENCH_ROUNDS override the
# sweep; ZV_BENCH_PEERS (default "rc_zv ud_zv uc_zv rc_verbs ud_verbs
# openib perftest"); ZV_BENCH_OUT (default BUILD_DIR/mpi-bench: table.txt,
# *.dat, *.png); ZV_BENCH_TIMEOUT (VM timeout, default 3000 s).
# Exit status: 0, or 1 when a zv run failed or delivered corrupted data.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
full=0
if [ "${1:-}" = --full ]; then full=1; shift; fi
b=$(cd "${1:-${ZV_BUILDDIR:-build}}" && pwd)
if [ $full = 1 ]; then dmax=4194304 diters=300 drounds=3; else dmax=1048576 diters=100 drounds=1; fi
max=${ZV_BENCH_MAX:-$dmax}
iters=${ZV_BENCH_ITERS:-$diters}
rounds=${ZV_BENCH_ROUNDS:-$drounds}
peers=${ZV_BENCH_PEERS:-rc_zv ud_zv uc_zv rc_verbs ud_verbs openib perftest}
out=${ZV_BENCH_OUT:-$b/mpi-bench}

if [ -z "${ZV_BENCH_ON_DEVICE:-}${ZV_BENCH_TABLES:-}" ]; then
    mkdir -p "$out"
    rm -f "$out"/*.dat "$out"/*.png "$out"/table.txt
    st=0
    if ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
        ZV_BENCH_ON_DEVICE=1 ZV_BENCH_MAX=$max ZV_BENCH_ITERS=$iters ZV_BENCH_ROUNDS=$rounds \
            ZV_BENCH_PEERS="$peers" ZV_BENCH_OUT=$out "$0" "$b" || st=$?
    else
        ucx_src=$(sed -n 's/^UCX_SRC = //p' "$b/Makefile")
        out=$(cd "$out" && pwd)
        shares=(--share "$src" --share "$b")
        case $out/ in "$b"/*|"$src"/*) ;; *) shares+=(--share "$out") ;; esac
        "$src/contrib/vm/run.sh" --timeout "${ZV_BENCH_TIMEOUT:-3000}" --cpus 2 \
            "${shares[@]}" ${ucx_src:+--share "$ucx_src"} \
            -e ZV_BENCH_ON_DEVICE=1 -e ZV_BENCH_MAX="$max" -e ZV_BENCH_ITERS="$iters" \
            -e ZV_BENCH_ROUNDS="$rounds" -e ZV_BENCH_PEERS="$peers" -e ZV_BENCH_OUT="$out" -- \
            "$0" "$b" || st=$?
        # tables here, not in the emulated VM (hundreds of awk runs)
        if [ -s "$out/peers.txt" ]; then
            ZV_BENCH_TABLES=1 ZV_BENCH_MAX=$max ZV_BENCH_OUT=$out "$0" "$b" || st=1
        fi
    fi
    if [ -s "$out/lat.dat" ]; then
        "$src/contrib/bench/mpi-plot.sh" "$out" || echo "mpi-bench: plotting failed" >&2
    fi
    exit $st
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
is_zv() { case $1 in *_zv) return 0 ;; *) return 1 ;; esac; }
if [ -z "${ZV_BENCH_TABLES:-}" ]; then
# ------------------------------------------------------------ on the device
rm -f "$out"/raw/* "$out"/peers.txt; mkdir -p "$out/raw"
dev=$(ibv_devices | awk 'NR>2 {print $1; exit}')
mod=$b/.libs/libuct_zv.so.0
osu=$b/mpi-tests/zv_osu
# perftest's GID: on RoCE the IPv4-mapped one (like UCX_ZV_GID_INDEX=auto)
gid=$(ibv_devinfo -v -d "$dev" | awk '/GID\[ *[0-9]+\]:.*::ffff:/ {gsub(/[^0-9]/, "", $1); print $1; exit}')
gid=${ZV_BENCH_GID:-${gid:-0}}
echo "== device $dev, 2 ranks, 1 B..$max B, $rounds round(s), peers: $peers"
make -C "$b" install > "$tmp/install.log" 2>&1 || { tail "$tmp/install.log"; exit 1; }
ldconfig
LD_PRELOAD=$mod ucx_info -d > "$tmp/tls" 2>&1
# ud_verbs on RoCE drops every packet without this; the zv runs do not use
# it, so UCX must not warn about it there (UCX logs go to stdout)
export UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n

declare -A na      # peer -> reason it has no figures
for p in $peers; do
    if is_zv "$p" && ! grep -q "Transport: $p\$" "$tmp/tls"; then na[$p]="not landed"; fi
done

# UCX_TLS and pml_ucx_tls of a pml ucx column
ucx_tls() { case $1 in rc_verbs) echo rc_verbs,ud_verbs ;; *) echo "$1" ;; esac; }

# mpi PEER OUTFILE [mpirun args] -- zv_osu args: one MPI run; 0 on success
mpi() {
    local p=$1 f=$2; shift 2
    local margs=()
    while [ "$1" != -- ]; do margs+=("$1"); shift; done; shift
    case $p in
    openib) margs+=(--mca pml ob1 --mca btl openib,self --mca btl_openib_allow_ib 1
                    --mca btl_openib_if_include "$dev") ;;
    *)      local t; t=$(ucx_tls "$p")
            margs+=(--mca pml ucx --mca pml_ucx_tls "$t" --mca pml_ucx_devices "$dev"
                    -x UCX_TLS="$t,self" -x UCX_NET_DEVICES="$dev:1") ;;
    esac
    timeout 900 mpirun --allow-run-as-root -np 2 "${margs[@]}" "$osu" -q "$@" > "$f" 2> "$f.err"
}

# perftest TOOL SIZE: one server/client pair; prints the client's figure
# (ib_send_lat: t_avg usec; ib_write_bw: BW average converted to MB/s)
perftest() {
    local tool=$1 size=$2 n port try spid
    n=$(( iters * 2 * 8192 / (size > 8192 ? size : 8192) )); [ $n -ge 20 ] || n=20
    for try in 1 2; do   # the server may take longer than the pause to listen
        port=$((20000 + RANDOM % 20000))
        timeout 300 $tool -d "$dev" -x "$gid" -s "$size" -n "$n" -p $port > "$tmp/pt.srv" 2>&1 &
        spid=$!
        sleep $try
        timeout 300 $tool -d "$dev" -x "$gid" -s "$size" -n "$n" -p $port 127.0.0.1 \
            > "$tmp/pt.cli" 2>&1 && { wait $spid || true; break; }
        kill $spid 2> /dev/null || true; wait $spid 2> /dev/null || true
    done
    case $tool in
    ib_send_lat) awk -v s="$size" '$1 == s && NF >= 6 && $6 ~ /^[0-9.]+$/ {print $6; exit}' "$tmp/pt.cli" ;;
    ib_write_bw) awk -v s="$size" '$1 == s && NF >= 4 && $4 ~ /^[0-9.]+$/ {printf "%.2f\n", $4 * 1.048576; exit}' "$tmp/pt.cli" ;;
    esac
}

# run_peer PEER TEST ROUND: figures into raw/PEER.TEST.ROUND ("size value errors")
run_peer() {
    local p=$1 t=$2 r=$3 f=$out/raw/$1.$2.$3
    [ -z "${na[$p]:-}" ] || return 0
    if [ "$p" = perftest ]; then
        local tool=ib_send_lat s=1 v
        [ "$t" = lat ] || tool=ib_write_bw
        : > "$f"
        for ((s = 1; s <= max; s *= 2)); do
            v=$(perftest $tool $s)
            if [ -z "$v" ]; then
                [ -s "$f" ] || { na[$p]="$tool did not run: $(grep -m1 -iE 'error|fail|unable|couldn' "$tmp/pt.cli" "$tmp/pt.srv" | cut -c1-70)"; return 0; }
                continue
            fi
            echo "$s $v 0" >> "$f"
        done
        return 0
    fi
    if ! mpi "$p" "$f" -- -t "$t" -S "$max" -i "$iters"; then
        local why
        why=$(grep -m1 -vE '^ *$|^-+$|^\*+$' "$f.err" | sed 's/^ *//' | cut -c1-90)
        if [ "$p" = openib ]; then   # its own words, condensed
            why=$(awk '/No OpenFabrics connection schemes reported/ {f = 1}
                       f && /CPCs attempted:/ {$1 = $2 = ""; sub(/^ */, "");
                           print "openib BTL disabled itself on '"$dev"': no usable connection scheme (CPCs attempted: " $0 ")"; exit}' "$f.err")
            [ -n "$why" ] || why=$(grep -m1 -iE 'openib|OpenFabrics|BTL|unreachable' "$f.err" | sed 's/^ *//' | cut -c1-90)
        fi
        na[$p]="${why:-mpirun failed}"
        is_zv "$p" && { echo "FAILED: $p $t: ${na[$p]}"; tail -n 20 "$f.err"; failed=1; }
        rm -f "$f"
    fi
}
failed=0

# ---- eager -> rendezvous switch of each pml ucx column (tag_send ranges)
declare -A thresh
rndv_of() { # OP FILE: where <rndv> starts in OP's protocol ranges, or "-"
    awk -v op="$1" '$0 ~ "^# *" op ":" { if (match($0, /\.\.[0-9]+\.\.<rndv>/)) {
                        print substr($0, RSTART + 2, RLENGTH - 10); f = 1; exit } }
                    END { if (!f) print "-" }' "$2"
}
for p in $peers; do
    case $p in openib|perftest) continue ;; esac
    [ -z "${na[$p]:-}" ] || continue
    t=$(ucx_tls "$p")
    LD_PRELOAD=$mod UCX_TLS=$t UCX_NET_DEVICES="$dev:1" timeout 120 ucx_info -e -u t > "$tmp/e.$p" 2>&1 || true
    # MPI_Isend (bw test) uses tag_send's ranges, blocking MPI_Send (lat
    # test) tag_send_nbr's
    thresh[$p]="$(rndv_of tag_send "$tmp/e.$p") $(rndv_of tag_send_nbr "$tmp/e.$p")"
    echo "$p: $(grep -E '^# *tag_send(_nbr)?:' "$tmp/e.$p" | sed 's/^# *//' | tr -s ' ' | tr '\n' ';')"
done

# ---- the runs, interleaved: every peer once per test per round
start=$(date +%s)
for ((r = 1; r <= rounds; ++r)); do
    for t in lat bw; do
        for p in $peers; do
            echo "round $r/$rounds: $t $p" >&2
            run_peer "$p" "$t" "$r"
        done
    done
    for p in $peers; do   # the cache: fresh buffers, cache off (bw, >= 4 KiB)
        is_zv "$p" && [ -z "${na[$p]:-}" ] || continue
        echo "round $r/$rounds: cache $p" >&2
        mpi "$p" "$out/raw/$p.fresh.$r" -- -t bw -s 4096 -S "$max" -i "$iters" -F ||
            { echo "FAILED: $p bw -F"; failed=1; }
        mpi "$p" "$out/raw/$p.off.$r" -x UCX_ZV_RCACHE_MONITOR=none -- -t bw -s 4096 -S "$max" -i "$iters" ||
            { echo "FAILED: $p bw, cache off"; failed=1; }
    done
done
echo "== measured in $(( $(date +%s) - start )) s"
: > "$out/switch.dat"
for p in "${!thresh[@]}"; do echo "$p ${thresh[$p]}" >> "$out/switch.dat"; done   # peer isend send
: > "$out/na.txt"
for p in "${!na[@]}"; do echo "$p ${na[$p]}" >> "$out/na.txt"; done
echo "$failed" > "$out/failed.txt"
echo "$peers" > "$out/peers.txt"
# on a host with its own device nothing else will build the tables
ibv_devinfo 2> /dev/null | grep -q PORT_ACTIVE && [ -z "${ZV_VM:-}" ] || exit "$failed"
fi

# ------------------------------------------------------------ tables (host)
peers=$(cat "$out/peers.txt")
failed=$(cat "$out/failed.txt" 2> /dev/null || echo 0)
declare -A na
while read -r p why; do [ -z "$p" ] || na[$p]=$why; done < "$out/na.txt"

# ---- medians over rounds -> OUT/{lat,bw,cache}.dat, one column per series
# series STEM: "size median" over the rounds of raw/STEM.<round>
series() {
    cat "$out"/raw/"$1".[0-9]* 2>/dev/null | awk '$1 ~ /^[0-9]+$/ {print $1, $2}' | sort -k1,1n -k2,2g |
        awk 'function flush() { if (n) print s, v[int((n + 1) / 2)] }
             $1 != s { flush(); s = $1; n = 0 } { v[++n] = $2 } END { flush() }'
}
errors=0
for f in "$out"/raw/*; do
    case $f in *.err) continue ;; esac
    [ -e "$f" ] || continue
    e=$(awk '$1 ~ /^[0-9]+$/ {s += $3} END {print s + 0}' "$f"); errors=$((errors + e))
done
table() { # OUTFILE SERIES...: join series on size ("-" where missing)
    local o=$1 c s v; shift
    for c in "$@"; do series "$c" > "$tmp/s.$c"; done
    { printf 'size'; for c in "$@"; do printf ' %s' "${c%.lat}"; done; echo
      for ((s = 1; s <= max; s *= 2)); do
          printf '%d' $s
          for c in "$@"; do
              v=$(awk -v s=$s '$1 == s {print $2}' "$tmp/s.$c"); printf ' %s' "${v:--}"
          done; echo
      done; } | sed 's/\.bw / /g; s/\.bw$//' > "$o"
}
lat_cols=(); bw_cols=(); cache_cols=()
for p in $peers; do
    lat_cols+=("$p.lat"); bw_cols+=("$p.bw")
    is_zv "$p" && [ -z "${na[$p]:-}" ] && cache_cols+=("$p.bw" "$p.fresh" "$p.off")
done
table "$out/lat.dat" "${lat_cols[@]}"
table "$out/bw.dat" "${bw_cols[@]}"
if [ ${#cache_cols[@]} -gt 0 ]; then
    table "$out/cache.dat" "${cache_cols[@]}"
    # the cache table keeps its suffixes: reused buffers are "<tl>.reuse"
    awk 'NR == 1 { for (i = 2; i <= NF; ++i) if ($i !~ /\./) $i = $i ".reuse" } {print}' \
        "$out/cache.dat" > "$tmp/c" && mv "$tmp/c" "$out/cache.dat"
else
    rm -f "$out/cache.dat"
fi
"$src/contrib/bench/mpi-report.sh" "$out" | tee "$out/table.txt"
if [ "$errors" != 0 ]; then echo "DATA ERRORS: $errors corrupted message(s)"; failed=1; fi
exit $failed
