# Sourced by scripts/slurm/test.sh: the one-node cluster's accounting
# storage, a private MariaDB server and slurmdbd, both as root with
# their data, config, sockets and logs under $tmp/db. Uses $tmp, $node
# and free_port from test.sh.

# start_mariadb: a fresh database directory, mariadbd on a unix socket
# and a free loopback port, and the slurm_acct_db database with a user
# slurmdbd logs in as (a random password). Sets db_port and db_pass.
start_mariadb() {
	free_port db_port
	db_pass=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
	mkdir -p "$tmp/db/data"
	mariadb-install-db --no-defaults --user=root --datadir="$tmp/db/data" \
		--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
		>"$tmp/db/install.log" 2>&1 ||
		{ echo "test-slurm: mariadb-install-db failed" >&2; tail -n 15 "$tmp/db/install.log" >&2; exit 1; }
	# mariadbd stays in the foreground: its pid is $!, kept for the trap
	# at once (it writes its own pid file only once it is up).
	# Durability does not matter for a test's database: no fsyncs. The
	# buffer pool and lock wait timeout are the least slurmdbd asks for
	# (else its log says "Database settings not recommended values").
	mariadbd --no-defaults --user=root --datadir="$tmp/db/data" \
		--socket="$tmp/db/mariadbd.sock" --port="$db_port" --bind-address=127.0.0.1 \
		--pid-file="$tmp/db/data/mariadbd.pid" --log-error="$tmp/db/mariadbd.log" \
		--skip-name-resolve --skip-log-bin --innodb-buffer-pool-size=1G \
		--innodb-lock-wait-timeout=900 --innodb-flush-log-at-trx-commit=0 \
		--innodb-doublewrite=0 --innodb-flush-method=nosync \
		</dev/null >/dev/null 2>&1 &
	echo $! >"$tmp/mariadbd.pid"
	for i in $(seq 100); do
		mariadb-admin --no-defaults --socket="$tmp/db/mariadbd.sock" -uroot ping >/dev/null 2>&1 && break
		[ "$i" = 100 ] && { echo "test-slurm: mariadbd not answering after 30 s" >&2; exit 1; }
		sleep 0.3
	done
	mariadb --no-defaults --socket="$tmp/db/mariadbd.sock" -uroot <<EOF
CREATE DATABASE slurm_acct_db;
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$db_pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
}

# write_slurmdbd_conf: slurmdbd.conf beside slurm.conf, where slurmdbd
# looks for it (SLURM_CONF's directory); mode 600, owned by SlurmUser
# (root), as slurmdbd requires. Sets dbd_port.
write_slurmdbd_conf() {
	free_port dbd_port
	(
		umask 077
		cat >"$tmp/slurmdbd.conf" <<EOF
# slurmdbd for make test-slurm (scripts/slurm/dbd.sh).
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
PidFile=$tmp/slurmdbd.pid
LogFile=$tmp/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$db_pass
StorageLoc=slurm_acct_db
EOF
	)
}

# start_slurmdbd CLUSTER: slurmdbd (it daemonizes), then, once its log
# says it started, the cluster registered in its database. Needs
# SLURM_CONF's AccountingStorageHost/Port at DbdPort.
start_slurmdbd() {
	slurmdbd
	local i
	for i in $(seq 100); do
		grep -q '^\[.*\] slurmdbd version .* started$' "$tmp/slurmdbd.log" 2>/dev/null && break
		[ "$i" = 100 ] && { echo "test-slurm: slurmdbd not started after 30 s" >&2; exit 1; }
		sleep 0.3
	done
	sacctmgr -i add cluster "$1" >"$tmp/db/sacctmgr.log" 2>&1 ||
		{ echo "test-slurm: sacctmgr add cluster $1 failed" >&2; cat "$tmp/db/sacctmgr.log" >&2; exit 1; }
}
