"""remove_comments_mapper with ``doc_type: md``: Data-Juicer 1.6.1 ignores doc_type and applies its ``%``
rules; the DJ outputs below were produced by its op on these texts, and gristmill's equal them."""
import pytest

from djops_util import run
from gristmill.registry import create_op

TEXTS = ["# Notes\n\n% draft: remove before publishing\nThe integral $\\int_0^1 x\\,dx$ equals one half.\n"
         "See eq. (1).% trailing\n",
         "## Résumé\n%%\nLine with escaped \\% percent stays.\n",
         "",
         "Plain markdown without comments.\n* item\n"]
DJ = ["# Notes\n\nThe integral $\\int_0^1 x\\,dx$ equals one half.\nSee eq. (1)\n",
      "## Résumé\nLine with escaped \\% percent stays.\n",
      "",
      "Plain markdown without comments.\n* item\n"]


def test_md_same_as_data_juicer():
    out = [r["text"] for r in run("remove_comments_mapper", [{"text": t} for t in TEXTS], doc_type="md")[0]]
    assert out == DJ
    tex = [r["text"] for r in run("remove_comments_mapper", [{"text": t} for t in TEXTS], doc_type=["tex", "md"])[0]]
    assert tex == out


def test_other_doc_types_refused():
    with pytest.raises(Exception, match="only 'tex' and 'md'"):
        create_op("remove_comments_mapper", {"doc_type": "html"})
