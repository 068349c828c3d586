"""The Ray engine on a real two-node cluster gives the local engine's bytes: exports, per-op counts,
rejects.jsonl, removed rows and resolve outputs, for row-local chains, every dedup kind, the selectors, a
grouper and each export format; and the plan is sized to the cluster's CPUs."""
import json

import pyarrow.parquet as pq
import pytest
from rayutil import BOILER, artifacts, make_input, run

pytestmark = pytest.mark.ray

FILTERS = [
    {"replace_content_mapper": {"pattern": r"https?://\S+", "repl": ""}},
    {"python_lambda_mapper": {"lambda_str": "lambda s: {**s, 'text': s['text'] + ('' if s['n'] % 17 else 1)}"}},
    {"words_num_filter": {"min_num": 40}},
    {"text_length_filter": {"min_len": 200, "max_len": 60000}},
    {"specified_numeric_field_filter": {"field_key": "n", "min_value": 2}},
]
DEDUP = [
    {"document_deduplicator": {"lowercase": True}},
    {"document_minhash_deduplicator": {"jaccard_threshold": 0.7}},
    {"document_line_deduplicator": {"frequency_threshold": 5}},
]
SELECT = [
    {"words_num_filter": {"min_num": 20}},
    {"random_selector": {"select_ratio": 0.6, "seed": 5}},
    {"topk_specified_field_selector": {"field_key": "n", "top_ratio": 0.5}},  # ties: n repeats in the copies
]
GROUP = [
    {"words_num_filter": {"min_num": 20}},
    {"key_value_grouper": {"group_by_keys": ["group"]}},
    {"text_concat_aggregator": {}},
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_input(tmp_path_factory.mktemp("input"))


@pytest.mark.parametrize("name,process,export,kw", [
    ("filters", FILTERS, "out.jsonl.gz", {}),
    ("dedup", FILTERS[:1] + DEDUP, "out.parquet", {"keep_stats_in_res_ds": True}),
    ("group", GROUP, "out.jsonl", {"export_shard_size": 20_000}),
    ("select", SELECT, "out.jsonl", {}),
])
def test_ray_gives_the_local_engines_bytes(cluster, data, tmp_path, monkeypatch, name, process, export, kw):
    if name == "group":  # 169 rows in 5 hash buckets over 3 partitions, grouped on the cluster's workers
        import gristmill.ops.grouping as grouping
        monkeypatch.setattr(grouping, "ROWS_PER_BUCKET", 40)
        monkeypatch.setattr(grouping, "PARTITIONS", 3)
    local = artifacts(run(data, process, tmp_path / "local" / export, tmp_path / "local-work", np=1,
                          keep_removed=True, **kw))
    ray_ = artifacts(run(data, process, tmp_path / "ray" / export, tmp_path / "ray-work", np=2, keep_removed=True,
                         engine="ray", engine_address=cluster.address, **kw))
    assert ray_.keys() == local.keys()
    for k in local:
        assert ray_[k] == local[k], k
    # the runs did what the recipe says: 219 records, 9 reader rejects (6 broken lines, 3 numbers as text)
    assert b"broken" in local["rejects.jsonl"] and local["None:read"]["rejected"] == 9
    if name == "filters":
        assert local["rows"] == (210, 136, 22)
        assert local["1:python_lambda_mapper"]["rejected"] == 13  # n % 17 == 0: the lambda raised
        assert local["2:words_num_filter"]["reasons"] == {"num_words < 40": 60}
    if name == "dedup":
        assert local["rows"] == (210, 173, 9)
        assert local["1:document_deduplicator"]["reasons"] == {"exact duplicate": 20}
        assert local["2:document_minhash_deduplicator"]["reasons"] == {"minhash duplicate": 17}
        texts = pq.read_table(tmp_path / "ray" / export).column("text").to_pylist()
        assert len(texts) == 173 and not any(BOILER in t for t in texts)  # a line in > 5 documents
    if name == "select":
        assert local["rows"] == (210, 50, 9)  # resolved by per-shard scans on the cluster (ctx.map)
        assert local["1:random_selector"]["reasons"] == {"not selected": 68}  # int(0.6 * 169) = 101 kept
        assert local["2:topk_specified_field_selector"]["reasons"] == {"not in top 50 by n": 51}
    if name == "group":
        assert local["rows"] == (210, 9, 9) and len(local["exported"]) == 8  # sharded export (in bucket order)
        assert local["1:key_value_grouper"]["added"] == -160  # 169 rows into g0..g6, copies, near


def test_no_address_starts_a_private_instance_beside_a_running_cluster(cluster, tmp_path):
    """Without an address a run never joins whatever cluster this machine happens to run (a plain
    ``ray.init()`` would join the last one started here)."""
    import subprocess
    import sys

    import yaml
    from gm_testutil import REPO, SAMPLE
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump({"dataset_path": str(SAMPLE), "export_path": str(tmp_path / "out.jsonl"),
                                 "work_dir": str(tmp_path / "w"), "np": 2, "executor_type": "ray",
                                 "process": [{"words_num_filter": {"min_num": 50}}]}))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "ray: 2 CPUs on 1 node(s) of a local Ray instance" in res.stderr
    assert "179 rows read → 116 rows out" in res.stderr


def _cfg_run(data, tmp_path, name, logs, **kw):
    from gristmill.engine.base import create_engine
    from gristmill.engine.config import RunConfig
    from gristmill.recipe import build_ops
    cfg = RunConfig(dataset_path=str(data), work_dir=str(tmp_path / f"work-{name}"),
                    export_path=str(tmp_path / name / "out.jsonl"), shard_bytes=1 << 20, progress=False,
                    keep_removed=True, **kw)
    return create_engine(cfg, logs.append).run(build_ops([{"words_num_filter": {"min_num": 60}},
                                                          {"document_deduplicator": {}}]))


def test_the_plan_is_sized_to_the_clusters_cpus_not_np(cluster, tmp_path):
    """``--engine ray --address auto`` leaves np at 1: the plan is still sized to the cluster's 2 CPUs, so a
    big .jsonl.gz is pre-split into pieces for them (and a one-shard input gets the re-shard hint). The
    bytes are those of the local engine at np=1, which reads the file whole."""
    import gzip

    from gm_testutil import SAMPLE
    one = gzip.decompress(SAMPLE.read_bytes()).decode().splitlines()
    rows = [{k: v for k, v in json.loads(line).items() if k != "id"} for line in one]  # ids = file:offset
    big = tmp_path / "in" / "big.jsonl.gz"
    big.parent.mkdir()
    # ~14.6 MB (4.8 MB compressed, more than one 4 MiB read): two 8 MiB read chunks, so two pieces
    with gzip.open(big, "wt", encoding="utf-8", compresslevel=1) as f:
        for k in range(15):
            for r in rows:
                f.write(json.dumps({**r, "text": f"copy {k % 14}: {r['text']}"}) + "\n")
    local_log, ray_log = [], []
    local = _cfg_run(big, tmp_path, "local", local_log, np=1)
    ray_ = _cfg_run(big, tmp_path, "ray", ray_log, np=1, engine="ray", engine_address=cluster.address)
    assert local["shards"] == 1 and ray_["shards"] == 2, (local["shards"], ray_["shards"], ray_log)
    assert any(m.startswith(f"split {big}: 2 pieces") for m in ray_log), ray_log
    assert not any("split" in m for m in local_log), local_log
    assert artifacts(ray_) == artifacts(local)
    dups = artifacts(local)["1:document_deduplicator"]["reasons"]["exact duplicate"]
    assert dups >= len(rows) // 2  # copy 14 repeats copy 0 across the pieces' boundary

    hint: list[str] = []
    _cfg_run(SAMPLE, tmp_path, "hint", hint, np=1, engine="ray", engine_address=cluster.address)
    assert any(f"1 shard(s) for 2 Ray CPUs: 1 worker(s) would have nothing to do; `gristmill split {SAMPLE} -o DIR "
               "-n 2`" in m for m in hint), hint
