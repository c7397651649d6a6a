"""The landing zone: Arrow schemas, Parquet files, the commit protocol."""
