"""clean_email_mapper, clean_ip_mapper and clean_links_mapper (Data-Juicer's): a built-in pattern removed (or
replaced), in pyarrow's RE2 kernel."""
from __future__ import annotations

from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params
from .regex_sub import regex_sub


class _RegexCleaner(Mapper):
    default_pattern = ""

    class Params(Params):
        pattern: str | None = Field(None, description="Regex to remove (default: the op's built-in pattern).")
        repl: str = Field("", description="Replacement.")

    def process_batch(self, batch):
        pat = self.params.pattern
        if pat is None:
            pat = self.default_pattern
        elif len(pat) > 2 and pat[:2] in ("r'", 'r"') and pat[-1] == pat[1]:
            pat = pat[2:-1]
        return C.set_column(batch, self.text_key, regex_sub(self.text(batch), pat, self.params.repl))


@register("clean_email_mapper")
class CleanEmailMapper(_RegexCleaner):
    """Remove (or replace) e-mail addresses."""

    default_pattern = r"[A-Za-z0-9.\-+_]+@[a-z0-9.\-+_]+\.[a-z]+"


@register("clean_ip_mapper")
class CleanIpMapper(_RegexCleaner):
    """Remove (or replace) IPv4 and IPv6 addresses."""

    default_pattern = (r"(?:(?:1[0-9][0-9]\.)|(?:2[0-4][0-9]\.)|(?:25[0-5]\.)|(?:[1-9][0-9]\.)|(?:[0-9]\.)){3}"
                       r"(?:(?:1[0-9][0-9])|(?:2[0-4][0-9])|(?:25[0-5])|(?:[1-9][0-9])|(?:[0-9]))|"
                       r"([\da-fA-F]{1,4}:){7}[\da-fA-F]{1,4}")


@register("clean_links_mapper")
class CleanLinksMapper(_RegexCleaner):
    """Remove (or replace) URLs (Data-Juicer's pattern)."""

    default_pattern = (r"(?i)\b((?:[a-z][\w-]+:(?:\/{1,3}|[a-z0-9%])|www\d{0,3}[.]|[a-z0-9.\-]+[.][a-z]{2,4}\/)"
                       r"(?:[^\s()<>]+|\(([^\s()<>]+|(\([^\s()<>]+\)))*\))+(?:\(([^\s()<>]+|(\([^\s()<>]+\)))*\)|"
                       r"[^\s`!()\[\]{};:\'\".,<>?«»“”‘’]))")
