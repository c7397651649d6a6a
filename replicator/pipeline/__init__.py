"""Transactions to row changes: metadata columns, filters, batches."""
