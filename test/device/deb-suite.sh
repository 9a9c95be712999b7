#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages on a system with a verbs device (the Soft-RoCE VM:
# run-tier.sh boots a VM of its own for this, so nothing from `make
# install` is there; contrib/matrix.sh --packages runs it chrooted into a
# Debian 13 or unstable root there): apt installs the packages contrib/deb/build.sh
# made, the README's mpirun line runs a validated MPI job over rc_zv with
# nothing else set up, contrib/examples builds against the packaged
# zverbs.pc and passes the libzverbs suite (capi-suite.sh), then apt purges
# them and nothing of them is left.
# usage: ZV_BUILDDIR=B ZV_SRCDIR=S ZV_DEB_DIR=D test/device/deb-suite.sh   (root)
export ZV_SUITE_NO_INSTALL=1
. "$(dirname "${BASH_SOURCE[0]}")/suite-lib.sh"
suite_standalone=   # the totals below are this suite's, capi-suite's included
deb_dir=${ZV_DEB_DIR:?}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
module=/usr/lib/$multiarch/ucx/libuct_zv.so.0
component=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')/mca_rcache_zverbs.so
pkgs=(zverbs libzverbs0 libzverbs-dev)
debs=()
for p in "${pkgs[@]}"; do
    f=$(ls "$deb_dir/${p}_"*.deb 2>/dev/null | head -n1)
    check "package $p built (contrib/deb/build.sh)" test -n "$f"
    [ -z "$f" ] || debs+=("$f")
done
check "no zverbs on the system before (no $module, no $component)" \
      test ! -e "$module" -a ! -e "$component"

# zverbs first, alone, as the README says; then the library packages.
export DEBIAN_FRONTEND=noninteractive
(cd "$deb_dir" && apt-get install -y ./zverbs_*.deb) > "$tmp/apt1" 2>&1
rc=$?; tail -n 3 "$tmp/apt1"
check "apt-get install ./zverbs_*.deb" test $rc = 0
check "dpkg: zverbs is installed" \
      test "$(dpkg-query -W -f='${db:Status-Status}' zverbs 2>/dev/null)" = installed
check "the module is in UCX's module directory ($module)" test -f "$module"
check "the component is in Open MPI's directory ($component)" test -f "$component"
ompi_info > "$tmp/ompi" 2>&1
check "ompi_info lists MCA rcache: zverbs" grep -q 'MCA rcache: zverbs' "$tmp/ompi"

# The README's line (Selecting zverbs), with the VM's device for mlx*,rxe*;
# under Open MPI 5 and later its Open MPI 5 line, which names the component
# path (and PMIx's own) itself: nothing from suite-lib.sh's environment.
readme=()
ompi_major=$(ompi_info --version | sed -n 's/^Open MPI v\([0-9]*\)\..*/\1/p' | head -n1)
if [ "${ompi_major:-0}" -ge 5 ]; then
    readme=(--mca mca_base_component_path "$(ompi_info --path pkglibdir --parsable | cut -d: -f3)"
            --pmixmca mca_base_component_path "$("$s/contrib/ompi-rank-path.sh" --pmix)")
fi
env -u OMPI_MCA_mca_base_component_path -u PMIX_MCA_mca_base_component_path \
    mpirun --allow-run-as-root -np 2 ${readme[@]+"${readme[@]}"} --mca pml ucx --mca pml_ucx_tls rc_zv \
    --mca pml_ucx_devices 'mlx*,rxe*' -x UCX_TLS=rc_zv,sm,self \
    "$ms_t/zv_osu" -t bw -S 4194304 -i 20 > "$tmp/readme" 2>&1
rc=$?; tail -n 3 "$tmp/readme"
check "the README's mpirun line (Open MPI ${ompi_major:-?}${readme[*]:+, with the component paths}): MPI bandwidth 1 B..4 MiB validated (UCX_TLS=rc_zv,sm,self)" \
    test $rc = 0
check "no PMIx warnings about the component path" bash -c "! grep -q 'bad prefix' '$tmp/readme'"
# Without sm, only rc_zv can carry the ranks' messages: the package's module
# does, loaded by the package's component (no LD_PRELOAD, no parameter).
mpirun --allow-run-as-root -np 2 --mca pml ucx --mca pml_ucx_tls rc_zv \
    --mca pml_ucx_devices 'mlx*,rxe*' -x UCX_TLS=rc_zv,self \
    "$ms_t/zv_osu" -t lat -S 1048576 -i 50 > "$tmp/rconly" 2>&1
rc=$?; tail -n 2 "$tmp/rconly"
check "MPI latency 1 B..1 MiB validated over UCX_TLS=rc_zv,self alone" test $rc = 0

(cd "$deb_dir" && apt-get install -y ./libzverbs0_*.deb ./libzverbs-dev_*.deb) > "$tmp/apt2" 2>&1
rc=$?; tail -n 2 "$tmp/apt2"
check "apt-get install ./libzverbs0_*.deb ./libzverbs-dev_*.deb" test $rc = 0
check "pkg-config finds the packaged zverbs.pc without a path" \
      test "$(pkg-config --variable=libdir zverbs 2>/dev/null)" = "/usr/lib/$multiarch"
ZV_CAPI_PCDIR=/usr/lib/$multiarch/pkgconfig . "$s/test/device/capi-suite.sh"

# Every file the packages brought, for the check after the purge.
for p in "${pkgs[@]}"; do dpkg -L "$p"; done 2>/dev/null | sort -u |
    while read -r f; do [ -d "$f" ] || echo "$f"; done > "$tmp/files"
check "the packages brought files (dpkg -L: $(wc -l < "$tmp/files"))" test -s "$tmp/files"
apt-get purge -y "${pkgs[@]}" > "$tmp/purge" 2>&1
rc=$?; tail -n 2 "$tmp/purge"
check "apt-get purge ${pkgs[*]}" test $rc = 0
left=$(while read -r f; do [ ! -e "$f" ] && [ ! -L "$f" ] || echo "$f"; done < "$tmp/files")
[ -z "$left" ] || echo "left behind: $left"
check "nothing of the packages is left" test -z "$left"
check "dpkg knows none of them" \
      bash -c "! dpkg-query -W -f='\${db:Status-Status}\n' ${pkgs[*]} 2>/dev/null | grep -q installed"
ompi_info > "$tmp/ompi2" 2>&1
check "ompi_info no longer lists zverbs" bash -c "! grep -q 'MCA rcache: zverbs' '$tmp/ompi2'"
mpirun --allow-run-as-root -np 2 "$ms_t/zv_osu" -t lat -S 4096 -i 50 > "$tmp/after" 2>&1
rc=$?; tail -n 1 "$tmp/after"
check "MPI runs as before the install (Open MPI's defaults, validated)" test $rc = 0

echo "package: $pass passed, $fail failed"
[ $fail = 0 ]
