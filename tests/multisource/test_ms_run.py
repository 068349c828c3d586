"""`sources:` end to end: per-source readers, ops and text keys, the shared process over all of them (a
dedup across sources), per-source funnels and rejects, ids unique across sources, np-independent bytes,
resume, and the tokenize step mixing by source weight."""
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ms_util import check_source_funnel, cli, read_jsonl, write_jsonl, write_recipe

WEB = [{"text": f"web page {i}: " + " ".join(f"w{(i * j) % 31}" for j in range(5 + i % 7))} for i in range(30)]
WIKI = [{"title": f"T{i}", "completion": f"wiki article {i} is about topic {i} " + "x" * (i % 5)} for i in range(12)]
QA = [{"question": f"q{i}?", "answer": f"a{i}."} for i in range(8)]


def inputs(tmp_path):
    d = tmp_path / "data"
    # web: two files of the same name in two directories (ids must still be unique), one bad line, and a
    # copy of a wiki article (removed by the shared dedup: the wiki source comes first)
    write_jsonl(d / "web" / "a" / "part.jsonl", WEB[:15], extra_lines=['{"text": broken'])
    write_jsonl(d / "web" / "b" / "part.jsonl", WEB[15:] + [{"text": WIKI[3]["completion"]}])
    os.makedirs(d / "wiki", exist_ok=True)
    pq.write_table(pa.Table.from_pylist(WIKI), d / "wiki" / "part.parquet")
    write_jsonl(d / "qa" / "part.jsonl", QA)
    return d


def recipe(tmp_path, d, name="ms", np_=1, **extra):
    r = {"project_name": name, "np": np_, "work_dir": str(tmp_path / f"work-{name}"),
         "export_path": str(tmp_path / f"{name}.jsonl"),
         "sources": [
             {"name": "wiki", "path": str(d / "wiki"), "text_keys": "completion",
              "process": [{"text_length_filter": {"min_len": 34}}]},
             {"name": "web", "path": str(d / "web"), "weight": 2.0,
              "process": [{"words_num_filter": {"min_num": 5, "lang": "en"}}]},
             {"name": "qa", "path": str(d / "qa" / "part.jsonl"),
              "process": [{"chat_template_mapper": {"drop_last_end": True}}]},
         ],
         "process": [{"document_deduplicator": {}}, {"remove_long_words_mapper": {"max_len": 4}}],
         **extra}
    return write_recipe(tmp_path / f"{name}.yaml", r)


def expected_rows():
    wiki = [w["completion"] for w in WIKI if len(w["completion"]) >= 34]
    web = [w["text"] for w in WEB + [{"text": WIKI[3]["completion"]}] if len(w["text"].split()) >= 5]
    web = [t for t in web if t not in wiki]
    qa = [f"<|im_start|>user\n{q['question']}<|im_end|>\n<|im_start|>assistant\n{q['answer']}" for q in QA]
    return wiki, web, qa


def test_sources_run_funnels_and_output(tmp_path):
    d = inputs(tmp_path)
    res = cli("run", recipe(tmp_path, d), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "per source" in res.stderr and "wiki: text_length_filter" in res.stderr
    out = read_jsonl(tmp_path / "ms.jsonl")
    wiki, web, qa = expected_rows()
    texts = [r["text"] for r in out]
    assert len(texts) == len(wiki) + len(web) + len(qa)
    # source order: every wiki row, then web, then qa; remove_long_words_mapper ran on all of them
    from gristmill.core.fused import FusedOp
    from gristmill.registry import create_op
    mapper = FusedOp([create_op("remove_long_words_mapper", {"max_len": 4})])
    want = mapper.run_batch(pa.RecordBatch.from_pylist([{"text": t} for t in wiki + web + qa])).batch
    assert texts == want.column("text").to_pylist()
    assert all("completion" not in r for r in out)  # the wiki text became `text`
    ids = [r["id"] for r in out]
    assert len(set(ids)) == len(ids)
    assert ids[0].startswith("wiki/") and any(i.startswith("web/a/part.jsonl:") for i in ids) \
        and any(i.startswith("web/b/part.jsonl:") for i in ids)

    rep = json.loads((tmp_path / "work-ms" / "report.json").read_text())
    by = {s["name"]: s for s in rep["sources"]}
    assert [s["name"] for s in rep["sources"]] == ["wiki", "web", "qa"]
    assert by["wiki"]["rows_in"] == 12 and by["wiki"]["rows_after_source_ops"] == len(wiki)
    assert by["web"]["rows_in"] == 32 and by["web"]["rejects"] == 1  # 31 rows + the broken line
    assert by["web"]["rows_out"] == len(web) and by["qa"]["rows_out"] == 8
    dedup = by["web"]["shared_ops"][0]
    assert dedup["op"] == "document_deduplicator" and dedup["removed"] == 1
    assert by["wiki"]["shared_ops"][0]["removed"] == 0
    for s in rep["sources"]:
        check_source_funnel(s)
    assert rep["rows_out"] == len(out) and rep["rejects"] == 1
    rej = read_jsonl(rep["rejects_file"])
    assert rej[0]["source_name"] == "web" and "part.jsonl" in json.dumps(rej[0])
    assert os.path.exists(rep["report_html"])
    html = open(rep["report_html"], encoding="utf-8").read()
    assert "web: words_num_filter" in html and "qa: chat_template_mapper" in html


def test_any_np_same_bytes_and_rerun_reuses(tmp_path):
    d = inputs(tmp_path)
    tok = {"tokenizer": "qwen.tiktoken", "seq_len": 64, "formats": ["npy", "litgpt"], "eos": "<|im_end|>",
           "total_tokens": 3000}
    outs = []
    for name, np_ in (("one", 1), ("two", 2)):
        r = recipe(tmp_path, d, name, np_, tokenize={**tok, "output": str(tmp_path / f"tok-{name}")})
        res = cli("run", r, "--no-progress")
        assert res.returncode == 0, res.stderr
        outs.append(name)
    a, b = (tmp_path / f"{n}.jsonl" for n in outs)
    assert a.read_bytes() == b.read_bytes()
    for sub in ("npy/data.npy", "litgpt/data_0000000000.bin"):
        assert (tmp_path / "tok-one" / sub).read_bytes() == (tmp_path / "tok-two" / sub).read_bytes()
    stats = json.loads((tmp_path / "tok-one" / "stats.json").read_text())
    srcs = {s["name"]: s for s in stats["sources"]}
    assert list(srcs) == ["wiki", "web", "qa"]
    assert srcs["web"]["target_share"] == pytest.approx(0.5)  # weights 1, 2, 1
    assert srcs["wiki"]["target_share"] == pytest.approx(0.25)
    assert abs(srcs["web"]["achieved_share"] - 0.5) < 0.05
    # a rerun redoes nothing: every source's shards, the shared stage and the token shards are reused
    res = cli("run", tmp_path / "one.yaml", "--no-progress")
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("already done, skipped") >= 4 and "export already complete" in res.stderr
    assert (tmp_path / "one.jsonl").read_bytes() == b.read_bytes()
    # `gristmill tokenize RECIPE` alone: the sources' rows of the last run, mixed the same way
    before = (tmp_path / "tok-one" / "npy" / "data.npy").read_bytes()
    res = cli("tokenize", tmp_path / "one.yaml", "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "web" in res.stderr and (tmp_path / "tok-one" / "npy" / "data.npy").read_bytes() == before


@pytest.mark.parametrize("np_", [1, 2])
def test_killed_after_a_source_resumes_byte_identical(tmp_path, np_):
    """Killed while the second source runs (its op blocks while a gate file exists), the rerun reuses the
    first source's work and gives the bytes of an uninterrupted run. At np 2 the sources' shards run as one
    pool of tasks on one set of workers (engine.runner.drive_many): the first source is finished (its
    report written) while the second's tasks still run."""
    import signal
    import subprocess
    import sys
    import time
    d = inputs(tmp_path)
    gate = tmp_path / "gate"
    block = (f"lambda s: (__import__('os').path.exists({str(gate)!r}) and __import__('time').sleep(3600), s)[1]")
    clean = recipe(tmp_path, d, "clean", np_)
    r = json.loads(json.dumps(__import__("yaml").safe_load(open(clean))))
    r.update(project_name="killed", work_dir=str(tmp_path / "work-killed"), export_path=str(tmp_path / "killed.jsonl"),
             allow_scripts=True)
    r["sources"][1]["process"].insert(0, {"python_lambda_mapper": {"lambda_str": block}})
    killed = write_recipe(tmp_path / "killed.yaml", r)
    r_clean = dict(r, project_name="clean", work_dir=str(tmp_path / "work-clean"),
                   export_path=str(tmp_path / "clean.jsonl"))
    write_recipe(clean, r_clean)
    assert cli("run", clean, "--no-progress").returncode == 0
    gate.write_text("x")
    proc = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "run", killed, "--no-progress"],
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wiki_done = tmp_path / "work-killed" / "sources" / "wiki" / "report.json"
    t0 = time.time()
    while not wiki_done.exists() and time.time() - t0 < 120:
        time.sleep(0.2)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wiki_done.exists() and not (tmp_path / "killed.jsonl").exists()
    gate.unlink()
    res = cli("run", killed, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "wiki: stage 0: 1 of 1 shards already done" in res.stderr
    assert (tmp_path / "killed.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()


def test_refusals_before_work(tmp_path):
    d = inputs(tmp_path)
    base = {"project_name": "x", "work_dir": str(tmp_path / "w"), "export_path": str(tmp_path / "x.jsonl")}
    bad = [
        ({"sources": [{"name": "a", "path": str(d / "qa")}], "dataset_path": str(d / "qa")},
         "give `dataset_path` or `sources`, not both"),
        ({"sources": [{"name": "a", "path": str(d / "qa")}, {"name": "a", "path": str(d / "web")}]},
         "the name 'a' is used twice"),
        ({"sources": [{"name": "a b", "path": str(d / "qa")}]}, "a source name is"),
        ({"sources": [{"name": "a", "path": str(d / "qa"), "procss": []}]}, "procss"),
        ({"sources": [{"name": "a", "path": str(d / "qa"), "process": [{"no_such_op": {}}]}]},
         "sources[0] (a): process[0]"),
        ({"sources": [{"name": "a", "path": str(d / "qa")}, {"name": "b", "path": str(d / "web"), "weight": 3}],
          "process": [{"key_value_grouper": {}}], "tokenize": {"tokenizer": "qwen.tiktoken", "output": str(tmp_path / "t")}},
         "merges rows across sources"),
        ({"sources": [{"name": "a", "path": str(d / "qa")}], "export_path": str(d / "qa" / "part.jsonl")},
         "is an input file"),
        ({"sources": [{"name": "web", "path": str(d / "web")}, {"name": "wiki", "path": str(d / "wiki"),
                                                                 "text_keys": "completon"}]},
         "source wiki: text_keys 'completon': no such field"),
    ]
    for i, (extra, msg) in enumerate(bad):
        p = write_recipe(tmp_path / f"bad{i}.yaml", {**base, **extra})
        res = cli("run", p, "--no-progress")
        assert res.returncode == 2, (extra, res.stderr)
        assert msg in res.stderr, (msg, res.stderr)
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "w" / "sources").exists()


def test_source_left_empty_is_left_out_of_the_mixture(tmp_path):
    d = inputs(tmp_path)
    r = write_recipe(tmp_path / "e.yaml", {
        "project_name": "e", "work_dir": str(tmp_path / "w"), "export_path": str(tmp_path / "e.jsonl"),
        "sources": [{"name": "gone", "path": str(d / "qa"), "weight": 3,
                     "process": [{"chat_template_mapper": {}}, {"text_length_filter": {"min_len": 100000}}]},
                    {"name": "web", "path": str(d / "web"), "weight": 1}],
        "tokenize": {"tokenizer": "qwen.tiktoken", "seq_len": 32, "output": str(tmp_path / "t"),
                     "total_tokens": 500}})
    res = cli("run", r, "--no-progress")
    assert res.returncode == 0, res.stderr
    rep = json.loads((tmp_path / "w" / "report.json").read_text())
    assert [s["rows_out"] for s in rep["sources"]] == [0, 31]
    stats = json.loads((tmp_path / "t" / "stats.json").read_text())
    assert [s["name"] for s in stats["sources"]] == ["web"] and 500 <= stats["sources"][0]["tokens_used"] < 560


def test_np2_sources_and_shared_chain_share_one_fork_server(tmp_path):
    """At np 2 every source and the shared chain run on one executor: one fork server preloads (started by
    the CLI before planning), the same two workers run the tasks of all sources and of the shared stages,
    the tokenize step's workers fork from that server too, and the export equals np 1's."""
    import subprocess
    import sys
    d = inputs(tmp_path)
    r1 = recipe(tmp_path, d, "one", 1)
    assert cli("run", r1, "--no-progress").returncode == 0
    r2 = recipe(tmp_path, d, "two", 2, tokenize={"tokenizer": "qwen.tiktoken", "seq_len": 64, "formats": ["npy"],
                                                 "eos": "<|im_end|>", "output": str(tmp_path / "tok-two")})
    timeline = tmp_path / "timeline.jsonl"
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", r2, "--no-progress"], capture_output=True,
                         text=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                         env={**os.environ, "GRISTMILL_TIMELINE": str(timeline)})
    assert res.returncode == 0, res.stderr
    events = [json.loads(x) for x in timeline.read_text().splitlines()]
    servers = {e["pid"] for e in events if e["event"] == "fork server preloaded"}
    tasks = [e for e in events if e["event"] == "task start" and e.get("stage_dir") and e["stage_dir"] != "tok"]
    stage_dirs = {e["stage_dir"] for e in tasks}
    assert len(servers) == 1
    assert len({e["pid"] for e in tasks}) == 2 and len(stage_dirs) >= 4  # 3 sources' stages + the shared ones
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()


def test_shared_shards_join_one_sources_shards_up_to_the_limit(tmp_path):
    from gristmill.engine.multisource import shared_shards
    f = {}
    for name, n in (("a", 5), ("b", 5), ("c", 5), ("d", 3), ("e", 0)):
        f[name] = str(tmp_path / name)
        (tmp_path / name).write_bytes(b"x" * n)
    src = [[[f["a"]], [f["b"]], [f["c"]]], [[f["d"]], []], [[f["e"]]]]
    assert shared_shards(src, 10) == ([[f["a"], f["b"]], [f["c"]], [f["d"]], [f["e"]]], [0, 0, 1, 2])
    assert shared_shards(src, 4) == ([[f["a"]], [f["b"]], [f["c"]], [f["d"]], [f["e"]]], [0, 0, 0, 1, 2])
