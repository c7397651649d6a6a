"""Snapshots: chunks of a table's rows read beside the stream and landed at their binlog point
(``runner``), read with the native text reader where it can (``fastread``)."""
