#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job's report (contrib/bench/mpi-report.sh) calls a ratio only
# where the two spreads do not overlap, says "same within noise" with the
# ratio's range otherwise, names a peer that cannot run once with its
# reason (no empty column), and ends with a verdict that reports a
# corrupted transfer as a failure.
set -eu
src=${ZV_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- report:"; cat "$tmp/report"; exit 1; }

cat > "$tmp/meta.txt" <<'M'
device rxe0
link Ethernet
where vm
sweep short
rounds 5
sizes 8 1048576
window 8
cache_sizes 1048576
peers rc_zv cacheoff rc_verbs ud_zv ud_verbs
seconds 100
failed 0
M
# test peer size median min max rounds errors
cat > "$tmp/stats.dat" <<'S'
lat rc_zv 8 20 18 25 5 0
lat rc_verbs 8 21 19 30 5 0
lat rc_zv 1048576 900 880 950 5 0
lat rc_verbs 1048576 1200 1100 1300 5 0
lat ud_zv 8 30 29 31 5 0
lat ud_verbs 8 20 19 21 5 0
bw rc_zv 8 1.0 0.9 1.1 5 0
bw rc_verbs 8 1.0 0.9 1.1 5 0
bw rc_zv 1048576 40 38 42 5 0
bw rc_verbs 1048576 30 28 33 5 0
bw-fresh rc_zv 1048576 39 37 41 5 0
bw-off rc_zv 1048576 10 9 11 5 0
bw ud_zv 8 1 1 1 5 3
bw ud_verbs 8 1 1 1 5 0
S
echo "openib not run: it connects only through udcm" > "$tmp/na.txt"
: > "$tmp/switch.dat"
printf '%s\n' "uct_am_short_8 rc_verbs 700 300 0 300 100" "uct_am_short_8 rc_zv 600 200 0 300 100" \
    "uct_am_short_8 ud_verbs 3000 1000 0 1700 300" "uct_am_short_8 ud_zv 2990 1000 0 1690 300" > "$tmp/cost.dat"
"$src/contrib/bench/mpi-report.sh" "$tmp" > "$tmp/report"

grep -q '^8 B .*same within noise (0\.60-1\.32)' "$tmp/report" || fail "overlapping latency spreads at 8 B must be 'same within noise' with the range"
grep -q '^1 MiB .*0\.75, rc_zv ahead' "$tmp/report" || fail "rc_zv's 1 MiB latency, apart from rc_verbs', must be called ahead (0.75)"
grep -q '^1 MiB .*1\.33, rc_zv ahead' "$tmp/report" || fail "rc_zv's 1 MiB bandwidth must be called ahead (1.33)"
grep -q '^8 B .*1\.50, ud_zv behind' "$tmp/report" || fail "ud_zv's 8 B latency must be called behind (1.50)"
grep -q '4\.00, reuse faster' "$tmp/report" || fail "the cache: reuse against cache off must be called (4.00)"
[ "$(grep -c openib "$tmp/report")" = 1 ] || fail "openib must be named once, not as a column"
grep -q 'ud_zv FAILED its validated transfers: 3' "$tmp/report" || fail "ud_zv's corrupted messages must fail the verdict"
grep -q 'Validated transfers passed: rc_zv\.' "$tmp/report" || fail "rc_zv passed"
grep -A2 'rc_zv against rc_verbs:' "$tmp/report" | grep -q 'in all *ahead in am_short 0\.86' ||
    fail "the verdict must call rc_zv's instructions ahead"
grep -A2 'rc_zv against rc_verbs:' "$tmp/report" | grep -q 'own code *ahead in am_short 0\.67' ||
    fail "the verdict must call rc_zv's own code ahead"
grep -A2 'ud_zv against ud_verbs:' "$tmp/report" | grep -q 'in all *level in am_short 1\.00' ||
    fail "the verdict must call ud_zv's instructions level"
grep -q 'What the emulator cannot show' "$tmp/report" || fail "the VM's verdict must say what it cannot show"
echo "PASS: mpi-report calls ratios only beyond the spread, names peers not run once, fails corrupted transfers"
