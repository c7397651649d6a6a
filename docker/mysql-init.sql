-- The replication account replicator uses (see README, "Source server settings").
CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY 'example-repl-password';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'repl'@'%';
