"""Writes the malformed-input corpus in this folder (run from the repository root):

    .venv/bin/python tests/malformed/build.py

Each file breaks one rule; tests/test_malformed.py says what loopbench must answer for it
(an error naming file, column, row and rule, or the documented handling). Files are small
and committed, so the corpus is fixed input; rerun this script only to change it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from harness.trace import TraceMeta, table_from_columns, write_trace  # noqa: E402

FIX = HERE.parent / "fixtures"
META = TraceMeta(source="loopbench malformed corpus", licence="CC0-1.0", time_origin="trace start")


def pods(n: int = 4, **over) -> dict:
    """n independent one-GPU pods, valid unless a column is overridden."""
    cols = {
        "pod_id": [f"p{i}" for i in range(n)], "job_id": [f"j{i}" for i in range(n)],
        "submit_s": [10.0 * i for i in range(n)], "duration_s": [600.0] * n,
        "cpu_milli": [4000] * n, "memory_mib": [16384] * n, "gpu_count": [1] * n, "gpu_milli": [1000] * n,
    }
    cols.update(over)
    return cols


def gang(**over) -> dict:
    """Two single pods then a gang g of three 8-GPU pods, valid unless overridden."""
    cols = pods(5, job_id=["a", "b", "g", "g", "g"], min_member=[1, 1, 3, 3, 3], gpu_count=[1, 1, 8, 8, 8],
                submit_s=[0.0, 5.0, 20.0, 20.0, 20.0])
    cols.update(over)
    return cols


def set_col(table: pa.Table, name: str, values) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def write_raw(table: pa.Table, name: str) -> None:
    """Write without validation (the point is that it is invalid)."""
    pq.write_table(table, HERE / "trace" / name)


def traces() -> None:
    out = HERE / "trace"
    out.mkdir(exist_ok=True)
    ok = table_from_columns(pods())
    raw = {
        "missing_column.parquet": ok.drop(["memory_mib"]),
        "extra_column.parquet": ok.append_column("colour", pa.array(["r", "g", "b", "k"])),
        "duplicate_column.parquet": pa.Table.from_arrays([*ok.columns, ok.column("gpu_count")],
                                                         names=[*ok.column_names, "gpu_count"]),
        "wrong_type_text_cpu.parquet": set_col(ok, "cpu_milli", pa.array(["4000", "4000", "four", "4000"])),
        "wrong_type_fractional_cpu.parquet": set_col(ok, "cpu_milli", pa.array([4000.0, 4000.5, 4000.0, 4000.0])),
        "wrong_type_models_text.parquet": set_col(ok, "gpu_models", pa.array(["H100", "", "", ""])),
        "wrong_type_timestamp_submit.parquet": set_col(ok, "submit_s", pa.array([0, 1, 2, 3], pa.timestamp("s"))),
        "wrong_type_flag_text.parquet": set_col(ok, "nic_per_gpu", pa.array(["no", "no", "yes", "maybe"])),
        "null_submit.parquet": set_col(ok, "submit_s", pa.array([0.0, None, 20.0, 30.0])),
        "null_pod_id.parquet": set_col(ok, "pod_id", pa.array(["p0", "p1", "p2", None])),
        "empty.parquet": ok.slice(0, 0),
        "schema_version_9.parquet": ok.replace_schema_metadata({b"loopbench.schema_version": b"9"}),
        "priority_overflows_int32.parquet": set_col(ok, "priority", pa.array([0, 0, 2**40, 0], pa.int64())),
        "null_gpu_model.parquet": set_col(ok, "gpu_models", pa.array([[], ["H100", None], [], []], pa.list_(pa.string()))),
        "metadata_not_utf8.parquet": ok.replace_schema_metadata({**ok.schema.metadata, b"loopbench.source": b"caf\xe9"}),
        "foreign_binary_metadata.parquet": ok.replace_schema_metadata({**ok.schema.metadata, b"other.tool": b"\xff\xfe"}),
    }
    for name, table in raw.items():
        write_raw(table, name)
    bad_values = {
        "negative_duration.parquet": pods(duration_s=[600.0, 600.0, -1.0, 600.0]),
        "nan_duration.parquet": pods(duration_s=[600.0, float("nan"), 600.0, 600.0]),
        "infinite_duration.parquet": pods(duration_s=[600.0, 600.0, 600.0, float("inf")]),
        "negative_submit.parquet": pods(submit_s=[0.0, -30.0, 20.0, 30.0]),
        "nan_submit.parquet": pods(submit_s=[0.0, 10.0, float("nan"), 30.0]),
        "duplicate_pod_id.parquet": pods(pod_id=["p0", "p1", "p2", "p1"]),
        "negative_cpu.parquet": pods(cpu_milli=[4000, -1, 4000, 4000]),
        "zero_min_member.parquet": pods(min_member=[1, 0, 1, 1]),
        "gang_short.parquet": gang(min_member=[1, 1, 4, 4, 4]),
        "gang_disagree_min_member.parquet": gang(min_member=[1, 1, 3, 2, 3]),
        "gang_disagree_priority.parquet": gang(priority=[0, 0, 5, 5, 4]),
        "gang_disagree_queue.parquet": gang(queue=["q", "q", "q", "r", "q"]),
        "gang_disagree_locality.parquet": gang(gang_locality=["none", "none", "rack", "rack", "block"]),
        "huge_submit.parquet": pods(submit_s=[0.0, 1e300, 20.0, 30.0]),
        "huge_duration.parquet": pods(duration_s=[600.0, 600.0, 600.0, 1e15]),
        "huge_cpu.parquet": pods(cpu_milli=[4000, 4000, 10**15, 4000]),
        "huge_memory.parquet": pods(memory_mib=[2**62, 16384, 16384, 16384]),
        "huge_gpu_count.parquet": pods(gpu_count=[1, 1, 1, 100000]),
        "huge_min_member.parquet": pods(min_member=[1, 2**31 - 1, 1, 1]),
        "queue_escape.parquet": pods(queue=["q", "q", "\x1b[2J\x1b[31mq", "q"]),
        "job_id_newline.parquet": pods(job_id=["j0", "j1\nj2", "j2", "j3"]),
        "share_of_many_gpus.parquet": pods(gpu_count=[1, 4, 1, 1], gpu_milli=[1000, 500, 1000, 1000]),
    }
    for name, cols in bad_values.items():
        write_raw(table_from_columns(cols), name)
    # valid traces whose handling is documented: sorted by the engine, refused at replay, or a
    # gang whose pods arrive apart
    valid = {
        "unsorted_times.parquet": pods(8, submit_s=[700.0, 0.0, 3600.0, 30.0, 30.0, 1200.0, 5.0, 90.0]),
        "larger_than_any_node.parquet": pods(gpu_count=[1, 16, 1, 1], cpu_milli=[4000, 4000, 4000, 10**7]),
        "unknown_gpu_model.parquet": pods(gpu_models=[[], ["TPUv9"], ["H100", "L4"], []]),
        "unknown_partition_profile.parquet": pods(gpu_partition=[None, None, "5g.40gb", None], gpu_milli=[1000, 1000, 0, 1000]),
        "gang_arrives_apart.parquet": gang(submit_s=[0.0, 5.0, 20.0, 20.0, 21.0]),
        "huge_but_valid.parquet": pods(duration_s=[600.0, None, 9 * 365 * 86400.0, 600.0],
                                       submit_s=[0.0, 10.0, 20.0, 9 * 365 * 86400.0]),
    }
    for name, cols in valid.items():
        write_trace(table_from_columns(cols), out / name, META)
    good = (out / "unsorted_times.parquet").read_bytes()
    (out / "truncated_half.parquet").write_bytes(good[: len(good) // 2])
    (out / "truncated_footer.parquet").write_bytes(good[:-6])
    (out / "truncated_head.parquet").write_bytes(good[4:])
    (out / "zero_bytes.parquet").write_bytes(b"")
    (out / "magic_only.parquet").write_bytes(b"PAR1")
    (out / "csv_not_parquet.parquet").write_text("pod_id,job_id,submit_s\np0,j0,0\n")


CLUSTER = {
    "_target_": "harness.cluster.Cluster", "name": "malformed", "autoscaling": True,
    "partition_profiles": {"1g": 143},
    "node_types": [{"name": "h100x8", "cpu_milli": 128000, "memory_mib": 1000000, "gpus": 8, "gpu_model": "H100",
                    "nvlink_domains": 1, "numa_domains": 2, "partition_profiles": ["1g"]},
                   {"name": "cpu", "cpu_milli": 64000, "memory_mib": 256000}],
    "pools": [{"name": "gpu", "node_type": "h100x8", "min_size": 0, "max_size": 4, "committed": 1,
               "price_on_demand": 90.0, "boot_delay": {"min_s": 300, "max_s": 400}},
              {"name": "cpu", "node_type": "cpu", "min_size": 1, "max_size": 2, "price_on_demand": 2.0}],
}

#: A valid `kueue:` section for CLUSTER: two ClusterQueues sharing the gpu pool in a cohort.
KUEUE = {
    "resource_flavors": [{"name": "h100", "pools": ["gpu"]}],
    "cluster_queues": [{"name": q, "cohort": "shared", "flavors": [{"name": "h100", "nominal": {"gpu": 16, "cpu": 256}}]}
                       for q in ("a", "b")],
    "local_queues": [{"name": "a", "cluster_queue": "a"}, {"name": "b", "cluster_queue": "b"}],
}


def clusters() -> None:
    out = HERE / "cluster"
    out.mkdir(exist_ok=True)

    def nt(i, **kv):
        return lambda c: c["node_types"][i].update(kv)

    def pool(i, **kv):
        return lambda c: c["pools"][i].update(kv)

    def queue(edit):
        """CLUSTER with KUEUE, `edit` applied to its first ClusterQueue."""
        def apply(c):
            c["kueue"] = yaml.safe_load(yaml.safe_dump(KUEUE))
            edit(c["kueue"]["cluster_queues"][0])
        return apply

    edits = {
        "unknown_node_type_key": nt(0, gpu_count=8),
        "unknown_pool_key": pool(1, size=3),
        "unknown_boot_delay_key": pool(0, boot_delay={"min_s": 1, "mean_s": 2}),
        "unknown_top_level_key": lambda c: c.update(autoscale=True),
        "negative_cpu": nt(1, cpu_milli=-64000),
        "zero_memory": nt(0, memory_mib=0),
        "negative_max_size": pool(0, max_size=-1),
        "min_above_max": pool(1, min_size=3),
        "absurd_max_size": pool(0, max_size=10**12),
        "committed_above_max": pool(0, committed=5),
        "negative_stock": pool(0, stock=-2),
        "boot_min_above_max": pool(0, boot_delay={"min_s": 500, "max_s": 400}),
        "negative_price": pool(1, price_on_demand=-2.0),
        "spot_without_price": pool(0, spot=True),
        "unknown_node_type": pool(1, node_type="cpu-large"),
        "duplicate_node_type": lambda c: c["node_types"].append(dict(c["node_types"][1])),
        "duplicate_pool": lambda c: c["pools"].append(dict(c["pools"][1])),
        "no_pools": lambda c: c.update(pools=[]),
        "gpus_not_divisible": nt(0, nvlink_domains=3),
        "too_many_gpus": nt(0, gpus=128),
        "gpus_without_model": nt(0, gpu_model=""),
        "undeclared_profile": nt(0, partition_profiles=["1g", "3g"]),
        "profile_milli_zero": lambda c: c.update(partition_profiles={"1g": 0}),
        "profile_milli_text": lambda c: c.update(partition_profiles={"1g": "a seventh"}),
        "text_cpu": nt(0, cpu_milli="lots"),
        "fractional_gpus": nt(0, gpus=2.5),
        "text_max_size": pool(0, max_size="4"),
        "boolean_max_size": pool(0, max_size=True),
        "node_type_not_mapping": lambda c: c["node_types"].append("h100x8"),
        "pool_not_mapping": lambda c: c["pools"].append(7),
        "pools_not_list": lambda c: c.update(pools={"gpu": 4}),
        "boot_delay_not_mapping": pool(0, boot_delay="fast"),
        "nodes_per_rack_zero": pool(0, nodes_per_rack=0),
        "nan_price": pool(1, price_on_demand=float("nan")),
        "infinite_spot_price": pool(0, spot=True, price_spot=float("inf")),
        "infinite_committed_price": pool(0, price_committed=float("inf")),
        "infinite_boot_delay": pool(0, boot_delay={"min_s": 0, "max_s": float("inf")}),
        "nan_boot_delay": pool(0, boot_delay={"min_s": float("nan"), "max_s": 400}),
        "text_autoscaling": lambda c: c.update(autoscaling="maybe"),
        "numeric_autoscaling": lambda c: c.update(autoscaling=1),
        "null_autoscaling": lambda c: c.update(autoscaling=None),
        "text_atomic": pool(0, atomic="yes"),
        "numeric_spot": pool(0, spot=1, price_spot=30.0),
        "text_nic_per_gpu": nt(0, nic_per_gpu="false"),
        "numeric_cluster_name": lambda c: c.update(name=2024),
        "huge_cpu": nt(1, cpu_milli=10**19),
        "huge_memory": nt(0, memory_mib=2**63),
        "huge_nodes_per_rack": pool(0, nodes_per_rack=10**30),
        "taint_bad_effect": pool(0, taints=["nvidia.com/gpu=present:Sometimes"]),
        "taint_without_effect": pool(0, taints=["nvidia.com/gpu=present"]),
        "taint_bad_key": pool(0, taints=["nvidia gpu:NoSchedule"]),
        "taints_not_list": pool(0, taints="nvidia.com/gpu=present:NoSchedule"),
        "taint_not_text": pool(1, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
        "unknown_shortage": lambda c: c.update(shortage="quietly"),
        "unknown_pool_shortage": pool(0, shortage="never"),
        "stock_steps_not_from_zero": pool(0, stock=[{"at_s": 600, "stock": 2}]),
        "stock_steps_not_increasing": pool(0, stock=[{"at_s": 0, "stock": 2}, {"at_s": 600, "stock": 1},
                                                     {"at_s": 600, "stock": 3}]),
        "stock_step_negative": pool(0, stock=[{"at_s": 0, "stock": -1}]),
        "stock_step_unknown_key": pool(0, stock=[{"at_s": 0, "nodes": 2}]),
        "stock_draws_low_above_high": pool(0, stock={"low": 4, "high": 2, "period_s": 3600}),
        "stock_draws_zero_period": pool(0, stock={"low": 1, "high": 2, "period_s": 0}),
        "stock_text": pool(0, stock="plenty"),
        "stock_varies_written": pool(0, stock_varies={"low": 1}),
        "stock_draws_tiny_period": pool(0, stock={"low": 1, "high": 2, "period_s": 1e-6}),
        "stock_draws_huge_high": pool(0, stock={"low": 1, "high": 10**20, "period_s": 3600}),
        "huge_stock": pool(0, stock=10**20),
        "stock_step_huge": pool(0, stock=[{"at_s": 0, "stock": 2}, {"at_s": 600, "stock": 10**20}]),
        "huge_price": pool(1, price_on_demand=1e308),
        "huge_committed_price": pool(0, price_committed=1e300),
        "price_beyond_float": pool(1, price_on_demand=2**1024),
        "huge_boot_delay": pool(0, boot_delay={"min_s": 300, "max_s": 1e300}),
        "kueue_huge_nominal": queue(lambda q: q["flavors"][0].update(nominal={"gpu": 1e308, "cpu": 256})),
        "kueue_huge_borrowing_limit": queue(lambda q: q["flavors"][0].update(borrowing_limit={"cpu": 1e300})),
        "kueue_huge_priority_threshold": queue(lambda q: q.update(preemption={
            "reclaim_within_cohort": "Any",
            "borrow_within_cohort": {"policy": "LowerPriority", "max_priority_threshold": 2**40}})),
    }
    for name, edit in edits.items():
        cfg = yaml.safe_load(yaml.safe_dump(CLUSTER))
        edit(cfg)
        (out / f"{name}.yaml").write_text(f"# malformed: {name.replace('_', ' ')}\n"
                                          + yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None, width=110))
    (out / "not_yaml_mapping.yaml").write_text("- just\n- a list\n")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def replace_line(src: Path, i: int, old: str, new: str) -> str:
    ls = lines(src)
    assert old in ls[i], (src, i, old)
    ls[i] = ls[i].replace(old, new, 1)
    return "\n".join(ls) + "\n"


def importers() -> None:
    """Importer sources: the fixtures with one line broken. Line i+1 is data row i."""
    src = HERE / "sources"
    helios, seren, kalos = FIX / "helios" / "cluster_log.csv", FIX / "acme" / "trace_seren.csv", FIX / "acme" / "trace_kalos.csv"
    pai, spot, dlrm = FIX / "pai" / "pai_task_table.csv", FIX / "alibaba_spot" / "job_info_df.csv", \
        FIX / "dlrm" / "disaggregated_DLRM_trace.csv"
    openb = FIX / "openb" / "pods.csv"
    text = {
        # helios
        "helios/missing_column.csv": helios.read_text().replace(",node_num,", ",nodes,", 1),
        "helios/bad_number.csv": replace_line(helios, 3, ",0,4,1,", ",zero,4,1,"),
        "helios/bad_datetime.csv": replace_line(helios, 5, "2020-04-01 01:00:00", "2020-04-31 01:00:00"),
        "helios/truncated_line.csv": helios.read_text()[:-40],
        "helios/ragged_line.csv": replace_line(helios, 2, ",vcB,", ","),
        "helios/header_only.csv": lines(helios)[0] + "\n",
        "helios/empty.csv": "",
        "helios/unbalanced_quote.csv": replace_line(helios, 4, ",vcB,", ',"vcB,'),
        "helios/huge_cpu.csv": replace_line(helios, 1, ",16,1,", ",1e15,1,"),
        "helios/huge_gpus.csv": replace_line(helios, 1, ",8,16,", ",1e12,16,"),
        "helios/infinite_duration.csv": replace_line(helios, 1, ",3600,5", ",inf,5"),
        "helios/negative_duration.csv": replace_line(helios, 1, ",3600,5", ",-3600,5"),
        "helios/nan_node_num.csv": replace_line(helios, 2, ",64,2,", ",64,nan,"),
        "helios/unsorted_times.csv": "\n".join([lines(helios)[0], *reversed(lines(helios)[1:])]) + "\n",
        "helios/extra_column.csv": "\n".join(f"{ln},x" for ln in lines(helios)) + "\n",
        # acme
        "acme/missing_offset.csv": replace_line(seren, 2, "2023-03-01 00:00:00+08:00", "2023-03-01 00:00:00"),
        "acme/kalos_bad_memory.csv": replace_line(kalos, 3, ",500.5,", ",500.5GB,"),
        # pai (headerless)
        "pai/pai_task_table.short_line.csv": replace_line(pai, 2, ",300.0,20.0,50.0,MISC", ",300.0,20.0,MISC"),
        "pai/pai_task_table.bad_number.csv": replace_line(pai, 0, ",100.0,V100", ",one,V100"),
        "pai/seven_columns.csv": "a,b,c,d,e,f,g\n",
        "pai/pai_task_table.fractional_instances.csv": replace_line(pai, 0, ",worker,4,", ",worker,2.5,"),
        # alibaba spot
        "alibaba_spot/unknown_job_type.csv": replace_line(spot, 2, ",Spot", ",BestEffort"),
        "alibaba_spot/bad_submit.csv": replace_line(spot, 3, ",60,NA,", ",soon,NA,"),
        # dlrm
        "dlrm/unknown_role.csv": replace_line(dlrm, 3, ",CN,", ",GPU,"),
        "dlrm/negative_request.csv": replace_line(dlrm, 1, "HN,app_0,12,", "HN,app_0,-12,"),
        # openb pods and nodes
        "openb/pods_duplicate_name.csv": replace_line(openb, 4, "p-02,", "p-00,"),
        "openb/pods_negative_cpu.csv": replace_line(openb, 2, "p-00,12000,", "p-00,-12000,"),
        "openb/pods_share_without_gpu_milli.csv": replace_line(openb, 3, ",1,460,", ",1,0,"),
        "openb/pods_deleted_before_created.csv": replace_line(openb, 2, ",0,1000,0", ",1000,0,0"),
        "openb/pods_header_only.csv": lines(openb)[0] + "\n",
        "openb/pods_ragged.csv": replace_line(openb, 5, ",BE,Running,", ",BE,"),
        "openb/pods_huge_gpus.csv": replace_line(openb, 6, "88000,327680,8,", "88000,327680,800,"),
        "openb/nodes_gpu_without_model.csv": replace_line(FIX / "openb" / "nodes.csv", 2, ",2,T4", ",2,"),
        "openb/nodes_missing_column.csv": FIX.joinpath("openb", "nodes.csv").read_text().replace(",model", ",gpu_type"),
        # node lists of the other formats
        "pai/pai_machine_spec.bad_gpus.csv": "m1,V100,96,512,8\nm2,V100,96,512,-8\n",
        "philly/cluster_machine_list.bad_memory.csv": replace_line(FIX / "philly" / "cluster_machine_list", 3, " 12GB", " twelve"),
        "alibaba_spot/node_info_df.zero_cpu.csv": replace_line(FIX / "alibaba_spot" / "node_info_df.csv", 2, ",128,", ",0,"),
    }
    philly = (FIX / "philly" / "cluster_job_log").read_text()
    text.update({
        "philly/truncated.json": philly[: len(philly) // 2],
        "philly/not_an_array.json": '{"jobid": "application_1_0001"}\n',
        "philly/job_not_object.json": '[\n  "application_1_0001"\n]\n',
        "philly/missing_jobid.json": philly.replace('"jobid": "application_1_0003", ', "", 1),
        "philly/bad_datetime.json": philly.replace("2017-10-03 10:05:00", "Oct 3rd 10:05", 1),
        "philly/empty_array.json": "[]\n",
    })
    for name, body in text.items():
        write(src / name, body)
    write(src / "helios" / "not_utf8.csv", helios.read_bytes().replace(b"vcA", b"vc\xff\xfe", 1))


if __name__ == "__main__":
    traces()
    clusters()
    importers()
    print(f"wrote the corpus under {HERE}")
