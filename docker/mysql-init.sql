-- The replication account replicator uses (see docs/source-setup.md#mysql-replication-account).
CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY 'example-repl-password';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'repl'@'%';
