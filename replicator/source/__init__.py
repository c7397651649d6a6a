"""I/O to the source: binlog files on disk and (later) live servers."""
