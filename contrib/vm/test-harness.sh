#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Negative and positive tests of the Soft-RoCE VM harness (run.sh): one line per check, non-zero exit on any failure.
#
# Usage: test-harness.sh [--timeout-test SECONDS]   (default 60; 0 skips it)
#
# Boots the VM five times: one boot runs most checks in one script, two
# more check exit statuses, one hangs on purpose to check --timeout (in
# parallel with the others: it is mostly idle), one is interrupted with
# SIGTERM. Expect 1-3 minutes under emulation.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
run="$here/run.sh"
vm_name=zverbs-vm-test
. "$here/vm-lib.sh"   # (qemu_of)
tmo=60
case "${1:-}" in
    --timeout-test) tmo=${2:?--timeout-test needs seconds} ;;
    "") ;;
    *) echo "usage: test-harness.sh [--timeout-test SECONDS]" >&2; exit 2 ;;
esac

pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/zverbs-vm-test.XXXXXX")
tpid=
cleanup() {
    if [ -n "$tpid" ]; then kill "$tpid" 2>/dev/null || true; wait "$tpid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$dir"

# Wait until run.sh (pid $1) has a qemu child; print its pid.
wait_qemu() {
    local q
    for _ in $(seq 1 600); do
        q=$(qemu_of "$1"); [ -z "$q" ] || { echo "$q"; return 0; }
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
gone() { local p; for p in "$@"; do ! kill -0 "$p" 2>/dev/null || return 1; done; }

# --- the timeout check runs beside the others (its guest just sleeps) ---------
if [ "$tmo" != 0 ]; then
    t0=$SECONDS
    "$run" --force-vm --share "$dir" --timeout "$tmo" -- sleep 1000 >"$dir/tmo.out" 2>"$dir/tmo.err" &
    tpid=$!
    tqemu=$(wait_qemu "$tpid" || true)
fi

# --- boot 1: devices, shared directory, environment, output streams -----------
cat >"$dir/inside.sh" <<'EOF'
#!/bin/sh
echo "OUT-MARK"
echo "ERR-MARK" >&2
ibv_devices
ibv_devinfo -d rxe0
echo "cwd=$(pwd)"
echo "home=$HOME user=$(id -un) memlock=$(ulimit -l) host=$(hostname)"
getent hosts "$(hostname)" | sed 's/^/hosts=/'
echo "written in the VM" >"$PWD/from-vm.txt"
EOF
chmod +x "$dir/inside.sh"
rc=0
"$run" --force-vm --share "$dir" -- ./inside.sh >"$dir/b1.out" 2>"$dir/b1.err" || rc=$?
check "exit status 0 is propagated (got $rc)" [ "$rc" = 0 ]
check "ibv_devices lists rxe0" grep -q '^ *rxe0 ' "$dir/b1.out"
check "ibv_devinfo -d rxe0: port 1 is PORT_ACTIVE" \
    sh -c "sed -n '/port:\\s*1\$/,\$p' '$dir/b1.out' | grep -q 'state:.*PORT_ACTIVE'"
check "a file written in the shared directory is on the host" \
    grep -qx 'written in the VM' "$dir/from-vm.txt"
check "the command runs in the caller's directory" grep -qx "cwd=$dir" "$dir/b1.out"
check "root, HOME=/root, ulimit -l unlimited, hostname zverbs-vm" \
    grep -qx 'home=/root user=root memlock=unlimited host=zverbs-vm' "$dir/b1.out"
check "/etc/hosts resolves the hostname" grep -q '^hosts=10\.0\.2\.15 .*zverbs-vm' "$dir/b1.out"
check "stdout goes to stdout, stderr to stderr" \
    sh -c "grep -qx OUT-MARK '$dir/b1.out' && grep -qx ERR-MARK '$dir/b1.err' &&
           ! grep -q ERR-MARK '$dir/b1.out' && ! grep -q OUT-MARK '$dir/b1.err'"
check "no kernel messages in the output" \
    sh -c "! grep -qE '^\\[ *[0-9]+\\.[0-9]+\\]|Linux version' '$dir/b1.out' '$dir/b1.err'"

# --- boots 2 and 3: exit statuses, arguments passed verbatim -----------------------
rc=0
out=$("$run" --force-vm --share "$dir" -- sh -c 'printf "[%s]" "$@"; exit 7' sh 'a b' "c'd" '$HOME' 2>/dev/null) || rc=$?
check "exit status 7 is propagated (got $rc)" [ "$rc" = 7 ]
check "arguments arrive verbatim (got $out)" [ "$out" = "[a b][c'd][\$HOME]" ]
rc=0
"$run" --force-vm --share "$dir" -- false >/dev/null 2>&1 || rc=$?
check "exit status 1 is propagated (got $rc)" [ "$rc" = 1 ]

# --- boot 4: SIGTERM to run.sh takes the VM down --------------------------------------
"$run" --force-vm --share "$dir" -- sleep 1000 >/dev/null 2>&1 &
kpid=$!
kqemu=$(wait_qemu "$kpid" || true)
sleep 2
kill -TERM "$kpid" 2>/dev/null || true
rc=0; wait "$kpid" || rc=$?
check "SIGTERM: run.sh exits 143 (got $rc)" [ "$rc" = 143 ]
check "SIGTERM: its qemu (pid ${kqemu:-none}) is gone" sh -c "[ -n '$kqemu' ] && ! kill -0 $kqemu 2>/dev/null"

# --- the timeout check -----------------------------------------------------------------
if [ "$tmo" != 0 ]; then
    rc=0; wait "$tpid" || rc=$?
    took=$((SECONDS - t0)); tpid=
    check "--timeout $tmo: exits 124 (got $rc)" [ "$rc" = 124 ]
    # The command sleeps 1000 s: returning near tmo proves the timeout
    # acted. The slack allows for a host loaded by other VMs (the kill
    # and clean-up took 18 s past the timeout on a host at load 9).
    check "--timeout $tmo: returns within $((tmo + 60)) s (took $took s)" [ "$took" -le $((tmo + 60)) ]
    check "--timeout $tmo: says 'command timed out after $tmo s'" \
        grep -q "zverbs-vm: command timed out after $tmo s" "$dir/tmo.err"
    check "--timeout $tmo: its qemu (pid ${tqemu:-none}) is gone" \
        sh -c "[ -n '$tqemu' ] && ! kill -0 $tqemu 2>/dev/null"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
