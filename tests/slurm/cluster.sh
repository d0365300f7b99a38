#!/usr/bin/env bash
# cluster.sh: a one-node Slurm cluster of this machine's own, for the tests of kg-nightly
# --slurm: munged, slurmctld and slurmd as plain daemons (no systemd), every file of theirs
# in DIR (configuration, keys, state, logs, sockets), on free ports, so that nothing of the
# system's is used or changed. The node has this machine's CPUs (two at least) and two GPUs
# that are files (DIR/dev/nvidia0, nvidia1, links to /dev/null): Slurm hands them out and
# sets CUDA_VISIBLE_DEVICES as it does real ones, and the tests' searches replay recorded
# tables, so none is opened.
#
# Usage: tests/slurm/cluster.sh start DIR   writes DIR, starts the daemons, waits until the
#                                           node is idle (60 s at most); prints
#                                           SLURM_CONF=DIR/slurm.conf for the clients
#        tests/slurm/cluster.sh stop DIR    stops the daemons started in DIR
# Exit status: 0 done; 1 the cluster did not start (its logs are printed); 2 usage;
# 3 Slurm or munge is not installed, or not run as root (slurmd runs jobs as their users).
set -euo pipefail

die() { # die STATUS MESSAGE
	printf 'cluster.sh: %s\n' "$2" >&2
	exit "$1"
}

[ $# -eq 2 ] && [[ $1 == start || $1 == stop ]] || die 2 "usage: cluster.sh start|stop DIR"
dir=$(realpath -m -- "$2")

# stop_daemons: TERM to each daemon whose pid file DIR holds, then waits (10 s) for it.
stop_daemons() {
	local d pid
	for d in slurmd slurmctld munged; do
		[ -s "$dir/$d.pid" ] || continue
		pid=$(<"$dir/$d.pid")
		# the pid is the daemon's only while its command line is the daemon's
		grep -qa -- "$d" "/proc/$pid/cmdline" 2>/dev/null || continue
		kill -TERM "$pid" 2>/dev/null || continue
		for _ in $(seq 100); do
			[ -d "/proc/$pid" ] || break
			sleep 0.1
		done
		[ ! -d "/proc/$pid" ] || kill -KILL "$pid" 2>/dev/null || true
	done
}

if [ "$1" = stop ]; then
	stop_daemons
	exit 0
fi

for c in munged mungekey slurmctld slurmd sinfo; do
	PATH=$PATH:/usr/sbin:/sbin command -v "$c" >/dev/null ||
		die 3 "$c is not installed (apt-get install munge slurmctld slurmd slurm-client)"
done
PATH=$PATH:/usr/sbin:/sbin
[ "$(id -u)" -eq 0 ] || die 3 "slurmd must run as root"

# fail WHAT: the cluster did not start: says so with the daemons' logs, stops what started.
fail() {
	local f
	printf 'cluster.sh: %s\n' "$1" >&2
	for f in "$dir"/munged.log "$dir"/slurmctld.log "$dir"/slurmd.log; do
		[ ! -s "$f" ] || { printf -- '--- %s\n' "$f"; tail -n 30 "$f"; } >&2
	done
	stop_daemons
	exit 1
}

# free_port: a TCP port nothing listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

mkdir -p "$dir"/{munge,state,spool,dev}
chmod 755 "$dir/munge"
ln -sfn /dev/null "$dir/dev/nvidia0" && ln -sfn /dev/null "$dir/dev/nvidia1"
rm -f "$dir/munge/munge.key"
mungekey --create --keyfile="$dir/munge/munge.key" 2>/dev/null || fail "mungekey could not make a key"
host=$(hostname -s 2>/dev/null || hostname)
ctld_port=$(free_port) slurmd_port=$(free_port) cpus=$(nproc)
[ "$cpus" -ge 2 ] || cpus=2
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done

cat >"$dir/slurm.conf" <<CONF
# a one-node test cluster (tests/slurm/cluster.sh)
ClusterName=kgtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
# finished jobs stay known to scontrol for 10 minutes (there is no accounting for sacct)
MinJobAge=600
KillWait=5
InactiveLimit=0
GresTypes=gpu
# the machine's CPUs, two at least (the tests run two tasks at once): slurmd takes the
# configured count rather than the one it finds
SlurmdParameters=config_overrides
NodeName=kgnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus Gres=gpu:2 State=UNKNOWN
PartitionName=kg Nodes=kgnode Default=YES MaxTime=INFINITE State=UP
CONF
printf 'NodeName=kgnode Name=gpu File=%s/dev/nvidia[0-1]\n' "$dir" >"$dir/gres.conf"
export SLURM_CONF=$dir/slurm.conf

stop_daemons # a cluster left in DIR before
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
	--pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed" ||
	fail "munged did not start"
slurmctld -i || fail "slurmctld did not start"
slurmd -N kgnode || fail "slurmd did not start"

for _ in $(seq 600); do
	state=$(sinfo -h -n kgnode -o %T 2>/dev/null || true)
	[ "$state" != idle ] || { echo "SLURM_CONF=$SLURM_CONF"; exit 0; }
	sleep 0.1
done
fail "the node is not idle after 60 s (sinfo: ${state:-no answer})"
