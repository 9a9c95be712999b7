#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The conformance command: UCX's own UCT test suite (test/gtest/uct of the
# installed UCX version's source) over rc_zv, ud_zv and uc_zv, with UCX's
# rc_verbs and ud_verbs as the control, in the Soft-RoCE VM; prints the
# table of case x transport (ran/passed/failed/skipped/aborted), every skip
# with its reason, and the time it took.
#
# usage: contrib/uct-conformance.sh [--build-only | --list | --table] [CASE...]
#   CASE          gtest test-case names (default: every generic UCT case,
#                 cases_default below, but the performance envelopes,
#                 cases_named_only)
#   --build-only  build UCX's gtest and stop
#   --list        print the cases and transports and stop
#   --table       print the tables of the last run again (from its logs)
#
# What it does:
# 1. UCX's source package of the installed version (contrib/fetch-ucx-src.sh)
#    is copied to a scratch directory, $ZV_CONFORMANCE_DIR (default
#    /var/cache/zverbs/conformance)/ucx-VERSION-KEY, and in that copy only
#    the zv transports are added to the suite (patch_gtest below): a list
#    of their own, instantiated by every generic case's macro, so the IB
#    white-box cases (test_uct_ib_*, test_devx, which cast to
#    uct_ib_iface_t) do not run on them; and `zv` beside `ib` in
#    test_md.cc's md list. No file of UCX's is kept in this tree.
# 2. It is configured as Debian builds it (debian/rules' dh_auto_configure,
#    so dpkg-buildflags too) plus --enable-gtest, and only the libraries,
#    modules and test/gtest are built (about 30 minutes on 2 cores). KEY
#    hashes this script's patch and the flags: a second run finds the
#    build and does not rebuild.
# 3. zverbs is built (contrib/build.sh, in $ZV_BUILDDIR, default ./build).
#    In the VM (contrib/vm/run.sh, 2 vCPUs), one gtest process per case
#    and transport (--gtest_filter=TL/CASE.*; the md cases per md: zv, and
#    UCX's ib), each under a timeout, with zv's module
#    ($ZV_BUILDDIR/.libs/libuct_zv.so.0) in LD_PRELOAD and
#    LD_LIBRARY_PATH/UCX_MODULE_DIR on the libraries built in step 2 (the
#    host checks with ldd that no UCX library of /usr/lib is loaded).
#    Results (the suite's list, one log per process, the table) land in
#    $ZV_BUILDDIR/conformance/.
#
# Environment: ZV_BUILDDIR, ZV_CONFORMANCE_DIR, ZV_CONFORMANCE_TLS (default
# "rc_zv ud_zv uc_zv ud_verbs rc_verbs"), ZV_CONFORMANCE_CASE_TIMEOUT (one
# process, default 3600 s), ZV_CONFORMANCE_TEST_TIMEOUT (the suite's own
# watchdog per test, -t, default 900 s as UCX's), ZV_CONFORMANCE_VM_TIMEOUT
# (the whole VM run, default 36000 s). Exit status: 0 when the VM run
# ended (whatever the table says), the VM's status otherwise.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
self=$repo/contrib/$(basename "$0")
die() { echo "uct-conformance: $*" >&2; exit 1; }
say() { echo "uct-conformance: $*" >&2; }

# Every generic UCT case of UCX 1.13 (test/gtest/uct/*.cc, v2/), by the
# macro that instantiates it for all transports; the IB white-box cases
# (test/gtest/uct/ib) are not among them. test_md/test_md_fork run per md
# (the `zv` md), the others per transport.
cases_default="test_uct_ep test_uct_pending test_many2one_am
uct_p2p_am_test uct_p2p_am_misc uct_p2p_am_tx_bufs uct_p2p_am_alignment
uct_p2p_rma_test test_p2p_rma_madvise uct_p2p_mix_test uct_p2p_err_test
uct_flush_test uct_cancel_test uct_fence_test
uct_amo_add_xor_test uct_amo_and_or_test uct_amo_cswap_test
uct_amo_fadd_fxor_test uct_amo_fand_for_test uct_amo_swap_test
test_uct_peer_failure test_uct_peer_failure_multiple
test_uct_peer_failure_keepalive test_zcopy_comp test_uct_progress
test_uct_query test_uct_event test_uct_stats
test_md test_md_fork"
md_cases=" test_md test_md_fork "
# Run only when named: UCX's performance envelopes (20 of ucx_perftest's
# tests in one gtest each, 2,000,000 messages per rate test). In the
# emulated VM a send costs a system call into Soft-RoCE: rc_zv's "am short
# rate" alone ran 2,000,000 messages at 0.013 Mpps (154 s), and in a run
# with a 200 s watchdog the envelope did not finish for any transport,
# UCX's rc_verbs and ud_verbs included (2026-12-07). They are for a host
# with an RDMA device (and UCX's own 900 s watchdog).
cases_named_only="test_uct_perf test_uct_loopback"

# The suite's lists, patched in the scratch copy only. Changing this
# function changes KEY, so the next run builds a fresh copy.
patch_gtest() {
    local d=$1
    # A list of zv's own, instantiated by the macros of the generic cases
    # (all transports, no self, no GPU) beside UCX's lists, and not by
    # UCT_INSTANTIATE_IB_TEST_CASE. (UCX's lists cannot take three more:
    # UCS_PP_FOREACH stops at 20 arguments.)
    sed -i -e 's/^#define UCT_TEST_NO_SELF_TLS \\$/#define UCT_TEST_ZV_TLS rc_zv, ud_zv, uc_zv\n\n&/' \
           -e 's/^    UCS_PP_FOREACH(_UCT_INSTANTIATE_TEST_CASE, _test_case, UCT_TEST_\(TLS\|NO_SELF_TLS\|NO_GPU_MEM_TYPE_TLS\))$/& \\\n    UCS_PP_FOREACH(_UCT_INSTANTIATE_TEST_CASE, _test_case, UCT_TEST_ZV_TLS)/' \
        "$d/test/gtest/uct/uct_test.h"
    # The md cases (test_md, test_md_fork) for the zv md, beside ib.
    sed -i 's/^\( *\)ib, \\$/&\n\1zv, \\/' "$d/test/gtest/uct/test_md.cc"
    # UCX's own later fix of its suite (UCX 1.22's uct_p2p_test.cc: "Avoid
    # this check for memory types that MD can't allocate"): 1.13 trims every
    # transfer to the md's max_alloc, which is 0 for an md that allocates
    # nothing (zv, and UCX's tcp, cma, self), so every data-transfer test
    # of uct_p2p_am_test, uct_p2p_rma_test... skipped without a reason.
    sed -i 's/^    max_length = ucs_min(max_length, sender().md_attr().cap.max_alloc \/ 2.5);$/    if (sender().md_attr().cap.alloc_mem_types \& UCS_BIT(mem_type)) {\n    &\n    }/' \
        "$d/test/gtest/uct/uct_p2p_test.cc"
    # shellcheck disable=SC2015  # die is the else
    [ "$(grep -c '_test_case, UCT_TEST_ZV_TLS)$' "$d/test/gtest/uct/uct_test.h")" = 3 ] &&
        grep -q '^ *zv, \\$' "$d/test/gtest/uct/test_md.cc" &&
        grep -q '^    if (sender().md_attr().cap.alloc_mem_types & UCS_BIT(mem_type)) {$' \
            "$d/test/gtest/uct/uct_p2p_test.cc" ||
        die "the suite is not what this script expects (UCX changed test/gtest/uct/uct_test.h, test_md.cc or uct_p2p_test.cc): update patch_gtest"
}

# Debian's configure command for this source tree: debian/rules'
# override_dh_auto_configure as make would run it, plus --enable-gtest.
debian_configure_cmd() {
    local arch
    arch=$(dpkg-architecture -qDEB_HOST_ARCH)
    make -s -n -C "$1" -f debian/rules DEB_TARGET_ARCH="$arch" DEB_HOST_ARCH="$arch" \
        override_dh_auto_configure | tr '\\\n\t' '   ' | tr -s ' ' | sed 's/ *$//'
    echo " --enable-gtest"
}

build_gtest() {
    local src key dir stamp cmd
    src=$("$repo/contrib/fetch-ucx-src.sh") || die "no UCX source tree (contrib/fetch-ucx-src.sh failed)"
    cmd=$(debian_configure_cmd "$src")
    case "$cmd" in dh_auto_configure\ --*) ;; *) die "debian/rules' configure step is not what this script expects: '$cmd'" ;; esac
    key=$( { declare -f patch_gtest; echo "$cmd"; } | sha256sum | cut -c1-12)
    dir=$conf_dir/$(basename "$src")-$key
    stamp=$dir/.zv-gtest-built
    gtest_dir=$dir
    if [ -f "$stamp" ] && [ -x "$dir/test/gtest/gtest" ]; then
        say "UCX gtest already built: $dir"
        return 0
    fi
    say "building UCX's gtest in $dir (configure: ${cmd#dh_auto_configure -- })"
    if [ ! -f "$dir/.zv-patched" ]; then
        # Builds of another patch or configuration are not used again.
        find "$conf_dir" -maxdepth 1 -name "$(basename "$src")-*" ! -name "$(basename "$dir")" \
            -exec rm -rf {} + 2>/dev/null || true
        rm -rf "$dir"
        mkdir -p "$conf_dir"
        cp -a "$src" "$dir.tmp"
        patch_gtest "$dir.tmp"
        mv "$dir.tmp" "$dir"
        touch "$dir/.zv-patched"
    fi
    (
        cd "$dir"
        if [ ! -x configure ]; then
            ./autogen.sh > autogen.log 2>&1 || { tail -20 autogen.log; exit 1; }
        fi
        if [ ! -f config.status ]; then
            # dh_auto_configure exports dpkg-buildflags' CFLAGS, CPPFLAGS, LDFLAGS.
            eval "$cmd" > configure.log 2>&1 || { tail -30 configure.log; exit 1; }
        fi
        # The libraries and modules, then the suite; nothing else (no
        # tools, examples, docs, bindings). The suite's own code is built
        # with its warnings not errors: g++ 12 finds some that UCX 1.13's
        # compilers did not (-Werror=use-after-free in its malloc hook
        # tests); the libraries are built as Debian builds them.
        local sub flags=()
        for sub in src/ucm src/ucs src/uct src/ucp src/tools/perf/lib test/gtest; do
            [ "$sub" != test/gtest ] ||
                flags=("CFLAGS=$(sed -n 's/^CFLAGS = //p' test/gtest/Makefile) -Wno-error"
                       "CXXFLAGS=$(sed -n 's/^CXXFLAGS = //p' test/gtest/Makefile) -Wno-error")
            make -j2 -C "$sub" "${flags[@]}" > "make-${sub//\//-}.log" 2>&1 ||
                { tail -40 "make-${sub//\//-}.log"; exit 1; }
        done
    ) || die "building UCX's gtest failed (logs in $dir)"
    touch "$stamp"
    say "UCX gtest built: $dir"
}

# What a case needs set, printed under the table; NAME=VALUE lines for case
# $1 over transport $2.
# - The suite's settings for its IB transports, by zv's names (issue 42,
#   item 9). The suite sets RC_TIMEOUT, RC_RETRY_COUNT, UD_TIMEOUT (and
#   IB_SEG_SIZE, *_TX_QUEUE_LEN) only where has_rc()/has_ud()/has_ib() say
#   a transport is UCX's own, so they never reach UCX_RC_ZV_*/UCX_UD_ZV_*/
#   UCX_UC_ZV_*; only what a case needs is set here, with its reason.
# - The control: UCX's ud_verbs drops every packet rxe delivers unless its
#   destination GID check is off (UCX_UD_VERBS_ETH_DGID_CHECK=n, as the
#   project's benchmarks run it; with the check on, every ud_verbs case
#   aborts at its first message with "unhandled timeout error", UCX's
#   ucx_perftest too).
case_env() {
    case "$1:$2" in
        # The peer-failure cases wait 10 s (DEFAULT_TIMEOUT_SEC) for the
        # error callback; the suite shortens its transports' timeouts to fit
        # (test_peer_failure.cc: RC_TIMEOUT?=100us, RC_RETRY_COUNT?=4,
        # UD_TIMEOUT?=3s). zv's defaults (1 s x 6 retries, 10 s) do not fit.
        test_uct_peer_failure*:rc_zv) echo UCX_RC_ZV_TIMEOUT=100us; echo UCX_RC_ZV_RETRY_COUNT=4 ;;
        test_uct_peer_failure*:ud_zv) echo UCX_UD_ZV_TIMEOUT=3s ;;
        test_uct_peer_failure*:uc_zv) echo UCX_UC_ZV_TIMEOUT=3s ;;
    esac
    case "$2" in
        ud_verbs) echo UCX_UD_VERBS_ETH_DGID_CHECK=n ;;
    esac
}

# The guest side: one gtest process per case and transport. Reads ZV_CF_*
# (set by the host side below), writes into $ZV_CF_RESULTS: list.txt (the
# suite's test list), logs/TL__CASE.log and runs.tsv (TL CASE status
# seconds env).
in_vm() {
    local g=$ZV_CF_GTEST res=$ZV_CF_RESULTS tl c filter t0 t1 rc envs n
    local libs=$g/src/ucs/.libs:$g/src/uct/.libs:$g/src/ucm/.libs:$g/src/ucp/.libs:$g/src/tools/perf/lib/.libs
    local -a base=(env "LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                   "UCX_MODULE_DIR=$g/modules" "LD_PRELOAD=$ZV_CF_MODULE"
                   UCX_HANDLE_ERRORS=bt UCX_LOG_LEVEL=warn UCX_LOG_PRINT_ENABLE=y)
    mkdir -p "$res/logs"
    cd "$(mktemp -d)"
    echo "uct-conformance: in the VM: $(ibv_devices | awk 'NR>2 {printf "%s ", $1}')" >&2
    # The suite's own list: what each case instantiates over each transport.
    "${base[@]}" timeout -k 10 600 "$g/test/gtest/gtest" --gtest_list_tests \
        --gtest_filter="$ZV_CF_LIST_FILTER" > "$res/list.txt" 2> "$res/list.err" ||
        { echo "uct-conformance: listing the suite's tests failed:" >&2; tail "$res/list.err" >&2; return 1; }
    : > "$res/runs.tsv"
    for c in $ZV_CF_CASES; do
        for tl in $ZV_CF_TLS; do
            filter="$tl/$c.*"
            # the md cases run per md: zv for the zv transports, ib (UCX's
            # verbs md) for the control; once each.
            case " $md_cases " in *" $c "*)
                case "$tl" in *_zv) filter="zv/$c.*" ;; *) filter="ib/$c.*" ;; esac
                grep -q "^${filter%%/*}:$c\$" "$res/runs.key" 2>/dev/null && continue
                echo "${filter%%/*}:$c" >> "$res/runs.key" ;;
            esac
            n=$(awk -v p="${filter%.\*}." 'index($0, p) == 1 { s = 1; next } /^[^ ]/ { s = 0 } s' "$res/list.txt" | wc -l)
            if [ "$n" = 0 ]; then
                printf '%s\t%s\tnone\t0\t\n' "${filter%%/*}" "$c" >> "$res/runs.tsv"
                continue
            fi
            envs=$(case_env "$c" "$tl" | tr '\n' ' ')
            echo "uct-conformance: ${filter%.\*} ($n tests)${envs:+ with $envs}" >&2
            t0=${EPOCHREALTIME/./} rc=0
            # shellcheck disable=SC2086  # envs: NAME=VALUE words
            timeout -k 10 "$ZV_CF_CASE_TIMEOUT" "${base[@]}" $envs "$g/test/gtest/gtest" \
                --gtest_filter="$filter" -t "$ZV_CF_TEST_TIMEOUT" \
                > "$res/logs/${filter%%/*}__$c.log" 2>&1 || rc=$?
            t1=${EPOCHREALTIME/./}
            printf '%s\t%s\t%s\t%s\t%s\n' "${filter%%/*}" "$c" "$rc" \
                $(( (t1 - t0 + 500000) / 1000000 )) "$envs" >> "$res/runs.tsv"
        done
    done
}

# The tables from $res: runs.tsv and the logs.
tabulate() {
    local res=$1
    awk -F'\t' -v res="$res" -v tls="$tls" -v cases="${cases[*]}" -v mdc="$md_cases" -v list="$res/list.txt" '
    function count(tl, c,   f, line, cur, name, n, k, why) {
        f = res "/logs/" tl "__" c ".log"
        cur = ""
        while ((getline line < f) > 0) {
            if (line ~ /^\[ RUN      \] /) {
                split(line, a, " "); cur = a[4]; R[tl, c]++; why = ""; continue
            }
            if (cur == "") continue
            if (line ~ /^\[     SKIP \] /) { why = substr(line, 14); if (why == "") why = "(no reason given)"; continue }
            if (line ~ /^\[       OK \] / || line ~ /^\[  FAILED  \] /) {
                split(line, a, " "); name = a[4]; sub(/,$/, "", name)
                if (name != cur) continue
                short = cur; sub(/^[^\/]*\//, "", short); sub(/^[^.]*\./, "", short)
                if (line ~ /FAILED/) { F[tl, c]++; fails = fails "\n- " cur ":" msg[tl, c, cur] }
                else if (why != "") { S[tl, c]++; skips[tl, c, why] = skips[tl, c, why] " " short; sk[tl, c] = sk[tl, c] SUBSEP why }
                else P[tl, c]++
                cur = ""; continue
            }
            if (line ~ /Failure|ERROR|WARN|[Ee]xpected|Which is|Value of|Actual:|[Aa]bort|Segmentation|signal|Got [0-9]+ errors|[Tt]imeout|[Ww]atchdog/ &&
                nmsg[tl, c, cur]++ < 6)
                msg[tl, c, cur] = msg[tl, c, cur] "\n    " substr(line, 1, 200)
        }
        close(f)
        if (cur != "") { A[tl, c]++; aborted_at[tl, c] = cur
                         fails = fails "\n- " cur ": ABORTED (" (st == 124 ? "killed after the case timeout" : "process status " st) ")" msg[tl, c, cur] }
    }
    FILENAME == list { if ($0 ~ /^[^ ]/) { hdr = $0; sub(/\.$/, "", hdr) } else if (hdr != "") N[hdr]++; next }
    {
        tl = $1; c = $2; st = $3; T[tl, c] = $4; ST[tl, c] = st; E[tl, c] = $5; seen[tl, c] = 1
        ttl[tl] += $4; total += $4
        if (st != "none") count(tl, c)
        runs[++nr] = tl SUBSEP c
    }
    function cell(tl, c,   s, n) {
        if (!((tl, c) in seen)) return "not run"
        if (ST[tl, c] == "none") return "—"
        n = N[tl "/" c]
        s = (R[tl, c] + 0) "/" (P[tl, c] + 0) "/" (F[tl, c] + 0) "/" (S[tl, c] + 0) "/" (A[tl, c] + 0)
        if (F[tl, c] + A[tl, c] > 0) s = "**" s "**"
        if (n > R[tl, c]) s = s " (" n - R[tl, c] " not reached" (ST[tl, c] != 0 ? ", exit " ST[tl, c] : "") ")"
        else if (ST[tl, c] != 0 && F[tl, c] + A[tl, c] == 0) s = s " **(exit " ST[tl, c] ")**"
        return s
    }
    END {
        nt = split(tls, TL, " "); nc = split(cases, C, " ")
        print "ran/passed/failed/skipped/aborted per case and transport (one gtest process each):"
        print ""
        printf "| case |"; for (i = 1; i <= nt; i++) printf " %s |", TL[i]; print ""
        printf "|---|"; for (i = 1; i <= nt; i++) printf "---|"; print ""
        for (j = 1; j <= nc; j++) {
            if (index(mdc, " " C[j] " ")) continue
            printf "| %s |", C[j]; for (i = 1; i <= nt; i++) printf " %s |", cell(TL[i], C[j]); print ""
        }
        hasmd = 0
        for (j = 1; j <= nc; j++) if (index(mdc, " " C[j] " ")) hasmd = 1
        if (hasmd) {
            print ""; print "| md case | zv | ib (UCX) |"; print "|---|---|---|"
            for (j = 1; j <= nc; j++) if (index(mdc, " " C[j] " "))
                printf "| %s | %s | %s |\n", C[j], cell("zv", C[j]), cell("ib", C[j])
        }
        print ""; print "Skipped, by reason (the suite'"'"'s skip message):"
        for (r = 1; r <= nr; r++) {
            split(runs[r], k, SUBSEP); tl = k[1]; c = k[2]
            if (!(S[tl, c] > 0)) continue
            delete done
            n = split(sk[tl, c], W, SUBSEP)
            for (w = 2; w <= n; w++) if (!(W[w] in done)) {
                done[W[w]] = 1; printf "- %s/%s %s:%s\n", tl, c, W[w], skips[tl, c, W[w]]
            }
        }
        if (fails != "") { print ""; print "Failed and aborted (first lines of each; logs in " res "/logs):" fails }
        envs = ""
        for (r = 1; r <= nr; r++) { split(runs[r], k, SUBSEP); if (E[k[1], k[2]] != "") envs = envs "\n- " k[1] "/" k[2] ": " E[k[1], k[2]] }
        if (envs != "") { print ""; print "Settings (the zv equivalents of the suite'"'"'s IB ones, item 9; the control'"'"'s):" envs }
        print ""
        printf "Time in the VM per transport:"; for (i = 1; i <= nt; i++) printf " %s %d s,", TL[i], ttl[TL[i]]
        printf " md zv %d s, ib %d s; total %d s\n", ttl["zv"], ttl["ib"], total
    }' "$res/list.txt" "$res/runs.tsv"
}

# The host side (a function, so that editing this file while it runs
# does not change what it runs).
main() {
    conf_dir=${ZV_CONFORMANCE_DIR:-/var/cache/zverbs/conformance}
    build_only=0 list_only=0 table_only=0
    cases=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --in-vm) in_vm; exit $? ;;
            --build-only) build_only=1 ;;
            --list) list_only=1 ;;
            --table) table_only=1 ;;
            -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
            -*) die "unknown option $1 (--help)" ;;
            *) cases+=("$1") ;;
        esac
        shift
    done
    if [ ${#cases[@]} -eq 0 ]; then
        read -r -d '' -a cases <<< "$cases_default" || true
        say "not run unless named: $cases_named_only (performance envelopes; see the script)"
    fi
    tls=${ZV_CONFORMANCE_TLS:-rc_zv ud_zv uc_zv ud_verbs rc_verbs}
    if [ "$list_only" = 1 ]; then
        echo "cases: ${cases[*]}"; echo "transports: $tls"; exit 0
    fi

    start=$SECONDS
    build=${ZV_BUILDDIR:-$repo/build}
    export ZV_BUILDDIR=$build
    res=$build/conformance
    mkdir -p "$res"
    if [ "$table_only" = 1 ]; then
        [ -f "$res/runs.tsv" ] || die "no results in $res"
        tabulate "$res"; exit 0
    fi
    "$repo/contrib/build.sh" > "$res/build.log" 2>&1 ||
        { tail -30 "$res/build.log"; die "building zverbs failed (contrib/build.sh; log: $res/build.log)"; }
    module=$build/.libs/libuct_zv.so.0
    [ -f "$module" ] || die "no $module after contrib/build.sh"

    build_gtest
    [ "$build_only" = 0 ] || exit 0

    # This run's results only.
    rm -rf "$res/logs" "$res/list.txt" "$res/list.err" "$res/runs.tsv" "$res/runs.key" "$res/table.md"
    # The gtest, the zv module and UCX's libraries must be one build of UCX:
    # the libraries and modules built from source (the module was built
    # against the installed UCX of the same version), none of /usr/lib's.
    libs=$gtest_dir/src/ucs/.libs:$gtest_dir/src/uct/.libs:$gtest_dir/src/ucm/.libs:$gtest_dir/src/ucp/.libs:$gtest_dir/src/tools/perf/lib/.libs
    mixed=$(LD_PRELOAD=$module LD_LIBRARY_PATH=$libs ldd "$gtest_dir/test/gtest/gtest" |
            awk -v d="$gtest_dir/" '$1 ~ /^lib(ucs|uct|ucp|ucm)/ && index($3, d) != 1')
    [ -z "$mixed" ] || die "the gtest would load UCX libraries from outside $gtest_dir: $mixed"

    filter=
    for c in "${cases[@]}"; do filter="$filter${filter:+:}*/$c.*"; done
    say "running ${#cases[@]} cases over $tls in the VM (logs: $res/logs)"
    t_vm=$SECONDS rc=0
    ( cd "$res" &&
      "$repo/contrib/vm/run.sh" --timeout "${ZV_CONFORMANCE_VM_TIMEOUT:-36000}" --cpus 2 --mem 4G --share "$res" \
          -e ZV_CF_GTEST="$gtest_dir" -e ZV_CF_MODULE="$module" -e ZV_CF_RESULTS="$res" \
          -e ZV_CF_CASES="${cases[*]}" -e ZV_CF_TLS="$tls" -e ZV_CF_LIST_FILTER="$filter" \
          -e ZV_CF_CASE_TIMEOUT="${ZV_CONFORMANCE_CASE_TIMEOUT:-3600}" \
          -e ZV_CF_TEST_TIMEOUT="${ZV_CONFORMANCE_TEST_TIMEOUT:-900}" \
          -- "$self" --in-vm ) || rc=$?
    [ -f "$res/runs.tsv" ] || die "the VM run produced no results (status $rc)"
    tabulate "$res" > "$res/table.md"
    cat "$res/table.md"
    echo
    echo "uct-conformance: $((SECONDS - start)) s in all, $((SECONDS - t_vm)) s in the VM (status $rc); table in $res/table.md"
    [ "$rc" = 0 ] || exit "$rc"
}

main "$@"; exit $?
