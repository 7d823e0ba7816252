"""Importer speed and peak memory: a seeded synthetic Helios `cluster_log.csv` of 200k jobs
(modest: bench_import.py checks the 1M-row budget) through `loopbench import helios`."""

from __future__ import annotations

import os
import tempfile

from .bench_import import helios_csv

ROWS = 200_000


class ImportHelios:
    timeout = 300
    number = 1
    repeat = (3, 5, 20.0)
    warmup_time = 0.0

    def setup_cache(self):
        # written once per commit into asv's cache directory, the benchmarks' working directory
        helios_csv(os.path.abspath("cluster_log.csv"), ROWS)
        return os.path.abspath("cluster_log.csv")

    def setup(self, src):
        self.out = tempfile.TemporaryDirectory()

    def teardown(self, src):
        self.out.cleanup()

    def _import(self, src):
        from harness.importers.cli import main

        if main(["helios", src, "-o", os.path.join(self.out.name, "helios.parquet")]):
            raise RuntimeError("loopbench import helios failed")

    def time_import(self, src):
        self._import(src)

    def peakmem_import(self, src):
        self._import(src)
