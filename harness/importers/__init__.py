"""Importers: public trace formats to the canonical Parquet trace (see `harness.trace`).

One module per format, each documenting its mapping and assumptions in its docstring:
`openb` (Alibaba v2023), `pai` (Alibaba v2020), `philly` (Microsoft), `helios` (SenseTime),
`acme` (Shanghai AI Lab Seren/Kalos), `alibaba_spot` (Alibaba v2026 spot), `dlrm` (Alibaba
v2025 serving), `workloads` (Kubernetes Pod, PodGroup and Workload manifests). `common` holds
what they share (streamed CSV with located errors, gang expansion, node lists to cluster
configs, prices and boot delays); `cli` is `loopbench import`, and `harness.transforms`
reshapes the result.
"""
