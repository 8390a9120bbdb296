#!/usr/bin/env bash
# make test-slurm: the sweep driver's slurm engine on a one-node Slurm
# cluster on this host. It installs Debian's slurm-wlm and munge when
# they are missing, and slurmdbd and mariadb-server for accounting,
# starts munged, a private mariadbd, slurmdbd, slurmctld and slurmd as
# root with a slurm.conf, key, database, sockets, state and logs in a
# temporary directory (free ports, the node as `slurmd -C` describes
# it; the database part is scripts/slurm/dbd.sh), runs a grid sweep and
# a sharded search sweep through the local and the slurm engines,
# compares their results, checks that sacct lists every array task
# COMPLETED, and stops the daemons it started by their pids on exit.
# Usage: scripts/slurm/test.sh [BIN]
set -euo pipefail
cd "$(dirname "$0")/../.."
# The daemons live in sbin, which a CI job's PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"
BIN=${1:-bin}
# GRID is the grid sweep checked (GRID=testdata/sweeps/qk.json runs the
# issue's 16-configuration example).
GRID=${GRID:-testdata/sweeps/small.json}
GO=${GO:-go}
. scripts/slurm/dbd.sh

need_install() {
	for c in munged slurmctld slurmd slurmdbd sbatch squeue sacct sacctmgr scontrol \
		mariadbd mariadb-install-db mariadb mariadb-admin; do
		command -v "$c" >/dev/null 2>&1 || return 0
	done
	return 1
}
if need_install; then
	echo "test-slurm: installing slurm-wlm, slurmdbd, munge and mariadb-server (Debian)"
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
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
		slurm-wlm slurmdbd munge mariadb-server >/dev/null
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
	# The daemons this script started, by their pids, last started first.
	for f in slurmd.pid slurmctld.pid slurmdbd.pid mariadbd.pid munge/munged.pid; do
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
		for l in slurmctld.log slurmd.log slurmdbd.log db/mariadbd.log; do
			[ -f "$tmp/$l" ] && { echo "--- $l (last lines)" >&2; tail -n 15 "$tmp/$l" >&2; }
		done
	fi
}
trap stop_daemons EXIT

# A free port for each of mariadbd, slurmdbd, slurmctld and slurmd,
# none given twice: free_port VAR sets VAR.
ports=" "
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 20000))
		[ "${ports/ $p /}" = "$ports" ] || continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			ports="$ports$p "
			printf -v "$1" %s "$p"
			return
		fi
	done
	echo "test-slurm: no free port" >&2
	exit 1
}

start_munged() {
	mkdir -p "$tmp/munge"
	chmod 755 "$tmp/munge"
	dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
	chmod 600 "$tmp/munge/munge.key"
	munged --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.socket" \
		--pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed"
}

# write_slurm_conf: the cluster's slurm.conf, its node as `slurmd -C`
# describes this host, accounting through slurmdbd on dbd_port.
write_slurm_conf() {
	node=$(slurmd -C | sed -n 's/^NodeName=\([^ ]*\) .*/\1/p')
	cpus=$(slurmd -C | sed -n 's/.* CPUs=\([0-9]*\) .*/\1/p')
	mem=$(slurmd -C | sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p')
	free_port ctld_port
	free_port slurmd_port
	mkdir -p "$tmp/state" "$tmp/spool" "$tmp/node"
	cat >"$tmp/slurm.conf" <<EOF
# A one-node cluster for make test-slurm (scripts/slurm/test.sh).
ClusterName=$cluster
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
# Accounting in slurmdbd's database, where sacct reads it; the job
# completion file too, which the sweep driver reads on a cluster
# without accounting storage.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
# Not a password: with auth/munge, the munged socket for slurmdbd's
# connections (AuthInfo's is not used for them).
AccountingStoragePass=$tmp/munge/munge.socket
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start_slurm() {
	slurmctld -f "$SLURM_CONF"
	slurmd -f "$SLURM_CONF"
	local i state
	for i in $(seq 60); do
		state=$(sinfo -h -N -o %T 2>/dev/null || true)
		[ "$state" = idle ] && break
		[ "$i" = 60 ] && { echo "test-slurm: node not idle after 30 s (state: ${state:-none})" >&2; exit 1; }
		sleep 0.5
	done
}

cluster=ipusweep
export SLURM_CONF="$tmp/slurm.conf"
SECONDS=0
start_munged
start_mariadb
write_slurmdbd_conf
write_slurm_conf
start_slurmdbd "$cluster"
start_slurm
echo "test-slurm: Slurm $(sinfo -V | awk '{print $2}'), slurmdbd $(slurmdbd -V | awk '{print $2}')," \
	"mariadbd $(mariadbd --version | awk '{print $3}'), munge $(munged -V | awk '{sub(/^munge-/, "", $1); print $1}')"
echo "test-slurm: cluster up: node $node CPUs=$cpus RealMemory=$mem, ports $ctld_port/$slurmd_port," \
	"slurmdbd $dbd_port, mariadbd $db_port, in $tmp (up in $SECONDS s)"

sweep() { "$GO" run ./scripts/sweep --bin "$BIN" "$@"; }
# results.csv without its wall-time columns (plan_seconds, link_seconds).
masked() { cut -d, -f1-7,10- "$1"; }

# check_sacct NAME ARRAY N: sacct, asked here, lists the array's tasks
# ARRAY_0 to ARRAY_N-1, each COMPLETED with exit code 0:0, and no other.
check_sacct() {
	local name=$1 array=$2 n=$3 want got
	want=$(for t in $(seq 0 $((n - 1))); do echo "${array}_$t|COMPLETED|0:0"; done)
	got=$(sacct -n -P -X -j "$array" -o JobID,State,ExitCode 2>&1 | sort -t_ -k2n || true)
	if [ "$got" != "$want" ]; then
		echo "test-slurm: $name: sacct -j $array lists the array's tasks as" >&2
		echo "$got" >&2
		echo "test-slurm: not ${array}_0 to ${array}_$((n - 1)) COMPLETED" >&2
		exit 1
	fi
	echo "test-slurm: $name: sacct -j $array: $n array tasks COMPLETED"
}

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
		grep -q "^slurm: sacct ${array}_$t COMPLETED exit 0:0$" "$tmp/$name-slurm.log" ||
			{ echo "test-slurm: $name: the driver did not report task ${array}_$t COMPLETED from sacct" >&2; exit 1; }
	done
	check_sacct "$name" "$array" "$n"
	grep -q "^JobId=[0-9]* .*ArrayJobId=$array ArrayTaskId=$((n - 1)) " "$tmp/jobcomp.txt" ||
		{ echo "test-slurm: $name: task ${array}_$((n - 1)) not in the job completion file" >&2; exit 1; }
	# Done configurations are not submitted again.
	sweep --engine slurm --poll 1s --node-dir "$tmp/node" -o "$tmp/$name-slurm" "$file" >"$tmp/$name-again.log"
	grep -q "^sweep: $n configurations, $n done before, 0 to submit$" "$tmp/$name-again.log" ||
		{ echo "test-slurm: $name: a second run submitted again" >&2; cat "$tmp/$name-again.log" >&2; exit 1; }
	echo "test-slurm: $name: $n configurations, results.csv as the local engine's, $n array tasks accounted"
}

check_sweep "$GRID" grid

# --no-wait: one configuration lost, resubmitted alone; the driver
# returns at once and the collect job writes the results.
first=$(sed -n '2s/,.*//p' "$tmp/grid-slurm/results.csv")
rm "$tmp/grid-slurm/$first/result.json"
sweep --engine slurm --no-wait --node-dir "$tmp/node" -o "$tmp/grid-slurm" "$GRID" >"$tmp/nowait.log"
n=$(($(wc -l <"$tmp/grid-local/results.csv") - 1))
grep -q "^sweep: $n configurations, $((n - 1)) done before, 1 to submit$" "$tmp/nowait.log" ||
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
