"""Decoding HTML bytes to text the way browsers do: used by the WARC and HTML readers and by
``html_extract_mapper`` on binary HTML columns."""
from __future__ import annotations


def decode_html(body: bytes, declared: str | None) -> tuple[str, str]:
    """(text, encoding). The declared HTTP charset wins when the bytes are valid in it; otherwise the
    encoding is taken from the page's <meta> tag or detected (resiliparse), as browsers do."""
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding, map_encoding_to_html5
    if declared:
        enc = map_encoding_to_html5(declared, fallback_utf8=False)
        if enc:
            try:
                return body.decode(enc).lstrip("\ufeff"), enc
            except (UnicodeDecodeError, LookupError):
                pass
    try:
        return body.decode("utf-8").lstrip("\ufeff"), "utf-8"
    except UnicodeDecodeError:
        pass
    enc = detect_encoding(body, from_html_meta=True) or "cp1252"
    return bytes_to_str(body, enc, errors="replace"), enc
