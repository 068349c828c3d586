"""What a newcomer hit on the command line (issue 24, §6): a tokenize-only recipe, `tokenize` without a
section, --version, no export_path, `head --format` on another format, the `ops` table at 100 columns,
reasons without sys.maxsize's digits, ffmpeg and model files checked before work, no empty export left by
a failed run. Each test fails on the code before these fixes."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
MAXSIZE_DIGITS = str(sys.maxsize)

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Packing documents into rows keeps every token.",
         "数据清洗之后，我们把文本切分成词元。", "def add(a, b):\n    return a + b\n",
         "Numbers 1234567 and 3.14159; emails like a.b@example.org.", "Café naïve résumé — déjà vu."]


def cli(*args, cwd=None, env=None, timeout=300):
    e = dict(os.environ, **(env or {}))
    e["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])  # this checkout
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env=e, timeout=timeout)


def gm(capsys, *args):
    """``gristmill ARGS`` in this process (the subprocess start costs seconds per call): exit status, output."""
    from types import SimpleNamespace

    from gristmill.cli import main
    capsys.readouterr()
    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:  # argparse's --version / usage
        rc = e.code
    out = capsys.readouterr()
    return SimpleNamespace(returncode=rc, stdout=out.out, stderr=out.err)


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def write_recipe(path: Path, recipe: dict) -> Path:
    path.write_text(yaml.safe_dump(recipe, allow_unicode=True))
    return path


def corpus(tmp_path: Path, n: int = 40) -> Path:
    return write_jsonl(tmp_path / "docs.jsonl", [{"id": str(i), "text": " ".join(TEXTS[j % len(TEXTS)]
                                                                               for j in range(i % 5 + 1))}
                                                 for i in range(n)])


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> str:
    """A small byte-level BPE tokenizer trained here (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXTS * 20, trainer=trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return str(path)


def token_files(out: Path) -> dict[str, bytes]:
    """The training data an output directory holds (not its reports, which name paths and times)."""
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix == ".npy"}


# -- a tokenize-only recipe -------------------------------------------------------------------------------

def test_tokenize_only_recipe_runs_and_matches_a_recipe_with_a_dataset(tmp_path, tokenizer, capsys, monkeypatch):
    data = corpus(tmp_path)
    section = {"tokenizer": tokenizer, "backend": "hf", "seq_len": 32, "pack": "padded", "format": "npy"}
    monkeypatch.setenv("GRISTMILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # nothing lands in the current directory but what the recipe names
    only = write_recipe(tmp_path / "only.yaml", {"tokenize": {**section, "sources": str(data),
                                                              "output": str(tmp_path / "only")}})
    res = cli("run", str(only), "--no-progress", cwd=tmp_path, env={"GRISTMILL_CACHE": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    assert "dataset_path" not in res.stderr and "warning" not in res.stderr  # nothing to export: no warning
    got = token_files(tmp_path / "only")
    assert got and "data.npy" in got

    # the same data through a recipe with a dataset (no ops): its export is tokenized
    full = write_recipe(tmp_path / "full.yaml", {"dataset_path": str(data), "export_path": str(tmp_path / "exp.jsonl"),
                                                 "work_dir": str(tmp_path / "work"),
                                                 "tokenize": {**section, "output": str(tmp_path / "full")}})
    res = gm(capsys, "run", full, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert token_files(tmp_path / "full") == got

    # `gristmill tokenize` on the tokenize-only recipe: the same bytes again
    again = write_recipe(tmp_path / "again.yaml", {"tokenize": {**section, "sources": str(data),
                                                                "output": str(tmp_path / "again")}})
    res = gm(capsys, "tokenize", again, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert token_files(tmp_path / "again") == got


def test_tokenize_only_recipe_with_ops_is_refused(tmp_path, tokenizer, capsys, monkeypatch):
    r = write_recipe(tmp_path / "r.yaml", {"process": [{"text_length_filter": {"min_len": 3}}],
                                           "tokenize": {"tokenizer": tokenizer, "sources": str(corpus(tmp_path)),
                                                        "output": str(tmp_path / "out")}})
    res = gm(capsys, "run", r, "--no-progress")
    assert res.returncode == 2 and "process needs an input" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


def test_tokenize_without_a_section_says_so(tmp_path, capsys, monkeypatch):
    r = write_recipe(tmp_path / "r.yaml", {"dataset_path": str(corpus(tmp_path)),
                                           "export_path": str(tmp_path / "out.jsonl"),
                                           "process": [{"text_length_filter": {"min_len": 3}}]})
    res = gm(capsys, "tokenize", r)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no `tokenize:` section" in lines[0] and str(r) in lines[0], res.stderr


# -- --version, export_path, head --format ------------------------------------------------------------------

def test_version():
    import gristmill
    res = cli("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"gristmill {gristmill.__version__}", res.stdout + res.stderr


def test_a_recipe_without_export_path_warns_and_runs(tmp_path, capsys, monkeypatch):
    data = corpus(tmp_path)
    r = write_recipe(tmp_path / "r.yaml", {"dataset_path": str(data), "work_dir": str(tmp_path / "work"),
                                           "process": [{"text_length_filter": {"min_len": 3}}]})
    res = gm(capsys, "run", r, "--no-progress")
    assert res.returncode == 0, res.stderr
    warned = [line for line in res.stderr.splitlines() if "export_path" in line]
    assert len(warned) == 1 and warned[0].startswith("warning:"), res.stderr
    assert json.loads((tmp_path / "work" / "report.json").read_text())["rows_out"] == 40
    # with an export_path: no such warning
    r = write_recipe(tmp_path / "r2.yaml", {"dataset_path": str(data), "work_dir": str(tmp_path / "work2"),
                                            "export_path": str(tmp_path / "out.jsonl")})
    res = gm(capsys, "run", r, "--no-progress")
    assert res.returncode == 0 and "export_path" not in res.stderr, res.stderr


def test_head_format_mismatch_is_an_error(tmp_path, capsys, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"text": ["hello", "world"]}), tmp_path / "x.parquet")
    jsonl = corpus(tmp_path)
    for path, fmt, found in [(tmp_path / "x.parquet", "jsonl", "parquet"), (jsonl, "csv", "jsonl"),
                             (jsonl, "parquet", "jsonl")]:
        res = gm(capsys, "head", str(path), "--format", fmt)
        assert res.returncode == 2 and res.stdout == "", (fmt, res.stdout)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and f"--format {fmt}" in lines[0] and found in lines[0], res.stderr
    # formats that read each other's files, and a format matching the extension, still work
    for fmt in ("jsonl", "json"):
        res = gm(capsys, "head", str(jsonl), "--format", fmt, "-n", "1")
        assert res.returncode == 0 and json.loads(res.stdout)["id"] == "0", res.stderr
    res = gm(capsys, "head", str(tmp_path / "x.parquet"), "--format", "parquet", "-n", "1")
    assert res.returncode == 0 and json.loads(res.stdout)["text"] == "hello", res.stderr


# -- gristmill ops at 100 columns -----------------------------------------------------------------------------

def test_ops_table_at_100_columns_has_full_names_and_summaries(capsys, monkeypatch):
    from gristmill.opsdoc import summary
    from gristmill.registry import all_ops, describe
    monkeypatch.setenv("COLUMNS", "100")
    res = gm(capsys, "ops")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(map(len, lines)) <= 100
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["op", "kind", "summary"])
    col = lines[header].index("summary")
    got: dict[str, list[str]] = {}
    name = None
    for line in lines[header + 2:]:
        if not line.strip():
            continue
        if line[:col].strip():
            name = line[:col].split()[0]
            got[name] = []
        got[name].append(line[col:].strip())
    ops = {n: c for n, c in all_ops().items() if c.__module__.startswith("gristmill.")}
    assert set(ops) <= set(got)  # every name whole
    for n, c in ops.items():
        want = "".join(summary(describe(c)["doc"]).replace("``", "`").split())
        assert "".join("".join(got[n]).split()) == want, n  # every character (a long word folds over lines)
    words = " ".join(" ".join(got["words_num_filter"]).split())
    assert "within [min_num, max_num]" in words  # brackets are text, not markup
    assert MAXSIZE_DIGITS not in res.stdout


def test_summary_is_the_whole_first_sentence():
    from gristmill.opsdoc import summary
    doc = "Keep samples (e.g. web pages) whose ratio is in [a, b].\nMore about it.\n\nDetails."
    assert summary(doc) == "Keep samples (e.g. web pages) whose ratio is in [a, b]."
    assert summary("One line without a stop") == "One line without a stop"


# -- reasons -------------------------------------------------------------------------------------------------

def test_reasons_never_show_sentinel_numbers():
    import math

    from gristmill.ops.base import range_reason
    from gristmill.registry import create_op
    op = create_op("average_line_length_filter", {"min_len": 10})  # max_len: Data-Juicer's sys.maxsize
    _, gone = op.apply([{"text": "a", "__stats__": {"avg_line_length": math.inf}},
                        {"text": "b", "__stats__": {"avg_line_length": 2.0}}], removed=True)
    assert [g["__reason__"] for g in gone] == ["avg_line_length is infinite (no upper bound)", "avg_line_length < 10"]
    op = create_op("specified_numeric_field_filter", {"field_key": "score", "min_value": 0.5})
    _, gone = op.apply([{"text": "a", "score": "n/a"}], removed=True)
    assert gone[0]["__reason__"] == "score not a number in [0.5, no upper bound]"
    reasons = list(range_reason([-math.inf, 1e300, 5.0, math.nan], -sys.maxsize, float(sys.maxsize), "x"))
    assert reasons == ["x is infinite (no lower bound)", "x too large (no upper bound)", "x out of range",
                       "x out of range"]
    assert list(range_reason([1.0, 9.0], 2, 8, "x")) == ["x < 2", "x > 8"]  # real bounds keep their numbers
    for r in reasons:
        assert MAXSIZE_DIGITS not in r and "inf" not in r.replace("infinite", "")


def test_run_reasons_have_no_sentinel_digits(tmp_path, capsys, monkeypatch):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": str(i), "text": "x", "score": v}
                                              for i, v in enumerate(["high", 0.1, 0.9])])
    r = write_recipe(tmp_path / "r.yaml", {"dataset_path": str(data), "export_path": str(tmp_path / "o.jsonl"),
                                           "work_dir": str(tmp_path / "w"), "process": [
                                               {"specified_numeric_field_filter": {"field_key": "score",
                                                                                   "min_value": 0.5}}]})
    res = gm(capsys, "run", r, "--no-progress")
    assert res.returncode == 0, res.stderr
    report = (tmp_path / "w" / "report.json").read_text()
    assert "no upper bound" in report and MAXSIZE_DIGITS not in report and MAXSIZE_DIGITS not in res.stderr


# -- found before work: ffmpeg, model files; no empty export ---------------------------------------------------

def test_an_ffmpeg_op_without_ffmpeg_fails_before_work(tmp_path, capsys, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # wherever ffmpeg is installed, it is not found here
    data = write_jsonl(tmp_path / "v.jsonl", [{"id": "0", "text": "", "videos": [str(tmp_path / "a.mp4")]}])
    for op, params in [("video_ffmpeg_wrapped_mapper", {"filter_name": "scale", "filter_kwargs": {"width": 32}}),
                       ("audio_ffmpeg_wrapped_mapper", {"filter_name": "atrim", "audio_key": "videos"}),
                       ("video_resize_resolution_mapper", {"max_width": 64}),
                       ("video_resize_aspect_ratio_mapper", {}), ("video_split_by_duration_mapper", {}),
                       ("video_split_by_key_frame_mapper", {}), ("video_split_by_scene_mapper", {})]:
        r = write_recipe(tmp_path / f"{op}.yaml", {"dataset_path": str(data), "export_path": str(tmp_path / op / "o.jsonl"),
                                                   "work_dir": str(tmp_path / op / "w"), "process": [{op: params}]})
        res = gm(capsys, "run", r, "--no-progress")
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "ffmpeg" in lines[0] and "apt-get install ffmpeg" in lines[0], res.stderr
        assert f"process[0].{op}" in lines[0]
        assert not (tmp_path / op).exists()  # no work dir, no export
    # without a filter the op does nothing, so it needs no ffmpeg
    r = write_recipe(tmp_path / "noop.yaml", {"dataset_path": str(data), "export_path": str(tmp_path / "n.jsonl"),
                                              "work_dir": str(tmp_path / "nw"),
                                              "process": ["video_ffmpeg_wrapped_mapper"]})
    res = gm(capsys, "run", r, "--no-progress")
    assert res.returncode == 0, res.stderr


ARPA = """\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-1.0\t<unk>\t0
-99\t<s>\t-0.30103
-0.5\tcat\t-0.30103
-0.5\t</s>

\\2-grams:
-0.3\t<s> cat
-0.3\tcat </s>

\\end\\
"""


def test_models_add_refuses_a_file_that_does_not_parse(tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setenv("GRISTMILL_MODELS", str(store))
    good = tmp_path / "lm.arpa"
    good.write_text(ARPA)
    cases = {"truncated.arpa": ("en.arpa.bin", ARPA[:len(ARPA) // 2].encode()),
             "page.html": ("en.arpa.bin", b"<html><body>404 Not Found</body></html>"),
             "junk.model": ("en.sp.model", b"\x0a\x05hello garbage" * 10),
             "text.model": ("zh.sp.model", b"not a model at all"),
             "lid.bin": ("lid.176.bin", b"<html>403</html>" * 10),
             "empty.arpa": ("de.arpa", b"")}
    for fname, (name, content) in cases.items():
        (tmp_path / fname).write_bytes(content)
        res = gm(capsys, "models", "add", name, tmp_path / fname)
        assert res.returncode == 2, (fname, res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "not a valid" in lines[0] and fname in lines[0], res.stderr
        assert not store.exists() or not list(store.iterdir()), fname  # nothing copied, no temp file
    res = gm(capsys, "models", "add", "en.arpa.bin", good)
    assert res.returncode == 0, res.stderr
    assert (store / "en.arpa.bin").read_text() == ARPA


def test_a_failed_run_leaves_no_empty_export(tmp_path, capsys, monkeypatch):
    data = corpus(tmp_path, 10)
    out = tmp_path / "out" / "cleaned.jsonl"
    r = write_recipe(tmp_path / "r.yaml", {"dataset_path": str(data), "export_path": str(out),
                                           "work_dir": str(tmp_path / "work"),
                                           "process": [{"python_lambda_mapper": {"lambda_str": "lambda s: 1 / 0"}}]})
    res = gm(capsys, "run", r, "--no-progress", "--allow-scripts")
    assert res.returncode == 1 and "every row was rejected" in res.stderr, res.stderr
    assert not out.exists() and "exported:" not in res.stderr
    assert not [p for p in out.parent.iterdir() if p.suffix == ".jsonl"] if out.parent.exists() else True
    res = gm(capsys, "run", r, "--no-progress", "--allow-scripts")  # the rerun fails the same way
    assert res.returncode == 1 and not out.exists(), res.stderr
