#!/usr/bin/env bash
# make test-slurm: the sweep driver's slurm engine on a one-node Slurm
# cluster on this host. It installs Debian's slurm-wlm and munge when
# they are missing, starts munged, slurmctld and slurmd as root with a
# slurm.conf, key, sockets, state and logs in a temporary directory
# (free ports, the node as `slurmd -C` describes it), runs a grid sweep
# and a sharded search sweep through the local and the slurm engines,
# compares their results, and stops the daemons it started by their
# pids on exit. Usage: scripts/slurm/test.sh [BIN]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-bin}
GO=${GO:-go}

need_install() {
	for c in munged slurmctld slurmd sbatch squeue sacct scontrol; do
		command -v "$c" >/dev/null 2>&1 || return 0
	done
	return 1
}
if need_install; then
	echo "test-slurm: installing slurm-wlm and munge (Debian)"
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo -n"
	# Keep the packages' own services from starting: the test runs its own.
	policy=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		policy=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
		$sudo chmod 755 "$policy"
	fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
	[ -z "$policy" ] || $sudo rm -f "$policy"
fi
if [ "$(id -u)" != 0 ]; then
	echo "test-slurm: the one-node cluster's daemons run as root; run as root" >&2
	exit 1
fi

tmp=$(mktemp -d /tmp/ipu-slurm-test.XXXXXX)
chmod 755 "$tmp"
ok=0
stop_daemons() {
	# The daemons this script started, by the pids they wrote.
	for f in slurmd.pid slurmctld.pid munge/munged.pid; do
		[ -s "$tmp/$f" ] || continue
		pid=$(cat "$tmp/$f")
		kill "$pid" 2>/dev/null || continue
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	done
	if [ "$ok" = 1 ]; then
		rm -rf "$tmp"
	else
		echo "test-slurm: FAILED; logs and outputs kept in $tmp" >&2
		for l in slurmctld.log slurmd.log; do
			[ -f "$tmp/$l" ] && { echo "--- $l (last lines)" >&2; tail -n 15 "$tmp/$l" >&2; }
		done
	fi
}
trap stop_daemons EXIT

# Two free ports for slurmctld and slurmd.
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "test-slurm: no free port" >&2
	exit 1
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done

mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/node"
chmod 755 "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$tmp/munge/munge.key"
munged --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.socket" \
	--pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed"

node=$(slurmd -C | sed -n 's/^NodeName=\([^ ]*\) .*/\1/p')
cpus=$(slurmd -C | sed -n 's/.* CPUs=\([0-9]*\) .*/\1/p')
mem=$(slurmd -C | sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p')
cat >"$tmp/slurm.conf" <<EOF
# A one-node cluster for make test-slurm (scripts/slurm/test.sh).
ClusterName=ipusweep
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket
CredType=cred/munge
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# No slurmdbd: sacct reads nothing, the sweep driver reads the job
# completion file instead.
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$tmp/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for i in $(seq 60); do
	state=$(sinfo -h -N -o %T 2>/dev/null || true)
	[ "$state" = idle ] && break
	[ "$i" = 60 ] && { echo "test-slurm: node not idle after 30 s (state: ${state:-none})" >&2; exit 1; }
	sleep 0.5
done
echo "test-slurm: $(sinfo -V) cluster up: node $node CPUs=$cpus RealMemory=$mem, ports $ctld_port/$slurmd_port, in $tmp"

sweep() { "$GO" run ./scripts/sweep --bin "$BIN" "$@"; }
# results.csv without its wall-time columns (plan_seconds, link_seconds).
masked() { cut -d, -f1-7,10- "$1"; }

check_sweep() {
	local file=$1 name=$2
	sweep --engine local -j 2 -o "$tmp/$name-local" "$file" >"$tmp/$name-local.log"
	sweep --engine slurm -j 2 --poll 1s --node-dir "$tmp/node" -o "$tmp/$name-slurm" "$file" | tee "$tmp/$name-slurm.log"
	if ! diff <(masked "$tmp/$name-local/results.csv") <(masked "$tmp/$name-slurm/results.csv"); then
		echo "test-slurm: $name: results.csv differs between the local and slurm engines" >&2
		exit 1
	fi
	local n array
	n=$(($(wc -l <"$tmp/$name-local/results.csv") - 1))
	array=$(sed -n 's/^slurm: submitted array job \([0-9]*\) .*/\1/p' "$tmp/$name-slurm.log")
	for t in $(seq 0 $((n - 1))); do
		grep -q "^slurm: jobcomp ${array}_$t COMPLETED exit 0:0$" "$tmp/$name-slurm.log" ||
			{ echo "test-slurm: $name: task ${array}_$t not accounted COMPLETED" >&2; exit 1; }
	done
	grep -q "^JobId=[0-9]* .*ArrayJobId=$array ArrayTaskId=$((n - 1)) " "$tmp/jobcomp.txt" ||
		{ echo "test-slurm: $name: task ${array}_$((n - 1)) not in the job completion file" >&2; exit 1; }
	# Done configurations are not submitted again.
	sweep --engine slurm --poll 1s --node-dir "$tmp/node" -o "$tmp/$name-slurm" "$file" >"$tmp/$name-again.log"
	grep -q "^sweep: $n configurations, $n done before, 0 to submit$" "$tmp/$name-again.log" ||
		{ echo "test-slurm: $name: a second run submitted again" >&2; cat "$tmp/$name-again.log" >&2; exit 1; }
	echo "test-slurm: $name: $n configurations, results.csv as the local engine's, $n array tasks accounted"
}

check_sweep testdata/sweeps/small.json grid

# --no-wait: one configuration lost, resubmitted alone; the driver
# returns at once and the collect job writes the results.
first=$(sed -n '2s/,.*//p' "$tmp/grid-slurm/results.csv")
rm "$tmp/grid-slurm/$first/result.json"
sweep --engine slurm --no-wait --node-dir "$tmp/node" -o "$tmp/grid-slurm" testdata/sweeps/small.json >"$tmp/nowait.log"
grep -q "^sweep: 4 configurations, 3 done before, 1 to submit$" "$tmp/nowait.log" ||
	{ echo "test-slurm: --no-wait: not one configuration submitted" >&2; cat "$tmp/nowait.log" >&2; exit 1; }
collect=$(sed -n 's/.* and collect job \([0-9]*\) after it.*/\1/p' "$tmp/nowait.log")
for i in $(seq 240); do
	[ -z "$(squeue -h -j "$collect" 2>/dev/null)" ] && break
	[ "$i" = 240 ] && { echo "test-slurm: --no-wait: collect job $collect still queued after 120 s" >&2; exit 1; }
	sleep 0.5
done
diff <(masked "$tmp/grid-local/results.csv") <(masked "$tmp/grid-slurm/results.csv") ||
	{ echo "test-slurm: --no-wait: results.csv differs from the local engine's" >&2; exit 1; }
echo "test-slurm: --no-wait: the lost configuration ran again, collect job $collect wrote the same results"

check_sweep testdata/sweeps/search.json search
if ! diff "$tmp/search-local/searches.csv" "$tmp/search-slurm/searches.csv"; then
	echo "test-slurm: search: searches.csv differs between the local and slurm engines" >&2
	exit 1
fi
cmp "$tmp/search-local/$(sed -n '2s/,.*//p' "$tmp/search-local/searches.csv")/model.plan" \
	"$tmp/search-slurm/$(sed -n '2s/,.*//p' "$tmp/search-slurm/searches.csv")/model.plan"
echo "test-slurm: search: merged plans and searches.csv equal"
ok=1
echo "test-slurm: PASS"
