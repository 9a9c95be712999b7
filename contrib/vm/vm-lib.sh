# SPDX-License-Identifier: BSD-3-Clause
# Shared by run.sh and run2.sh (sourced, never run): their messages, their
# help text and the options both take. The caller sets vm_name (the prefix
# of its messages) and the defaults (timeout, cpus, mem, verbose; shares,
# no_share and envs start empty here) before vm_parse.
# shellcheck shell=bash disable=SC2034,SC2154  # (the callers set and read these)

shares=()
no_share=0
envs=()

die() { echo "$vm_name: $*" >&2; exit 125; }
# The comment block after the SPDX line, up to 'set -eu', is the help text.
usage() { sed -n '3,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
now() { date +%s.%N; }
# qemu_of PID: the qemu processes PID (a run.sh) started, from /proc (no
# procps needed; run2.sh and test-harness.sh).
qemu_of() {
    local f pid comm _st ppid rest
    for f in /proc/[0-9]*/stat; do
        { read -r pid comm _st ppid rest <"$f"; } 2>/dev/null || continue
        [ "$ppid" = "$1" ] && [ "${comm#(qemu-system}" != "$comm" ] && echo "$pid"
    done
    return 0
}
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# vm_value NEED ARGS...: the value of the option in $1, "--name VALUE" or
# "--name=VALUE", into vm_val; the words it took into vm_took.
vm_value() {
    local need=$1; shift
    case "$1" in
        --*=*) vm_val=${1#*=}; vm_took=1 ;;
        *)     [ $# -ge 2 ] || die "$1 needs $need"; vm_val=$2; vm_took=2 ;;
    esac
}

# vm_parse ARGS...: the common options (--timeout, --cpus, --mem, --share,
# --no-share, -e/--env, -v, -h) into their variables, every other option to
# the caller's vm_option ARGS... (if it defines one), which sets vm_took to
# the words it took, or leaves it 0 for an option it does not know. The
# command and its arguments end up in vm_args, checked with the values.
vm_parse() {
    while [ $# -gt 0 ]; do
        vm_took=1
        case "$1" in
            --timeout|--timeout=*) vm_value "a value" "$@"; timeout=$vm_val ;;
            --cpus|--cpus=*)       vm_value "a value" "$@"; cpus=$vm_val ;;
            --mem|--mem=*)         vm_value "a value" "$@"; mem=$vm_val ;;
            --share|--share=*)     vm_value "a directory" "$@"; shares+=("$vm_val") ;;
            --no-share)            no_share=1 ;;
            -e|--env|--env=*)      vm_value "NAME=VALUE" "$@"; envs+=("$vm_val") ;;
            -v|--verbose)          verbose=1 ;;
            -h|--help)             usage; exit 0 ;;
            --)                    shift; break ;;
            -*)                    vm_took=0
                                   ! declare -F vm_option > /dev/null || vm_option "$@"
                                   [ "$vm_took" -gt 0 ] || die "unknown option '$1' (try --help)" ;;
            *)                     break ;;
        esac
        shift "$vm_took"
    done
    vm_args=("$@")
    [ $# -gt 0 ] || die "no command given (usage: ${0##*/} [options] -- command [args...])"
    case "$timeout" in ''|*[!0-9]*|0) die "--timeout wants a positive number of seconds, not '$timeout'" ;; esac
    case "$cpus" in 1|2) ;; *) die "--cpus wants 1 or 2, not '$cpus'" ;; esac
    local e
    for e in ${envs[@]+"${envs[@]}"}; do
        case "$e" in [A-Za-z_]*=*) ;; *) die "--env wants NAME=VALUE, not '$e'" ;; esac
    done
}
