#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Inside each VM of run2.sh: names, ssh (server and client, per-run keys), Open MPI settings, zv-wire; then run the command (VM a) or serve (VM b).
#
# Usage (run2.sh starts it as the VM's command; not for direct use):
#   two-host-guest.sh a -- command [args...]   set up, wait for b, exec the command
#   two-host-guest.sh b                         set up, report ready, serve ssh
#
# $ZV_TWO_HOST_DIR is a host directory shared read-write with both VMs:
#   hosts         "role name ip" lines (a zv-a 10.77.0.1 / b zv-b 10.77.0.2)
#   keys/         host_a, host_b (host keys), id (client key), known_hosts,
#                 authorized_keys: made per run by run2.sh
#   ready.a/b     written here once sshd listens (their mtimes time the boot)
#   started       written by a just before the command starts
#   ctl/          requests to the host (zv-wire kill b)
# Everything written in the VM (/etc, /root, /run) is in its tmpfs overlay:
# nothing reaches the host's /root/.ssh or /etc.
# Exit status 125: the two hosts could not be set up (the message says why).
set -eu

die() { echo "zverbs-vm2 ($role): $*" >&2; exit 125; }

role=${1:-}
case "$role" in a|b) shift ;; *) role='?'; die "usage: two-host-guest.sh a -- command... | b" ;; esac
if [ "$role" = a ]; then
    [ "${1:-}" = -- ] || die "usage: two-host-guest.sh a -- command..."
    shift
    [ $# -gt 0 ] || die "no command"
fi
dir=${ZV_TWO_HOST_DIR:?}
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$dir/hosts" ] || die "no $dir/hosts (run2.sh writes it)"

# --- names --------------------------------------------------------------
me=$(hostname)
{
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
    while read -r _r name ip; do printf '%s\t%s\n' "$ip" "$name"; done <"$dir/hosts"
} >/etc/hosts
peer=$(awk -v r="$role" '$1 != r {print $2; exit}' "$dir/hosts")
names=$(awk '{printf "%s %s ", $2, $3}' "$dir/hosts")
mkdir -p /etc/zverbs
awk '{print $2 " slots=1"}' "$dir/hosts" >/etc/zverbs/hostfile
{
    echo "ZV_ROLE=$role"
    echo "ZV_HOST=$me"
    echo "ZV_PEER=$peer"
    echo "ZV_TWO_HOST_DIR=$dir"
} >/etc/zverbs/two-host.conf

# --- ssh: per-run keys copied into the VM's tmpfs (sshd checks modes) -----
k=/run/zv-ssh
[ -d $k ] || mkdir -m 700 $k
[ -d /run/sshd ] || mkdir -m 755 /run/sshd
cp "$dir/keys/host_$role" $k/host_key
cp "$dir/keys/id" $k/id
cp "$dir/keys/known_hosts" "$dir/keys/authorized_keys" $k/
chmod 600 $k/host_key $k/id $k/authorized_keys
grep -q '^sshd:' /etc/passwd || echo 'sshd:x:101:65534::/run/sshd:/usr/sbin/nologin' >>/etc/passwd
# Commands over ssh run under root's login shell. /bin/sh reads no
# dotfiles: the host's ~/.bashrc (a pyenv init here) cost ~3 s per session
# under emulation and is none of the VMs' business.
sed -i 's#^\(root:[^:]*:0:0:[^:]*:[^:]*:\).*#\1/bin/sh#' /etc/passwd
ip=$(awk -v r="$role" '$1 == r {print $3}' "$dir/hosts")
cat >$k/sshd_config <<EOF
ListenAddress $ip
HostKey $k/host_key
PidFile $k/sshd.pid
AuthorizedKeysFile $k/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
MaxStartups 64
LogLevel ERROR
EOF
# Client side: ssh_config.d is read before the host's "Host *" defaults.
# Keep-alives: a vanished peer ends the session (and so Open MPI's daemon
# connection) in 3 x 3 s, not at TCP's timeout. Under emulation a session
# costs 2-4 s of key exchange (sntrup761 doubles it): curve25519, and one
# master connection per peer that later sessions (mpirun's, zv-wire's) share.
mkdir -p /etc/ssh/ssh_config.d
cat >/etc/ssh/ssh_config.d/00-zverbs-two-host.conf <<EOF
Host $names
    User root
    IdentityFile $k/id
    IdentitiesOnly yes
    UserKnownHostsFile $k/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    HashKnownHosts no
    BatchMode yes
    GSSAPIAuthentication no
    ConnectTimeout 10
    ServerAliveInterval 3
    ServerAliveCountMax 5
    KexAlgorithms curve25519-sha256
    ControlMaster auto
    ControlPath $k/cm-%h
    ControlPersist yes
    LogLevel ERROR
EOF
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] ||
    die "no sshd on the host: apt-get install openssh-server (contrib/setup.sh)"
/usr/sbin/sshd -f $k/sshd_config || die "sshd did not start (config $k/sshd_config)"

# --- Open MPI: mpirun must notice a vanished daemon (defaults: 300 s idle +
# 9 x 20 s), here after 3 s idle + 5 x 2 s, so a killed VM is noticed in
# ~15 s while a 5 s cut of the wire, healed late under emulation, is not
# mistaken for one (3 probes, 9 s, were: rc_verbs and rc_zv both lost
# their daemon then). Applies to every mpirun in this VM; the launcher
# stays ssh (ServerAlive 3 s x 5 likewise).
cat >>/etc/openmpi/openmpi-mca-params.conf <<EOF
# zverbs two-host VMs (two-host-guest.sh)
oob_tcp_keepalive_time = 3
oob_tcp_keepalive_intvl = 2
oob_tcp_keepalive_probes = 5
EOF

ln -sf "$here/zv-wire" /usr/local/bin/zv-wire
: >"$dir/ready.$role"

if [ "$role" = b ]; then
    # Serve until run2.sh powers this VM off.
    exec sleep infinity
fi

# --- a: wait for b, check ssh both ways, run the command -----------------
wait_s=${ZV_TWO_HOST_WAIT:-300}
i=0
until [ -f "$dir/ready.b" ]; do
    i=$((i + 1))
    [ $i -le $((wait_s * 5)) ] || die "$peer did not come up within $wait_s s"
    sleep 0.2
done
i=0
until ssh "$peer" true 2>"$k/ssh.err"; do
    i=$((i + 1))
    [ $i -le 20 ] || die "ssh $peer fails: $(cat "$k/ssh.err")"
    sleep 0.5
done
ssh "$peer" ssh "$me" true 2>"$k/ssh.err" || die "ssh $peer ssh $me fails: $(cat "$k/ssh.err")"
export ZV_HOSTFILE=/etc/zverbs/hostfile ZV_TWO_HOST=1
: >"$dir/started"
exec "$@"
