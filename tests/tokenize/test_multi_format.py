"""`formats:` — tokenize once, write several formats from one packing plan."""
import json
import os

import pytest

from gristmill.tokenize.config import TokenizeConfigError, parse_section
from gristmill.tokenize.run import run_tokenize

SEQ = 64


def _cfg(tok_json, corpus, out, **kw):
    return {"tokenizer": tok_json, "sources": corpus, "output": str(out), "seq_len": SEQ, "pack": "concat",
            "rows_per_chunk": 4, **kw}


def _files(d):
    """{name: bytes} of a format directory, without the run report (it holds timings)."""
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))
            if os.path.isfile(os.path.join(d, n)) and n != "report.json"}


def test_three_formats_byte_identical_to_single_runs(tok_json, corpus, tmp_path):
    multi = tmp_path / "multi"
    rep = run_tokenize(_cfg(tok_json, corpus, multi,
                            formats=["litgpt", "megatron", {"format": "parquet", "output": str(tmp_path / "pq")}]),
                       work_dir=str(tmp_path / "w"), progress=False)
    dirs = {"litgpt": multi / "litgpt", "megatron": multi / "megatron", "parquet": tmp_path / "pq"}
    assert [(o["format"], o["output"]) for o in rep["outputs"]] == [(f, str(d)) for f, d in dirs.items()]
    assert rep["shards_skipped"] == 0
    for fmt, d in dirs.items():
        single = tmp_path / f"single-{fmt}"
        one = run_tokenize(_cfg(tok_json, corpus, single, format=fmt), work_dir=str(tmp_path / f"w-{fmt}"),
                           progress=False)
        assert one["shards_skipped"] == 0  # its own tokenization, not the shards of the multi run
        a, b = _files(d), _files(single)
        assert a.keys() == b.keys() and a == b, fmt
        assert json.load(open(d / "gristmill-tokens.json"))["format"] == fmt
    assert any(n.startswith("data_") and n.endswith(".bin") for n in _files(dirs["litgpt"]))
    assert {"data.bin", "data.idx"} <= _files(dirs["megatron"]).keys()
    assert "data.parquet" in _files(dirs["parquet"])
    st = json.load(open(multi / "stats.json"))
    assert st["format"] == ["litgpt", "megatron", "parquet"] and st["tokens"] == rep["tokens"]
    assert os.path.exists(multi / "report.json")


def test_format_alone_unchanged(tok_json, corpus, tmp_path):
    rep = run_tokenize(_cfg(tok_json, corpus, tmp_path / "o", format="megatron"), work_dir=str(tmp_path / "w"),
                       progress=False)
    assert os.path.exists(tmp_path / "o" / "data.idx") and rep["outputs"][0]["output"] == str(tmp_path / "o")
    assert "data.idx" in rep["files"]
    one = run_tokenize(_cfg(tok_json, corpus, tmp_path / "p", formats=["megatron"]), work_dir=str(tmp_path / "w"),
                       progress=False)
    assert _files(tmp_path / "p") == _files(tmp_path / "o")  # a lone entry of `formats` writes to `output`


def test_adding_a_format_reuses_token_shards(tok_json, corpus, tmp_path):
    work = str(tmp_path / "w")
    first = run_tokenize(_cfg(tok_json, corpus, tmp_path / "o", formats=["npy"]), work_dir=work, progress=False)
    assert first["shards_skipped"] == 0 and first["shards"] > 0
    logs = []
    again = run_tokenize(_cfg(tok_json, corpus, tmp_path / "o2", formats=["npy", "megatron"]), work_dir=work,
                         progress=False, log=logs.append)
    assert again["shards_skipped"] == again["shards"] == first["shards"]  # phase 1 skipped: shards reused
    assert again["backend_info"].get("reason", "").startswith("all shards already tokenized") or \
        again["backend_info"].get("checked") == "by an earlier run"
    assert _files(tmp_path / "o2" / "npy") == _files(tmp_path / "o")
    assert os.path.exists(tmp_path / "o2" / "megatron" / "data.bin")


@pytest.mark.parametrize("bad, msg", [
    ({"formats": []}, "at least one"),
    ({"formats": ["npy"], "format": "npy"}, "not both"),
    ({"formats": ["npy", {"format": "parquet", "output": "o/npy"}]}, "same directory"),
    ({"formats": ["npy", "parquet"], "pack": "none"}, "pack: none"),
    ({"formats": ["npy", "xml"]}, "xml"),
    ({"formats": [{"format": "npy", "outptu": "x"}]}, "outptu"),
])
def test_bad_formats(bad, msg):
    with pytest.raises(TokenizeConfigError, match=msg):
        parse_section({"tokenizer": "t.json", "sources": "in", "output": "o", **bad})


def test_format_list_defaults():
    cfg = parse_section({"tokenizer": "t.json", "sources": "in", "output": "o",
                         "formats": ["npy", {"format": "megatron"}, {"format": "parquet", "output": "elsewhere"}]})
    assert cfg.format_list() == [("npy", os.path.join("o", "npy")), ("megatron", os.path.join("o", "megatron")),
                                 ("parquet", "elsewhere")]
    assert parse_section({"tokenizer": "t.json", "sources": "in", "output": "o"}).format_list() == [("npy", "o")]


def test_cli_prints_summary_table_and_json_on_request(tok_json, corpus, tmp_path, capsys):
    import yaml

    from gristmill.cli import main as cli_main
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(_cfg(tok_json, corpus, tmp_path / "o", formats=["npy", "megatron"])))
    capsys.readouterr()
    assert cli_main(["tokenize", str(p), "--no-progress", "--work-dir", str(tmp_path / "w")]) == 0
    cap = capsys.readouterr()
    assert cap.out == ""  # no JSON without --json
    for want in ("source", "chars/token", "share", "total", "utilisation", "npy:", "megatron:", "data.bin",
                 os.path.join(str(tmp_path / "o"), "report.json")):
        assert want in cap.err, want
    assert len(cap.err.splitlines()) < 30
    full = json.load(open(tmp_path / "o" / "report.json"))
    assert full["stats"]["sources"][0]["docs"] == 150
    assert cli_main(["tokenize", str(p), "--no-progress", "--work-dir", str(tmp_path / "w"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["shards_skipped"] == rep["shards"] and [o["format"] for o in rep["outputs"]] == ["npy", "megatron"]


def test_a_format_in_output_itself_keeps_its_own_files(tok_json, corpus, tmp_path):
    out = tmp_path / "o"
    run_tokenize(_cfg(tok_json, corpus, out, formats=["npy", {"format": "megatron", "output": str(out)}]),
                 work_dir=str(tmp_path / "w"), progress=False)
    run_tokenize(_cfg(tok_json, corpus, tmp_path / "m", format="megatron"), work_dir=str(tmp_path / "w"),
                 progress=False)
    assert _files(out) == _files(tmp_path / "m")  # the npy subdirectory aside
    assert os.path.exists(out / "npy" / "data.npy")
