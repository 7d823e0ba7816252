"""Importers: public trace formats to the canonical Parquet trace (see `harness.trace`)."""
