-- The replication account replicator uses (see docs/source-setup.md#mariadb-replication-account).
CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY 'example-repl-password';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, REPLICATION MASTER ADMIN, SELECT
    ON *.* TO 'repl'@'%';
