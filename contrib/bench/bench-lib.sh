# shellcheck shell=bash disable=SC2154  # (mod, b and src: set by the calling script)
# SPDX-License-Identifier: BSD-3-Clause
# Helpers shared by the benchmark scripts of contrib/bench (sourced).

# pt_column COL FILE: one column of ucx_perftest's final line (-f): 3 =
# median latency, 7 = overall MB/s; "nan" when the run printed none.
pt_column() {
    awk -v c="$1" '$1 ~ /^[0-9]+$/ && NF >= 8 {v = $(c - 1)} END {print (v == "" ? "nan" : v)}' "$2"
}
# pt_pair OUT ARGS...: one ucx_perftest server and client (-f) on this host
# with ARGS and the module $mod preloaded, the client's output in OUT (the
# server's in OUT.srv). The server listens once it has opened its
# transports, slow under emulation: waited for (up to 60 s), not slept.
# A ucx_perftest built with MPI (Debian 13's) calls MPI_Init when its
# stdin is not a terminal and then wants two MPI ranks: -P 0 turns its MPI
# mode off (an option only such a build has), and its singleton MPI
# process opens no transports of its own (pml ob1, btl self).
pt_pair() {
    local out=$1; shift
    local port=$((20000 + RANDOM % 20000)) w
    if [ -z "${pt_opts+set}" ]; then
        pt_opts=() pt_env=(LD_PRELOAD="$mod")
        if ucx_perftest -h 2>&1 | grep -q -- '-P <0|1>'; then
            pt_opts=(-P 0) pt_env+=(OMPI_MCA_pml=ob1 OMPI_MCA_btl=self)
        fi
    fi
    set -- ${pt_opts[@]+"${pt_opts[@]}"} "$@"
    env "${pt_env[@]}" timeout 600 ucx_perftest -p $port "$@" > "$out.srv" 2>&1 &
    local spid=$!
    for ((w = 0; w < 120; ++w)); do
        ss -ltn 2>/dev/null | grep -q ":$port " && break
        sleep 0.5
    done
    env "${pt_env[@]}" timeout 600 ucx_perftest -p $port -f "$@" 127.0.0.1 > "$out" 2>&1 || true
    wait $spid || true
}
# median: of the numbers on stdin (space separated).
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "nan")}'; }
# ratio A B: A / B with two decimals, n/a unless both are positive.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
# start_busy / stop_busy: one busy process beside the ranks (the "busy"
# load of the benchmarks), and its end; stop_busy does nothing without one.
busy_pid=
start_busy() { (while :; do :; done) & busy_pid=$!; }
stop_busy() { if [ -n "$busy_pid" ]; then kill "$busy_pid"; wait "$busy_pid" 2>/dev/null || true; busy_pid=; fi; }
# bench_in_vm [run.sh options...] -- [arguments]: where this host has no
# active RDMA port, run the calling script again in the Soft-RoCE VM with
# those arguments (2 vCPUs, the source tree $src, the build $b and the UCX
# sources it was built with shared; run.sh passes every ZV_* variable on),
# and never return; on a host with a port, return at once.
bench_in_vm() {
    ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE && return 0
    local opts=() ucx_src
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    ucx_src=$(sed -n 's/^UCX_SRC = //p' "$b/Makefile" 2>/dev/null || true)
    exec "$src/contrib/vm/run.sh" --timeout "${ZV_BENCH_TIMEOUT:-3000}" --cpus 2 ${opts[@]+"${opts[@]}"} \
        --share "$src" --share "$b" ${ucx_src:+--share "$ucx_src"} -- "$0" "$@"
}
