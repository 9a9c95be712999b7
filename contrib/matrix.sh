#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The version matrix: zverbs built and tested in debootstrapped Debian roots
# (Debian 13 trixie, Debian unstable sid), each against that root's UCX and
# Open MPI. Per root: the root (created once by debootstrap and cached, its
# packages installed with the root's apt), configure and make in a build
# directory of its own (build-matrix/NAME in the work tree, which is
# bind-mounted into the root at its own path), the quick unit tier (make
# check-quick), an install staged with DESTDIR; then one Soft-RoCE VM boot
# in which the guest chroots into each root (test/device/matrix-tests.sh):
# the UCT device tests of rc_zv, ud_zv and uc_zv (a reduced set) and a
# validated 2-rank MPI job over each transport under the root's Open MPI.
#
# usage: contrib/matrix.sh [options] [NAME...]
#   --root NAME=DIR         the root of NAME (default: $ZV_MATRIX_ROOTS/NAME,
#                           /var/cache/zverbs/roots/NAME); made when missing
#   --suite NAME=SUITE      its Debian suite (default: NAME)
#   --ucx-src NAME=DIR|auto UCX's source tree of exactly the root's UCX
#                           version (configure --with-ucx-src); "auto": let
#                           configure fetch Debian's source package
#   --ompi-src NAME=DIR|auto|none  Open MPI's, for Open MPI 5's headers
#                           (--with-ompi-src); "none": Open MPI 4.1, whose
#                           installed headers suffice
#   --mirror URL            Debian mirror for debootstrap (default: the
#                           first of this system's apt sources)
#   --gtest-filter F        the UCT device tests to run (default below)
#   --no-vm                 no device tier (reported as skipped)
#   --packages              also the Debian packages: built in each root
#                           (contrib/deb/build.sh, from the same
#                           contrib/debian, into BUILD/deb), then, in the
#                           VM before anything else is installed there,
#                           installed, used and purged by
#                           test/device/deb-suite.sh under the root's
#                           Open MPI
#   --bench LIST            after the device tier, in the same chroot, the
#                           benchmarks of contrib/bench named in LIST ("rndv
#                           rel": rndv-bench.sh, rel-bench.sh), each beside
#                           UCX's own transports of the root's UCX; their
#                           tables go to BUILD/matrix-bench-NAME.log and the
#                           console; ZV_BENCH_* and UCX_* set here reach
#                           them (and nothing else in the root)
# NAMEs: the roots to run; default every NAME an option names, else
# "trixie sid". A root without a --ucx-src (or --ompi-src) is skipped with
# the reason: no source tree, no build. Root and source trees are read, the
# root's apt state and the build directory are written; nothing is
# installed on this system.
#
# Exit status: 0 every root passed every step; 1 a step failed; 2 nothing
# failed but a root or a step was skipped (a skip is never a pass).
# Ends with a table: root, step, result, seconds.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)

roots_base=${ZV_MATRIX_ROOTS:-/var/cache/zverbs/roots}
build_base=${ZV_MATRIX_BUILD:-$repo/build-matrix}
gtest_filter=${ZV_MATRIX_GTEST_FILTER:-'tl/iface.*:tl/am.*:tl/put.*:tl/get.*:tl/atomic.*:tl/remote_access.*:tl/pending.*:tl/lifetime.*:tl/faults.*:tl/nested_progress.*'}
mirror=
use_vm=1
bench=
packages=
declare -A root suite ucx_src ompi_src
names=()

die() { echo "matrix: $*" >&2; exit 1; }
usage() { sed -n '3,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
add_name() { case " ${names[*]-} " in *" $1 "*) ;; *) names+=("$1") ;; esac; }
kv() { # option NAME=VALUE: sets k and v
    case "$2" in [a-z]*=?*) k=${2%%=*} v=${2#*=} ;; *) die "$1 wants NAME=VALUE, not '$2'" ;; esac
    add_name "$k"
}
while [ $# -gt 0 ]; do
    case "$1" in
        --root)     kv "$1" "${2-}"; root[$k]=$v; shift ;;
        --suite)    kv "$1" "${2-}"; suite[$k]=$v; shift ;;
        --ucx-src)  kv "$1" "${2-}"; ucx_src[$k]=$v; shift ;;
        --ompi-src) kv "$1" "${2-}"; ompi_src[$k]=$v; shift ;;
        --mirror)   mirror=${2:?--mirror wants a URL}; shift ;;
        --gtest-filter) gtest_filter=${2:?--gtest-filter wants a filter}; shift ;;
        --no-vm)    use_vm=0 ;;
        --packages) packages=1 ;;
        --bench)    bench=${2?--bench wants a list, e.g. \"rndv rel\"}; shift
                    for x in $bench; do [ -x "$repo/contrib/bench/$x-bench.sh" ] ||
                        die "--bench: no contrib/bench/$x-bench.sh"; done ;;
        -h|--help)  usage; exit 0 ;;
        -*)         die "unknown option '$1' (try --help)" ;;
        *)          add_name "$1" ;;
    esac
    shift
done
[ ${#names[@]} -gt 0 ] || names=(trixie sid)
[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot and bind mounts)"

if [ -z "$mirror" ]; then
    mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
             awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }')
    [ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) .*/\2/p' \
                                 /etc/apt/sources.list 2>/dev/null | grep -v security | head -n1)
    mirror=${mirror:-http://deb.debian.org/debian}
fi

# What a root needs to build zverbs and run the quick unit tier and the
# device tests (the build and test part of contrib/setup.sh, perftest for
# rndv-bench's floor, debhelper and lintian for --packages; libpmix-dev:
# Open MPI 5's and 6's headers include pmix.h, and unstable's
# libopenmpi-dev does not depend on it).
root_packages="build-essential autoconf automake libtool pkg-config dpkg-dev
    libucx-dev ucx-utils libibverbs-dev librdmacm-dev libhwloc-dev
    libopenmpi-dev libpmix-dev openmpi-bin openmpi-common libgtest-dev googletest
    rdma-core ibverbs-providers ibverbs-utils iproute2 procps perftest
    debhelper lintian fakeroot"

# ---- the table: one row per root and step
rows=()
status=0
row() { # name step result seconds [note]
    rows+=("$(printf '%-8s %-34s %-5s %6s  %s' "$1" "$2" "$3" "$4" "${5-}")")
    case $3 in
        FAIL) status=1 ;;
        SKIP) [ $status = 1 ] || status=2 ;;
    esac
}
# step NAME STEP LOG command...: runs it with its output in LOG, one row
step() {
    local name=$1 what=$2 log=$3 t0=$SECONDS; shift 3
    echo "matrix: $name: $what (log: $log)"
    if "$@" > "$log" 2>&1; then
        row "$name" "$what" PASS $((SECONDS - t0)); return 0
    fi
    row "$name" "$what" FAIL $((SECONDS - t0))
    tail -n 30 "$log" | sed "s/^/  $name| /"
    return 1
}

# in_root ROOT command...: runs the command chrooted into ROOT, in a mount
# namespace of its own (gone with the command: nothing to unmount), with
# /proc, /sys, /dev and the directories in $binds at their own paths.
in_root() {
    local r=$1; shift
    unshare --mount --propagation private bash -c '
        set -e; r=$1; shift
        mount -t proc proc "$r/proc"
        mount --rbind /sys "$r/sys"
        mount --rbind /dev "$r/dev"
        for d in $ZV_MATRIX_BINDS; do mkdir -p "$r$d"; mount --bind "$d" "$r$d"; done
        exec chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"' \
        in_root "$r" "$@"
}

# make_root NAME DIR SUITE: debootstrap once (into DIR.new, then renamed:
# an interrupted run leaves no half root), then the packages, again only
# when the list changed.
make_root() {
    local name=$1 dir=$2 dist=$3
    if [ ! -x "$dir/usr/bin/apt-get" ]; then
        command -v debootstrap > /dev/null || die "debootstrap missing (apt-get install debootstrap)"
        rm -rf "$dir.new"; mkdir -p "$(dirname "$dir")"
        echo "debootstrap --variant=buildd $dist $dir $mirror"
        nice -n 10 debootstrap --variant=buildd "$dist" "$dir.new" "$mirror"
        mv "$dir.new" "$dir"
    fi
    # Unstable's Release file is stale on this project's mirror.
    case $dist in sid|unstable)
        echo 'Acquire::Check-Valid-Until "false";' > "$dir/etc/apt/apt.conf.d/99zverbs-matrix" ;;
    esac
    local want; want=$(echo $root_packages)
    if [ "$(cat "$dir/.zv-matrix-packages" 2>/dev/null)" != "$want" ]; then
        # shellcheck disable=SC2086  # the list is split on purpose
        ZV_MATRIX_BINDS='' in_root "$dir" sh -c "apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive nice -n 10 apt-get install -y -qq --no-install-recommends $want"
        echo "$want" > "$dir/.zv-matrix-packages"
    fi
    echo "packages: $want"
}

# The release tarball's way: configure is generated here, once, by this
# system's Autotools, and every root builds from it.
if [ ! -x "$repo/configure" ] || [ "$repo/configure.ac" -nt "$repo/configure" ] ||
   [ "$repo/Makefile.am" -nt "$repo/configure" ]; then
    (cd "$repo" && ./autogen.sh)
fi

vm_specs=()
declare -A ver
for name in "${names[@]}"; do
    dir=${root[$name]:-$roots_base/$name}
    su=${suite[$name]:-$name}
    b=$build_base/$name
    us=${ucx_src[$name]:-}; os=${ompi_src[$name]:-}
    echo "==== $name: Debian $su in $dir, build in $b"
    if [ -z "$us" ]; then
        echo "matrix: $name SKIPPED: no --ucx-src $name=DIR (UCX's internal headers of exactly the root's UCX version; 'auto' fetches Debian's source package, which this project's registry does not serve for trixie or sid)"
        row "$name" "all (no UCX source: --ucx-src)" SKIP 0; continue
    fi
    if [ -z "$os" ]; then
        echo "matrix: $name SKIPPED: no --ompi-src $name=DIR (Open MPI 5's installed headers include headers it does not install; 'auto' fetches Debian's source package, 'none' for Open MPI 4.1)"
        row "$name" "all (no Open MPI source: --ompi-src)" SKIP 0; continue
    fi
    flags=(--with-ucx-moduledir=system --with-ompi-componentdir=system)
    binds="$repo"
    case $build_base/ in "$repo"/*) ;; *) binds="$binds $build_base" ;; esac
    for src in "$us:ucx" "$os:ompi"; do
        d=${src%:*} w=${src##*:}
        case $d in
            auto) ;;
            none) [ "$w" = ompi ] || die "--ucx-src $name=none: zverbs needs UCX's sources" ;;
            *)    [ -d "$d" ] || { echo "matrix: $name SKIPPED: --$w-src $d is not a directory"
                                   row "$name" "all (no $w source: $d)" SKIP 0; continue 2; }
                  d=$(cd "$d" && pwd); binds="$binds $d"; flags+=("--with-$w-src=$d") ;;
        esac
    done
    export ZV_MATRIX_BINDS=$binds
    mkdir -p "$b"
    step "$name" "root (debootstrap $su, packages)" "$b/root.log" make_root "$name" "$dir" "$su" || continue
    ver[$name]="UCX $(in_root "$dir" dpkg-query -W -f '${Version}' libucx0), Open MPI $(in_root "$dir" sh -c \
        "dpkg-query -W -f '\${Version}' libopenmpi40 2>/dev/null || dpkg-query -W -f '\${Version}' libopenmpi3"), $(in_root "$dir" gcc --version | head -n1)"
    echo "matrix: $name: ${ver[$name]}"
    # A build directory configured by another configure or root is redone.
    if [ ! -f "$b/Makefile" ] || [ "$repo/configure" -nt "$b/Makefile" ] ||
       [ "$(cat "$b/.zv-matrix-flags" 2>/dev/null)" != "$dir ${flags[*]}" ]; then
        rm -rf "$b"; mkdir -p "$b"
        step "$name" "configure" "$b/configure.log" \
            in_root "$dir" sh -c 'cd "$1" && shift && nice -n 10 "$@"' sh "$b" "$repo/configure" "${flags[@]}" ||
            continue
        echo "$dir ${flags[*]}" > "$b/.zv-matrix-flags"
    fi
    step "$name" "make (library, module, component, tests)" "$b/make.log" \
        in_root "$dir" sh -c 'cd "$1" && nice -n 10 make -j2 && nice -n 10 make -j2 check TESTS=' sh "$b" ||
        continue
    if step "$name" "unit tier (make check-quick)" "$b/unit.log" \
            in_root "$dir" sh -c 'cd "$1" && nice -n 10 make -j2 check-quick' sh "$b"; then
        grep -hE '^\[  (PASSED|SKIPPED|FAILED)  *\] [0-9]+ test' "$b"/test/unit/zv_unit.log \
            "$b"/test/unit/zv_nomem.log | sed "s/^/  $name| /"
        grep -E '^# (TOTAL|PASS|FAIL|SKIP|ERROR):' "$b/unit.log" | tr '\n' ' ' | sed "s/^/  $name| /; s/\$/\n/"
    fi
    # The device tier installs in the VM's overlay of the root what is
    # staged here (make install itself is slow under emulation).
    step "$name" "install staged (DESTDIR)" "$b/stage.log" \
        in_root "$dir" sh -c 'cd "$1" && rm -rf matrix-stage && make install DESTDIR="$1/matrix-stage"' sh "$b" ||
        continue
    if [ -n "$packages" ]; then
        denv=(DEB_BUILD_OPTIONS=nocheck ZV_BUILDDIR="$b" ZV_DEB_DIR="$b/deb")
        case $us in auto) ;; *) denv+=(ZV_UCX_SRC="$(cd "$us" && pwd)") ;; esac
        case $os in auto|none) ;; *) denv+=(ZV_OMPI_SRC="$(cd "$os" && pwd)") ;; esac
        step "$name" "Debian packages (contrib/deb/build.sh)" "$b/deb.log" \
            in_root "$dir" env "${denv[@]}" nice -n 10 "$repo/contrib/deb/build.sh" || continue
        for f in "$b"/deb/zverbs_*.deb; do
            echo "  $name| $(basename "$f"): $(in_root "$dir" dpkg-deb -f "$f" Depends)"
        done
    fi
    vm_specs+=("$name:$dir:$b")
done

if [ ${#vm_specs[@]} -gt 0 ] && [ $use_vm = 0 ]; then
    for spec in "${vm_specs[@]}"; do row "${spec%%:*}" "device tier (--no-vm)" SKIP 0; done
elif [ ${#vm_specs[@]} -gt 0 ]; then
    echo "==== device tier: one VM boot, the guest chroots into ${#vm_specs[@]} root(s)"
    for spec in "${vm_specs[@]}"; do rm -f "${spec##*:}"/matrix-device.result "${spec##*:}"/matrix-bench-*.result; done
    shares=(--share "$repo")
    case $build_base/ in "$repo"/*) ;; *) shares+=(--share "$build_base") ;; esac
    t0=$SECONDS
    nb=$(echo $bench | wc -w)
    nice -n 10 "$repo/contrib/vm/run.sh" --timeout $(((600 + 1500 * (1 + 2 * nb)) * ${#vm_specs[@]})) --cpus 2 "${shares[@]}" \
        -e ZV_MATRIX_GTEST_FILTER="$gtest_filter" -e ZV_MATRIX_BENCH="$bench" \
        -e ZV_MATRIX_PACKAGES="$packages" -- \
        "$repo/test/device/matrix-tests.sh" "${vm_specs[@]}" 2>&1 | tee "$build_base/device.log" || true
    vm_s=$((SECONDS - t0))
    for spec in "${vm_specs[@]}"; do
        name=${spec%%:*} b=${spec##*:}
        if [ -f "$b/matrix-device.result" ]; then
            read -r pass fail secs skip < "$b/matrix-device.result"
            if [ "$fail" = 0 ] && [ "$pass" -gt 0 ]; then r=PASS; else r=FAIL; fi
            row "$name" "device tier (VM, chroot)" $r "$secs" "$pass passed, $fail failed"
            [ "${skip:-0}" = 0 ] ||
                row "$name" "device tier: checks skipped" SKIP - "$skip (their reasons: SKIP lines in $build_base/device.log)"
        else
            row "$name" "device tier (VM, chroot)" FAIL - "no result (see $build_base/device.log)"
        fi
        for x in $bench; do
            if [ -f "$b/matrix-bench-$x.result" ]; then
                read -r rc secs < "$b/matrix-bench-$x.result"
                if [ "$rc" = 0 ]; then r=PASS; else r=FAIL; fi
                row "$name" "$x-bench.sh (VM, chroot)" $r "$secs" "tables: $b/matrix-bench-$x.log"
            else
                row "$name" "$x-bench.sh (VM, chroot)" FAIL - "no result (see $build_base/device.log)"
            fi
        done
    done
    row all "VM boot to power-off" - "$vm_s"
fi

echo "==== matrix (seconds)"
for name in "${names[@]}"; do
    [ -z "${ver[$name]:-}" ] || echo "$name: ${ver[$name]}"
done
printf '%s\n' "${rows[@]}"
case $status in
    0) echo "matrix: every root passed" ;;
    1) echo "matrix: FAILED" ;;
    2) echo "matrix: nothing failed, but something was SKIPPED (not a pass)" ;;
esac
exit $status
