"""Issue 12, items 2 and 16: tokens are never stale (a changed input or export is tokenized again, a sharded
export is read whole), a tokenize run never writes over its input, and tokenize errors are one line with the
closest valid name, found before any work. EOS: `eos: auto` follows tokenizer_config.json, and a document
that already ends with its EOS (a chat template's last turn) gets no second one."""
import json
import os
import shutil

import pyarrow.parquet as pq
import pytest
import yaml
from tokhelpers import make_docs, write_jsonl

from gristmill.cli import main as cli_main
from gristmill.tokenize.run import OutputOverInput, run_tokenize


def encode(tok_json, texts, eos="<|endoftext|>"):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_json)
    return [tok.encode(t, add_special_tokens=False).ids + [tok.token_to_id(eos)] for t in texts]


def token_docs(out_dir):
    return pq.read_table(os.path.join(out_dir, "data.parquet")).column("input_ids").to_pylist()


def section(tok_json, sources, output, **kw):
    return {"tokenizer": tok_json, "sources": str(sources), "output": str(output), "format": "parquet",
            "pack": "none", **kw}


def texts_of(*paths):
    return [json.loads(line)["text"] for p in paths for line in open(p, encoding="utf-8")]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def write_recipe(tmp_path, tok_json, min_words=30, name="recipe.yaml", tokenize=None, **extra):
    r = {"project_name": "t", "dataset_path": str(tmp_path / "data"), "export_path": str(tmp_path / "out" / "c.jsonl"),
         "work_dir": str(tmp_path / "work"), "np": 1, "process": [{"words_num_filter": {"min_num": min_words}}],
         "tokenize": {"tokenizer": tok_json, "output": str(tmp_path / "tokens"), "format": "parquet", "pack": "none",
                      **(tokenize or {})}, **extra}
    p = tmp_path / name
    p.write_text(yaml.safe_dump(r, allow_unicode=True))
    return str(p)


@pytest.fixture
def data(tmp_path):
    (tmp_path / "data").mkdir()
    write_jsonl(str(tmp_path / "data" / "a.jsonl"), make_docs(120, seed=5))
    return tmp_path / "data"


# -- 2. stale tokens ------------------------------------------------------------------------------------

def test_changed_input_is_tokenized_again(tok_json, tmp_path):
    """Same path, same size, other text: the old shard's tokens must not be reused."""
    src = tmp_path / "a.jsonl"
    write_jsonl(str(src), ["alpha beta gamma", "delta epsilon"])
    cfg = section(tok_json, src, tmp_path / "o")
    run_tokenize(cfg, work_dir=str(tmp_path / "w"), progress=False)
    write_jsonl(str(src), ["gamma alpha beta", "epsilon delta"])  # same byte size
    rep = run_tokenize(cfg, work_dir=str(tmp_path / "w"), progress=False)
    assert rep["shards_skipped"] == 0
    assert token_docs(tmp_path / "o") == encode(tok_json, ["gamma alpha beta", "epsilon delta"])
    again = run_tokenize(cfg, work_dir=str(tmp_path / "w"), progress=False)  # unchanged: reused
    assert again["shards_skipped"] == again["shards"] == 1


def test_changed_filter_retokenizes_the_export(tok_json, tmp_path, data):
    """`gristmill run` with a tokenize section, then the same recipe with another threshold: the tokens
    are those of the new export."""
    assert cli_main(["run", write_recipe(tmp_path, tok_json, 30), "--no-progress"]) == 0
    first = texts_of(tmp_path / "out" / "c.jsonl")
    assert cli_main(["run", write_recipe(tmp_path, tok_json, 60), "--no-progress"]) == 0
    kept = texts_of(tmp_path / "out" / "c.jsonl")
    assert 0 < len(kept) < len(first)
    assert token_docs(tmp_path / "tokens") == encode(tok_json, kept)


def test_sharded_export_is_tokenized_whole(tok_json, tmp_path, data, capsys):
    """export_shard_size splits the export: `gristmill run` tokenizes every file the run wrote, and
    `gristmill tokenize` on the same recipe reads the same files and reuses the run's token shards."""
    recipe = write_recipe(tmp_path, tok_json, 30, export_shard_size=4000)
    assert cli_main(["run", recipe, "--no-progress"]) == 0
    report = json.load(open(tmp_path / "work" / "report.json"))
    files = report["exported_files"]
    assert len(files) > 2 and not os.path.exists(tmp_path / "out" / "c.jsonl")
    assert token_docs(tmp_path / "tokens") == encode(tok_json, texts_of(*files))
    capsys.readouterr()
    assert cli_main(["tokenize", recipe, "--no-progress", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["shards"] == rep["shards_skipped"] == len(files) and rep["docs"] == len(texts_of(*files))


def test_tokenize_before_any_run_says_to_run_first(tok_json, tmp_path, data, capsys):
    recipe = write_recipe(tmp_path, tok_json)
    assert cli_main(["tokenize", recipe, "--no-progress"]) == 2
    assert "run `gristmill run` on it first" in one_error_line(capsys)


def test_output_over_the_input_is_refused(tok_json, tmp_path, data):
    before = open(data / "a.jsonl", "rb").read()
    for out, work in ((data, tmp_path / "w"),  # the output dir is the input dir
                      (tmp_path, tmp_path / "w"),  # it holds the input
                      (data / "tokens", tmp_path / "w"),  # read back as input next time
                      (tmp_path / "o", data / "work")):  # the work dir inside the input dir
        with pytest.raises(OutputOverInput):
            run_tokenize(section(tok_json, data, out), work_dir=str(work), progress=False)
    with pytest.raises(OutputOverInput, match="is an input"):  # a single file given as the output dir
        run_tokenize(section(tok_json, data / "a.jsonl", data / "a.jsonl"), work_dir=str(tmp_path / "w"),
                     progress=False)
    assert sorted(os.listdir(data)) == ["a.jsonl"] and open(data / "a.jsonl", "rb").read() == before


def test_cli_refuses_output_over_input_with_exit_2(tok_json, tmp_path, data, capsys):
    p = tmp_path / "tok.yaml"
    p.write_text(yaml.safe_dump(section(tok_json, data, data / "tokens")))
    assert cli_main(["tokenize", str(p), "--no-progress"]) == 2
    assert "inside the input directory" in one_error_line(capsys)
    # a recipe whose tokenize output lands in its dataset directory fails before the run
    recipe = write_recipe(tmp_path, tok_json, tokenize={"output": str(data / "tokens")})
    assert cli_main(["run", recipe, "--no-progress"]) == 2
    assert "inside the input directory" in one_error_line(capsys)
    assert not (tmp_path / "out").exists() and sorted(os.listdir(data)) == ["a.jsonl"]


# -- 16. one-line errors, checked before the run -----------------------------------------------------------

@pytest.mark.parametrize("change,needle", [
    ({"pakc": "bfd"}, "tokenize.pakc: unknown key 'pakc'; did you mean 'pack'?"),
    ({"format": "megatorn"}, "did you mean 'megatron'?"),
    ({"pack": "best_fitt"}, "unknown pack mode 'best_fitt'; did you mean 'best_fit'?"),
    ({"tokenizer": "TOK/tokenizer.jsn"}, "not found; did you mean 'TOK/tokenizer.json'?"),
    ({"sources": "DATA/b.jsonl"}, "tokenize.sources: dataset path 'DATA/b.jsonl' does not exist; did you mean "
                                  "'DATA/a.jsonl'?"),
    ({"eos": "<|im_endd|>"}, "token '<|im_endd|>' is not in the tokenizer"),
])
def test_cli_tokenize_errors_are_one_line(tok_json, tmp_path, data, capsys, change, needle):
    tok_dir = os.path.dirname(tok_json)
    fix = {k: v.replace("TOK", tok_dir).replace("DATA", str(data)) for k, v in change.items()}
    needle = needle.replace("TOK", tok_dir).replace("DATA", str(data))
    p = tmp_path / "tok.yaml"
    p.write_text(yaml.safe_dump({**section(tok_json, data, tmp_path / "o"), **fix}))
    assert cli_main(["tokenize", str(p), "--no-progress"]) == 2
    assert needle in one_error_line(capsys)
    # the same mistake in a recipe's tokenize section fails `gristmill run` before any processing
    recipe = write_recipe(tmp_path, tok_json, tokenize=fix)
    assert cli_main(["run", recipe, "--no-progress"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {recipe}: tokenize") and needle in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "work").exists()


def test_missing_recipe_file_is_one_line(tmp_path, capsys):
    assert cli_main(["tokenize", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read recipe" in one_error_line(capsys)


# -- 16. EOS -----------------------------------------------------------------------------------------------

CHAT = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nThe quick brown fox.<|im_end|>\n"


@pytest.fixture
def tok_dir_im_end(tok_json, tmp_path):
    """The test tokenizer in a directory whose tokenizer_config.json names <|im_end|> (as Qwen3's does)."""
    d = tmp_path / "tokdir"
    d.mkdir()
    shutil.copy(tok_json, d / "tokenizer.json")
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}))
    return str(d)


def test_eos_auto_is_the_config_eos_and_never_doubled(tok_json, tok_dir_im_end, tmp_path):
    texts = [CHAT, "plain text", "ends with its eos<|im_end|>", "eos inside <|im_end|> then text"]
    write_jsonl(str(tmp_path / "a.jsonl"), texts)
    rep = run_tokenize(section(tok_dir_im_end, tmp_path / "a.jsonl", tmp_path / "o"),
                       work_dir=str(tmp_path / "w"), progress=False)
    assert rep["eos"] == "<|im_end|>"
    want = encode(tok_json, [CHAT[: -len("<|im_end|>\n")], "plain text", "ends with its eos",
                             "eos inside <|im_end|> then text"], eos="<|im_end|>")
    got = token_docs(tmp_path / "o")
    assert got == want
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_json)
    im_end, nl = tok.token_to_id("<|im_end|>"), tok.encode("\n", add_special_tokens=False).ids
    assert got[0][-1] == im_end and got[0][-1 - len(nl):-1] != nl  # ...fox.<|im_end|>, not <|im_end|>\n<|im_end|>
    assert sum(d[-1] == im_end for d in got) == 4
    # another EOS keeps the template's newline: <|im_end|>\n<|endoftext|>
    run_tokenize(section(tok_dir_im_end, tmp_path / "a.jsonl", tmp_path / "o2", eos="<|endoftext|>"),
                 work_dir=str(tmp_path / "w"), progress=False)
    assert token_docs(tmp_path / "o2")[0] == encode(tok_json, [CHAT])[0]


def test_a_work_dir_in_use_is_refused(tok_json, tmp_path, data, capsys):
    """`gristmill tokenize` while another run holds the work dir: exit 2 naming the holder."""
    from gristmill.engine.lock import WorkDirLock
    p = tmp_path / "tok.yaml"
    p.write_text(yaml.safe_dump(section(tok_json, data, tmp_path / "o")))
    with WorkDirLock(str(tmp_path / "w")):
        assert cli_main(["tokenize", str(p), "--work-dir", str(tmp_path / "w"), "--no-progress"]) == 2
    assert f"is in use by another run (pid {os.getpid()} " in one_error_line(capsys)
    assert not (tmp_path / "o").exists()
