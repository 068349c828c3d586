"""URL block-list filter with datatrove's name, params, rules and reasons (``URLFilter``).

A row is removed when, in this order: its registered domain is listed (``domain``), its full host is
listed (``subdomain``), the exact URL is listed (``url``), a word of the URL (split on non-alphanumerics,
case kept as datatrove does) is a banned word (``hard_blacklisted``), at least ``soft_word_threshold``
distinct soft-banned words occur (``soft_blacklisted``), or a banned sub-word occurs in the URL
lower-cased with non-alphanumerics removed (``blacklisted_subword``).

Columnar: hosts come from one RE2 extraction; the public-suffix lookup runs in Python once per *distinct*
host of the batch (a dictionary-encoded column), everything else is Arrow kernels (split, is_in, RE2).

Lists: datatrove extracts an 18 MB UT1 blacklist (CC-BY-SA) and RefinedWeb's word lists from its wheel.
We ship none of those: ``use_integrated_lists`` adds the single-word English entries of the shipped
LDNOOBW-derived list as banned words; domains, URLs, soft words and sub-words come from the user
(``blocklist_dir`` in UT1 layout, files, or inline lists). The Public Suffix List is the snapshot shipped
by the ``tld`` package (ICANN section only, like tldextract's default), or ``suffix_list_file``.
"""
from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params
from .word_lists import load_words

REASONS = np.array(["", "domain", "subdomain", "url", "hard_blacklisted", "soft_blacklisted",
                    "blacklisted_subword"], dtype=object)
_HOST = r"^\s*(?:(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//)?(?:[^@/?#]*@)?(?P<host>\[[^\]]*\]|[^:/?#]*)"
_NORM = re.compile(r"[^a-zA-Z0-9]+")


def normalize(word: str) -> str:
    """datatrove's list normalisation: drop non-alphanumerics, lower-case."""
    return _NORM.sub("", word).lower()


def parse_list(lines, do_normalize: bool = True) -> set[str]:
    out = set()
    for ln in lines:
        ln = ln.strip()
        if ln and not ln.startswith("#"):
            out.add(normalize(ln) if do_normalize else ln)
    return out


def _read(path) -> list[str]:
    return Path(path).read_text("utf-8", errors="replace").splitlines()


@lru_cache(maxsize=4)
def public_suffixes(path: str | None = None) -> tuple[frozenset, frozenset, frozenset]:
    """(exact rules, wildcard parents, exceptions) of the Public Suffix List's ICANN section."""
    if path:
        lines = _read(path)
    else:
        lines = (resources.files("tld") / "res" / "effective_tld_names.dat.txt").read_text("utf-8").splitlines()
    exact, wild, exc = set(), set(), set()
    for ln in lines:
        if "===BEGIN PRIVATE DOMAINS===" in ln:
            break
        ln = ln.strip().lower()
        if not ln or ln.startswith("//"):
            continue
        rule = ln.split()[0]
        forms = {rule}
        try:
            forms.add(".".join(p if p in ("*", "!") else p.encode("idna").decode("ascii")
                               for p in rule.lstrip("!").split(".")) if not rule.startswith("!") else
                      "!" + rule[1:].encode("idna").decode("ascii"))
        except UnicodeError:
            pass
        for r in forms:
            if r.startswith("!"):
                exc.add(r[1:])
            elif r.startswith("*."):
                wild.add(r[2:])
            else:
                exact.add(r)
    return frozenset(exact), frozenset(wild), frozenset(exc)


def split_host(host: str, psl) -> tuple[str, str]:
    """(registered domain, fqdn) as tldextract gives them; ('', '') when the host has no known suffix."""
    exact, wild, exc = psl
    labels = host.split(".")
    if not host or any(not lb for lb in labels):
        return "", ""
    for i in range(len(labels)):  # longest matching suffix first
        cand = ".".join(labels[i:])
        if cand in exc:
            i += 1
            break
        if cand in exact:
            break
        if i + 1 < len(labels) and ".".join(labels[i + 1:]) in wild:
            break
    else:
        return "", ""
    if i == 0:
        return "", ""
    return ".".join(labels[i - 1:]), host


@register("url_filter")
class URLFilter(Filter):
    """Remove rows whose URL is block-listed (datatrove's rules and reasons). Stats: ``url_filter`` (bits of
    the rules that fire: 1 domain, 2 subdomain, 4 url, 8 hard_blacklisted, 32 blacklisted_subword) and
    ``url_soft_words`` (distinct soft-banned words in the URL; soft_blacklisted when >= the threshold)."""

    class Params(Params):
        url_key: str = Field("url", description="Field holding the URL (dotted for nested: metadata.url).")
        soft_word_threshold: int = Field(2, description="Remove when at least this many soft-banned words occur.")
        extra_domains: list[str] | None = Field(None, description="Extra block-listed domains/hosts.")
        extra_urls: list[str] | None = Field(None, description="Extra block-listed full URLs.")
        banned_words: list[str] | None = Field(None, description="Extra banned URL words.")
        banned_subwords: list[str] | None = Field(None, description="Extra banned sub-words.")
        soft_banned_words: list[str] | None = Field(None, description="Extra soft-banned URL words.")
        use_integrated_lists: bool = Field(True, description="Add the shipped default banned words (single-word "
                                                             "English LDNOOBW-derived entries).")
        blocklist_dir: str | None = trust.path_param(
            "read", None, description="UT1-style directory: every '*/domains' and '*/urls' "
                                      "file below it is read (e.g. UT1 'adult').")
        domains_file: str | None = trust.path_param(
            "read", None, description="File of block-listed domains, one a line.")
        urls_file: str | None = trust.path_param("read", None, description="File of block-listed URLs, one a line.")
        banned_words_file: str | None = trust.path_param("read", None, description="File of banned URL words.")
        banned_subwords_file: str | None = trust.path_param("read", None, description="File of banned sub-words.")
        soft_banned_words_file: str | None = trust.path_param(
            "read", None, description="File of soft-banned URL words.")
        suffix_list_file: str | None = trust.path_param(
            "read", None, description="Public Suffix List file (default: the snapshot "
                                      "shipped by the tld package).")
        lowercase_url_words: bool = Field(False, description="Lower-case URL words before matching banned words "
                                                             "(datatrove does not, so 'Sex' escapes 'sex').")

    stats_keys = ("url_filter", "url_soft_words")

    def _lists(self):
        def load():
            p = self.params
            domains = parse_list(p.extra_domains or [], False)
            urls = parse_list(p.extra_urls or [], False)
            banned = parse_list(p.banned_words or [])
            sub = parse_list(p.banned_subwords or [])
            soft = parse_list(p.soft_banned_words or [])
            if p.blocklist_dir:
                for f in sorted(Path(p.blocklist_dir).rglob("*")):
                    if f.is_file() and f.name == "domains":
                        domains |= parse_list(_read(f), False)
                    elif f.is_file() and f.name == "urls":
                        urls |= parse_list(_read(f), False)
            for path, target, norm in ((p.domains_file, domains, False), (p.urls_file, urls, False),
                                       (p.banned_words_file, banned, True), (p.banned_subwords_file, sub, True),
                                       (p.soft_banned_words_file, soft, True)):
                if path:
                    target |= parse_list(_read(path), norm)
            if p.use_integrated_lists:
                banned |= {w for w in load_words("flagged_words")["en"] if re.fullmatch(r"[a-z0-9]+", w)}
            for s in (banned, sub, soft):
                s.discard("")
            sub_re = "|".join(re.escape(w) for w in sorted(sub)) or None
            return (pa.array(sorted(domains), pa.string()), pa.array(sorted(urls), pa.string()),
                    pa.array(sorted(banned), pa.string()), pa.array(sorted(soft), pa.string()), sub_re)
        return self.resource("lists", load)

    def compute_stats(self, batch):
        domains, urls, banned, soft, sub_re = self._lists()
        col = C.get_field(batch, self.params.url_key)
        if col is None:
            raise KeyError(f"url_filter: no {self.params.url_key!r} field (Document does not have url)")
        url = pc.cast(col, pa.string())
        if isinstance(url, pa.ChunkedArray):
            url = url.combine_chunks()
        if url.null_count or not pc.all(pc.greater(pc.utf8_length(pc.fill_null(url, "")), 0)).as_py():
            raise ValueError("url_filter: a row has no url")
        n = len(url)
        code = np.zeros(n, np.int8)

        def mark(mask, k):
            code[mask] |= np.int8(1 << (k - 1))

        if len(domains):
            host = pc.fill_null(pc.struct_field(pc.extract_regex(url, _HOST), [0]), "")
            host = pc.utf8_rtrim(pc.utf8_lower(host), ".")
            enc = host.dictionary_encode()
            psl = public_suffixes(self.params.suffix_list_file)
            parts = [split_host(h, psl) for h in enc.dictionary.to_pylist()]
            reg = pa.array([r for r, _ in parts], pa.string()).take(enc.indices)
            fqdn = pa.array([f for _, f in parts], pa.string()).take(enc.indices)
            mark(pc.is_in(reg, domains).to_numpy(zero_copy_only=False), 1)
            mark(pc.is_in(fqdn, domains).to_numpy(zero_copy_only=False), 2)
        if len(urls):
            mark(pc.is_in(url, urls).to_numpy(zero_copy_only=False), 3)
        n_soft = np.zeros(n, np.int64)
        if len(banned) or len(soft):
            words = pc.split_pattern_regex(url, "[^a-zA-Z0-9]+")
            flat = pc.list_flatten(words)
            if self.params.lowercase_url_words:
                flat = pc.utf8_lower(flat)
            parent = pc.list_parent_indices(words).to_numpy(zero_copy_only=False)
            if len(banned):
                hit = pc.is_in(flat, banned).to_numpy(zero_copy_only=False)
                mark(np.bincount(parent[hit], minlength=n) > 0, 4)
            if len(soft):
                idx = pc.index_in(flat, soft)
                ok = ~pc.is_null(idx).to_numpy(zero_copy_only=False)
                pairs = np.unique(parent[ok].astype(np.int64) * len(soft) +
                                  idx.to_numpy(zero_copy_only=False)[ok].astype(np.int64))
                n_soft = np.bincount(pairs // len(soft), minlength=n).astype(np.int64)
        if sub_re:
            norm = pc.utf8_lower(pc.replace_substring_regex(url, "[^a-zA-Z0-9]+", ""))
            mark(pc.match_substring_regex(norm, sub_re).to_numpy(zero_copy_only=False), 6)
        return C.with_stats(batch, {"url_filter": code, "url_soft_words": n_soft})

    def _flags(self, batch) -> np.ndarray:
        """All rules' hits as bits (the soft rule from the stored count, so thresholds can be re-tuned)."""
        flags = C.get_stat(batch, "url_filter").to_numpy(zero_copy_only=False).astype(np.int64)
        soft = C.get_stat(batch, "url_soft_words").to_numpy(zero_copy_only=False)
        return flags | np.where(soft >= self.params.soft_word_threshold, 1 << 4, 0)

    def keep(self, batch):
        return self._flags(batch) == 0

    def reason(self, removed):
        flags = self._flags(removed)
        first = np.zeros(len(flags), np.int64)
        for k in range(6, 0, -1):  # the first rule that fires, in datatrove's order
            first = np.where(flags & (1 << (k - 1)), k, first)
        return REASONS[first]
