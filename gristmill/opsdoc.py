"""``docs/ops.md``, generated from the op registry: every op with its kind, docstring, the fields it
reads and writes (where declared: ``Op.inputs`` / ``Op.outputs``, a filter's stats), params (type,
default, description) and an example recipe line.

    python -m gristmill.opsdoc > docs/ops.md     # regenerate
    python -m gristmill.opsdoc --check           # exit 1 when docs/ops.md is out of date (CI)
"""
from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path

import yaml

from .ops.base import Filter
from .registry import all_ops, describe

DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "ops.md"
REGENERATE = "python -m gristmill.opsdoc > docs/ops.md"

# kinds in pipeline order; any other kind follows, sorted
KIND_ORDER = ["mapper", "filter", "deduplicator", "selector", "grouper", "aggregator"]
KIND_TITLES = {"mapper": "Mappers", "filter": "Filters", "deduplicator": "Deduplicators",
               "selector": "Selectors", "grouper": "Groupers", "aggregator": "Aggregators"}

# example params for ops whose defaults alone do nothing useful (or that have required params);
# every other op's example lists its defaults
EXAMPLES: dict[str, dict] = {
    "perplexity_filter": {"model_path": "models/en.arpa.bin", "max_ppl": 1500},
    "token_num_filter": {"hf_tokenizer": "tokenizers/tokenizer.json", "min_num": 10, "max_num": 4096},
    "python_lambda_mapper": {"lambda_str": 'lambda s: {**s, "text": s["text"].strip()}'},
    "python_file_mapper": {"file_path": "my_ops.py", "function_name": "process_single"},
    "image_ohem_selector": {"score_file": "my_loss.py", "top_ratio": 0.2},
    "video_object_segmenting_mapper": {"yoloe_path": "google/owlv2-base-patch16-ensemble"},
    "video_undistort_mapper": {"output_video_dir": "outputs/undistorted"},
    "video_active_speaker_detect_mapper": {"Light_ASD_model_path": "light_asd.torchscript.pt"},
    "video_human_tracks_face_demographic_mapper": {"face_attribute_model": "face_attributes.onnx"},
    "detect_character_locations_mapper": {"yoloe_path": "google/owlv2-base-patch16-ensemble"},
    "detect_character_attributes_mapper": {"detect_character_locations_mapper_args": {
        "yoloe_path": "google/owlv2-base-patch16-ensemble"}},
    "replace_content_mapper": {"pattern": "https?://\\S+", "repl": ""},
    "llm_task_relevance_filter": {"task_desc": "Solve grade-school math word problems step by step.",
                                  "min_score": 0.6},
    "generate_qa_from_examples_mapper": {"seed_file": "seeds.chatml.jsonl", "example_num": 3},
    "llm_condition_filter": {"condition": "The text explains how to cook a dish.", "strategy": "direct"},
    "llm_extract_mapper": {"input_keys": ["text"], "output_schema": {"company": "the company named, or null",
                                                                     "year": "the year founded, as a number"}},
    "relation_identity_mapper": {"source_entity": "李莲花", "target_entity": "方多病"},
    "optimize_qa_mapper": {"is_hf_model": False, "api_or_hf_model": "Qwen/Qwen2.5-7B-Instruct"},
    "optimize_query_mapper": {"is_hf_model": False, "api_or_hf_model": "Qwen/Qwen2.5-7B-Instruct"},
    "optimize_response_mapper": {"is_hf_model": False, "api_or_hf_model": "Qwen/Qwen2.5-7B-Instruct"},
    "specified_field_filter": {"field_key": "meta.language", "target_value": ["en", "de"]},
    "specified_numeric_field_filter": {"field_key": "meta.score", "min_value": 0.5, "max_value": 1.0},
    "random_selector": {"select_num": 10000, "seed": 42},
    "topk_specified_field_selector": {"field_key": "__dj__stats__.text_len", "topk": 1000, "reverse": True},
    "key_value_grouper": {"group_by_keys": ["meta.source"]},
    "text_chunk_mapper": {"max_len": 2000, "split_pattern": "\\n\\n", "overlap_len": 0},
    "suffix_filter": {"suffixes": [".md", ".txt"]},
    "extract_json_field_mapper": {"source_key": "METADATA", "path": "upvotes", "target_key": "upvotes"},
    "fields_to_text_mapper": {"parts": [{"field": "INSTRUCTION", "prefix": "问："},
                                        {"field": "RESPONSE", "prefix": "答："}], "sep": "\n"},
    "human_number_mapper": {"source_key": "upvotes", "integer": True},
    "video_extract_frames_mapper": {"frame_sampling_method": "uniform", "frame_num": 3,
                                    "frame_dir": "frames/", "frame_field": "video_frames"},
    "ngram_decontamination_filter": {"benchmarks": ["benchmarks/mmlu_test.jsonl", "benchmarks/gsm8k_test.parquet"],
                                     "n": 13},
    "semantic_deduplicator": {"embedding_model": "wordllama", "threshold": 0.9},
    "text_embedding_mapper": {"embedding_model": "minishlab/potion-base-8M", "embedding_key": "embedding"},
    "fasttext_classifier_filter": {"model_path": "quality.fasttext.bin", "keep_labels": [["hq", 0.5]]},
    "fasttext_quality_filter": {"model_path": "quality.fasttext.bin", "alpha": 3, "seed": 42},
    "text_classifier_filter": {"hf_model": "HuggingFaceFW/fineweb-edu-classifier", "min_score": 3,
                               "stats_prefix": "edu_"},
    "sdxl_prompt2prompt_mapper": {"text_key_second": "caption2", "num_inference_steps": 30},
    "text_pair_similarity_filter": {"hf_clip": "openai/clip-vit-base-patch32", "text_key_second": "target",
                                    "min_score": 0.5},
    "text_embd_similarity_filter": {"api_or_hf_model": "text-embedding-v4", "min_score": 0.3,
                                    "valid_dataset": [{"text": "A worked solution to a math problem."}]},
    "in_context_influence_filter": {"hf_model": "Qwen/Qwen2.5-0.5B", "query_template": "{query}",
                                    "valid_dataset": [{"query": "2 + 2?", "text": "4"}], "min_score": 1.0},
    "instruction_following_difficulty_filter": {"hf_model": "Qwen/Qwen2.5-0.5B", "query_template": "{query}",
                                                "min_score": 0.0, "max_score": 1.0},
    "sentence_augmentation_mapper": {"hf_model": "Qwen/Qwen2-7B-Instruct", "text_key_second": "augmented",
                                     "task_sentence": "Please rewrite the sentence in a more formal tone."},
    "human_preference_annotation_mapper": {"api_url": "http://localhost:8080", "wait_for_annotations": True,
                                           "poll_interval": 30},
}


def _no_limit(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) == sys.maxsize


_ABBREVIATIONS = ("e.g", "i.e", "etc", "vs", "cf", "approx", "incl")


def summary(doc: str) -> str:
    """The first sentence of an op's docstring, whole, on one line (``gristmill ops``): its first paragraph
    up to the first full stop that ends a sentence (not one of "e.g.", nor inside parentheses or code)."""
    import re
    para = " ".join((doc or "").strip().split("\n\n", 1)[0].split())
    for m in re.finditer(r"\.(?=\s|$)", para):
        head = para[:m.start()]
        word = head.rsplit(" ", 1)[-1].lstrip("(").lower()
        if word in _ABBREVIATIONS or head.count("(") > head.count(")") or head.count("`") % 2:
            continue
        return para[:m.end()]
    return para


def default_text(v) -> str:
    """A param's default as a recipe would write it, Data-Juicer's ``sys.maxsize`` as "no limit"."""
    return "no limit" if _no_limit(v) else _yaml(v)


def _plain(v):
    """Defaults as YAML-safe data (tuples as lists)."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _yaml(v) -> str:
    """One value in YAML flow style on one line, as it would be written in a recipe."""
    v = _plain(v)
    if isinstance(v, list):
        return "[" + ", ".join(_yaml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_yaml(k)}: {_yaml(x)}" for k, x in v.items()) + "}"
    if isinstance(v, str) and not v.isprintable():
        return json.dumps(v, ensure_ascii=False)  # newlines, tabs: a double-quoted YAML string
    # dumped inside a flow sequence, so a string is quoted where a flow context needs it ("a://b")
    return yaml.safe_dump([v], default_flow_style=True, allow_unicode=True, width=10 ** 9).strip()[1:-1]


def _type_name(ann) -> str:
    """A readable type: ``int``, ``str | None``, ``'a' | 'b'``, ``list[str]``."""
    if ann is type(None):
        return "None"
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) if isinstance(a, str) else _yaml(a) for a in args)
    if origin is not None and args:
        name = getattr(origin, "__name__", None) or str(origin).replace("typing.", "")
        return f"{name}[{', '.join(_type_name(a) for a in args)}]"
    if ann is typing.Any:
        return "any"
    return getattr(ann, "__name__", None) or str(ann).replace("typing.", "")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default_cell(p: dict) -> str:
    if p["required"]:
        return "**required**"
    v = p["default"]
    if _no_limit(v):
        return "no limit"
    return f"`{_yaml(v)}`"


def example_params(cls, d: dict | None = None) -> dict:
    """The params of an op's example recipe line: EXAMPLES, else every default that is set (no
    ``text_key``, nothing unset or unlimited)."""
    if cls.name in EXAMPLES:
        return dict(EXAMPLES[cls.name])
    d = d or describe(cls)
    fields = cls.Params.model_fields
    out = {}
    for p in d["params"]:
        if p["required"]:  # an op not in EXAMPLES yet: a placeholder of the right type
            out[p["name"]] = _placeholder(p["name"], fields[p["name"]].annotation)
        elif p["name"] != "text_key" and p["default"] is not None and not _no_limit(p["default"]):
            out[p["name"]] = _plain(p["default"])
    return out


def _placeholder(name: str, ann):
    for t, v in ((bool, True), (int, 1), (float, 1.0), (str, f"<{name}>"), (list, []), (dict, {})):
        if ann is t or typing.get_origin(ann) is t or t in typing.get_args(ann):
            return v
    return f"<{name}>"


def example_line(cls, d: dict | None = None) -> str:
    params = example_params(cls, d)
    if not params:
        return f"- {cls.name}"
    return f"- {cls.name}: {{{', '.join(f'{k}: {_yaml(v)}' for k, v in params.items())}}}"


def _field(name: str) -> str:
    """A declared field for the docs: ``{text_key}`` is the text field, ``{param}`` the field a param names."""
    if name == "{text_key}":
        return "the text field"
    if name.startswith("{") and name.endswith("}"):
        return f"the field `{name[1:-1]}` names"
    return f"`{name}`"


def stats_of(cls) -> list[str]:
    """A filter's stats keys: ``stats_keys``, or where that is a property (stats that depend on params) the
    ``stats.*`` of its declared or default outputs."""
    if not issubclass(cls, Filter):
        return []
    if isinstance(cls.stats_keys, (tuple, list)) and cls.stats_keys:
        return list(cls.stats_keys)
    outs = cls.outputs if cls.outputs is not None else cls.default_outputs()
    return [o[len("stats."):] for o in outs if o.startswith("stats.")]


def columns_notes(cls) -> list[str]:
    """"Reads: ..." / "Writes: ..." from the op's declared ``inputs`` / ``outputs`` (stats are listed
    under "Stats")."""
    out = []
    if cls.inputs is not None:
        out.append("Reads: " + (", ".join(_field(n) for n in cls.inputs) or "nothing") + ".")
    if cls.outputs is not None:
        names = [n for n in cls.outputs if not n.startswith("stats.")]
        if names or not stats_of(cls):
            out.append("Writes: " + (", ".join(_field(n) for n in names) or "nothing") + ".")
    return out


def _kinds(ops: dict[str, type]) -> list[str]:
    present = {c.kind for c in ops.values()}
    return [k for k in KIND_ORDER if k in present] + sorted(present - set(KIND_ORDER))


def _op_section(cls) -> list[str]:
    d = describe(cls)
    out = [f"### {cls.name}", "", f"*{d['kind']}*", ""]
    if d["doc"]:
        out += [d["doc"], ""]
    notes = []
    stats = stats_of(cls)
    if stats:
        notes.append("Stats: " + ", ".join(f"`{k}`" for k in stats) + ".")
    notes += columns_notes(cls)
    if cls.is_script:
        notes.append("Runs user code: needs `allow_scripts: true` in the recipe (or `--allow-scripts`).")
    if notes:
        out += [" ".join(notes), ""]
    fields = cls.Params.model_fields
    out += ["| param | type | default | description |", "|---|---|---|---|"]
    for p in d["params"]:
        t = _type_name(fields[p["name"]].annotation)
        out.append(f"| `{p['name']}` | `{_cell(t)}` | {_cell(_default_cell(p))} | {_cell(p['description'])} |")
    out += ["", "```yaml", "process:", "  " + example_line(cls, d), "```", ""]
    return out


def render() -> str:
    """The whole of docs/ops.md (deterministic: kinds in pipeline order, ops sorted by name)."""
    # gristmill's own ops only: a test or a plugin may register more in the same process
    ops = {n: c for n, c in all_ops().items() if c.__module__.startswith("gristmill.")}
    by_kind = {k: sorted(n for n, c in ops.items() if c.kind == k) for k in _kinds(ops)}
    lines = [
        "# Ops",
        "",
        f"<!-- generated from the op registry by `{REGENERATE}`; do not edit by hand -->",
        "",
        f"{len(ops)} ops. Each is used in a recipe's `process:` list as `- op_name: {{param: value}}`; "
        "`gristmill ops NAME` shows the same from the command line. \"no limit\" is Data-Juicer's "
        "`sys.maxsize` default. Ints may be written as Data-Juicer writes them (`max_num: 2e5`).",
        "",
        "## Contents",
        "",
    ]
    for kind, names in by_kind.items():
        title = KIND_TITLES.get(kind, kind.capitalize() + "s")
        lines.append(f"- **{title}** ({len(names)}): " + ", ".join(f"[{n}](#{n})" for n in names))
    lines.append("")
    for kind, names in by_kind.items():
        lines += [f"## {KIND_TITLES.get(kind, kind.capitalize() + 's')}", ""]
        for n in names:
            lines += _op_section(ops[n])
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    text = render()
    if argv and argv[0] == "--check":
        path = Path(argv[1]) if len(argv) > 1 else DOC_PATH
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            print(f"{path} is out of date with the op registry; regenerate it with `{REGENERATE}`",
                  file=sys.stderr)
            return 1
        return 0
    if argv:
        print(f"unknown argument {argv[0]!r} (use --check)", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
