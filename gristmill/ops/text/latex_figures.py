"""``latex_figure_context_extractor_mapper``: one output row per figure (or subfigure) of a LaTeX paper,
with its caption, label, image paths and the paragraphs that cite it (Data-Juicer's op and rules).

Figures are the ``figure``/``figure*``/``wrapfigure`` environments. Inside one:
- subfigures (``subfigure`` environments, ``\\subfigure``/``\\subfloat`` commands with or without a
  ``[caption]``) each give a row, with the parent figure's caption and label (read from the figure's
  text outside its subfigures); subfigures without ``\\includegraphics`` are skipped;
- otherwise two or more ``minipage`` blocks each give a figure (minipages holding
  ``\\captionof{table}`` or no image are skipped);
- otherwise the environment is one figure, if it has an image.
A caption is the first ``\\caption``/``\\caption*``, else ``\\subcaption``, else ``\\captionof{figure}``
(nested braces kept); a label the first ``\\label``. Citing paragraphs: the text with float, math,
table and verbatim environments removed, split on ``paragraph_separator``, those that reference the
label with one of ``citation_commands`` (also inside comma lists like ``\\cref{fig:a,fig:b}``); a
subfigure also gets its parent's citing paragraphs (parent's first, no repeats).

A paper without any figure with an image yields no row: it is reported as removed with a reason (Data-Juicer
drops it with a log line). Every input field is copied to each of a paper's rows. Per-row Python with the
``regex`` module (recursive patterns for nested braces)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core.accounting import REASON
from ...registry import register
from ..base import Mapper, Params

_BRACED = r"(?:[^{}]|(?P<B>\{(?:[^{}]|(?&B))*\}))*"  # text with balanced braces
_ARGS = r"(?:\[[^\]]*\])*(?:\{[^}]*\})*"  # optional [..] then {..} arguments after \begin{env}
_STRIPPED = ["figure", "figure*", "wrapfigure", "table", "table*", "tabular", "tabular*", "equation", "equation*",
             "align", "align*", "alignat", "alignat*", "gather", "gather*", "multline", "multline*", "flalign",
             "flalign*", "algorithm", "algorithm*", "lstlisting", "verbatim", "minted"]
NO_FIGURE = "no figure with an image"


class _Patterns:
    """The compiled patterns (one set per op instance; ``regex`` is imported lazily)."""

    def __init__(self, citation_commands: list[str]):
        import regex as re
        self.re = re
        self.figure = re.compile(r"\\begin\{(?P<env>figure\*?|wrapfigure)\}" + _ARGS + r".*?\\end\{(?P=env)\}", re.S)
        self.subfig_env = re.compile(r"\\begin\{subfigure\}" + _ARGS + r".*?\\end\{subfigure\}", re.S)
        self.subfig_cmd = re.compile(r"\\(?:subfigure|subfloat)\[([^\]]*)\]\s*\{(" + _BRACED + r")\}")
        self.subfig_bare = re.compile(r"\\(?:subfigure|subfloat)(?!\[)\s*\{(" + _BRACED + r")\}")
        opt = r"(?:\[[^\]]*\])?"
        self.captions = [re.compile(r"\\caption\*?" + opt + r"\{(" + _BRACED + r")\}"),
                         re.compile(r"\\subcaption" + opt + r"\{(" + _BRACED + r")\}"),
                         re.compile(r"\\captionof\{figure\}" + opt + r"\{(" + _BRACED + r")\}")]
        self.table_caption = re.compile(r"\\captionof\{table\}" + opt + r"\{(" + _BRACED + r")\}")
        self.minipage = re.compile(r"\\begin\{minipage\}" + _ARGS + r"(.*?)\\end\{minipage\}", re.S)
        self.label = re.compile(r"\\label\{([^}]+)\}")
        self.graphics = re.compile(r"\\includegraphics(?:\[[^\]]*\])?\{([^}]+)\}")
        envs = "|".join(re.escape(e) for e in _STRIPPED)
        self.floats = re.compile(r"\\begin\{(" + envs + r")\}.*?\\end\{\1\}", re.S)
        self.cmds = "|".join(re.escape(c.lstrip("\\")) for c in citation_commands)
        self._cite: dict = {}

    def caption(self, text: str) -> str:
        for p in self.captions:
            m = p.search(text)
            if m:
                return m.group(1).strip()
        return ""

    def label_of(self, text: str) -> str:
        m = self.label.search(text)
        return m.group(1).strip() if m else ""

    def images(self, text: str) -> list[str]:
        return [m.group(1).strip() for m in self.graphics.finditer(text)]

    def cites(self, label: str):
        if label not in self._cite:
            self._cite[label] = self.re.compile(r"\\(?:" + self.cmds + r")\{(?:[^},]*,\s*)*" + self.re.escape(label)
                                                + r"\s*(?:,[^}]*)?\}")
        return self._cite[label]


def _figure(caption="", label="", images=(), subs=()) -> dict:
    return {"caption": caption, "label": label, "images": list(images), "subs": list(subs)}


def parse_figures(pt: _Patterns, source: str) -> list[dict]:
    out = []
    for m in pt.figure.finditer(source):
        out += _parse_env(pt, m.group(0))
    return out


def _parse_env(pt: _Patterns, env: str) -> list[dict]:
    envs = list(pt.subfig_env.finditer(env))
    cmds = list(pt.subfig_cmd.finditer(env))
    bare = list(pt.subfig_bare.finditer(env))
    if envs or cmds or bare:
        pairs = [(pt.caption(m.group(0)), m.group(0)) for m in envs] + \
                [(m.group(1).strip(), m.group(2)) for m in cmds] + [("", m.group(1)) for m in bare]
        subs = [_figure(cap, pt.label_of(body), pt.images(body)) for cap, body in pairs]
        subs = [s for s in subs if s["images"]]
        outside = env
        for m in sorted(envs + cmds + bare, key=lambda m: m.start(), reverse=True):
            outside = outside[:m.start()] + outside[m.end():]
        return [_figure(pt.caption(outside), pt.label_of(outside), (), subs)] if subs else []
    pages = list(pt.minipage.finditer(env))
    if len(pages) >= 2:
        figs = []
        for mp in pages:
            body = mp.group(1)
            if pt.table_caption.search(body) or not pt.images(body):
                continue
            figs.append(_figure(pt.caption(body), pt.label_of(body), pt.images(body)))
        return figs
    images = pt.images(env)
    return [_figure(pt.caption(env), pt.label_of(env), images)] if images else []


@register("latex_figure_context_extractor_mapper")
class LatexFigureContextExtractorMapper(Mapper):
    """Fan a LaTeX paper out into one row per figure/subfigure with caption, label, image paths and the
    paragraphs citing it; papers without figures with images are removed (reason: no figure with an image)."""

    expands = True

    class Params(Params):
        citation_commands: list[str] | None = Field(None, description="Reference commands (default \\ref, \\cref, "
                                                                      "\\Cref, \\autoref).")
        paragraph_separator: str = Field("\n\n", description="Splits the text into paragraphs.")
        caption_key: str = Field("caption", description="Output field: the caption.")
        label_key: str = Field("label", description="Output field: the label.")
        context_key: str = Field("citing_paragraphs", description="Output field: citing paragraphs.")
        parent_caption_key: str = Field("parent_caption", description="Output field: parent figure's caption.")
        parent_label_key: str = Field("parent_label", description="Output field: parent figure's label.")
        image_key: str = Field("images", description="Output field: image paths.")

    def _patterns(self) -> _Patterns:
        cmds = self.params.citation_commands
        return self.resource("patterns", lambda: _Patterns(cmds if cmds is not None else
                                                           [r"\ref", r"\cref", r"\Cref", r"\autoref"]))

    def rows_of(self, source: str) -> list[dict]:
        """The output fields of each figure row of one paper."""
        pt, p = self._patterns(), self.params
        figures = parse_figures(pt, source)
        if not figures:
            return []
        stripped = pt.floats.sub("", source)
        paras = [x.strip() for x in stripped.split(p.paragraph_separator) if x.strip()]

        def citing(label):
            return [x for x in paras if pt.cites(label).search(x)] if label else []

        out = []
        for fig in figures:
            members = [(s, fig) for s in fig["subs"]] if fig["subs"] else [(fig, None)]
            parent_cites = citing(fig["label"]) if fig["subs"] else []
            for f, parent in members:
                ctx = list(dict.fromkeys(parent_cites + citing(f["label"]))) if parent else citing(f["label"])
                out.append({p.caption_key: f["caption"], p.image_key: f["images"], p.label_key: f["label"],
                            p.context_key: ctx, p.parent_caption_key: parent["caption"] if parent else "",
                            p.parent_label_key: parent["label"] if parent else ""})
        return out

    def _expand(self, batch):
        p = self.params
        per = [self.rows_of(t) if t is not None else [] for t in self.text(batch).to_pylist()]
        counts = np.array([len(x) for x in per], np.int64)
        take = pa.array(np.repeat(np.arange(batch.num_rows), counts))
        out = batch.take(take)
        flat = [r for rows in per for r in rows]
        types = {p.caption_key: pa.string(), p.image_key: pa.list_(pa.string()), p.label_key: pa.string(),
                 p.context_key: pa.list_(pa.string()), p.parent_caption_key: pa.string(), p.parent_label_key: pa.string()}
        for k, t in types.items():
            out = C.set_column(out, k, pa.array([r[k] for r in flat], t))
        return out, counts

    def process_batch(self, batch):
        return self._expand(batch)[0]

    def apply_row_local(self, batch):
        out, counts = self._expand(batch)
        none = counts == 0
        if not none.any():
            return out, None
        gone = batch.filter(pa.array(none))
        return out, gone.append_column(REASON, pa.array([NO_FIGURE] * gone.num_rows, pa.string()))
