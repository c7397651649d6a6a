"""Table schemas over time: the model, the DDL parser, and the schema history.

Pure code (no I/O): ``model`` holds the catalog of databases and tables as the source server
has them at one point of its binlog, ``ddl`` turns one logged DDL statement into changes of
that catalog, and ``history`` keeps every version of every table with the stream position
where it began, so a row event is decoded with the columns its table had when it was written.
"""
