"""``pii_redaction_mapper``: replace personal data and secrets with placeholders and count what was found.

Kinds, applied in this order: secrets (PEM private keys, JWTs, AWS/GitHub/Slack/Google/Stripe/OpenAI-style
keys, ``password=``/``api_key:``-style values), emails, Chinese resident ID numbers (18 characters, birth
date and ISO 7064 MOD 11-2 check digit validated), payment-card numbers (13-19 digits, issuer prefix and
Luhn checked), IPv4 and IPv6 (validated by ``ipaddress``), phone numbers (Chinese mobile; international
``+CC`` with 8-15 digits). Param and placeholder names follow Data-Juicer's ``pii_redaction_mapper`` where
it has the kind (its path/channel/agent-id rules are not implemented). Stats: ``pii_<kind>`` counts.

Columnar pre-filter: one RE2 search per kind over the column finds rows that may hold that kind; only
those rows go through Python's ``re`` (validation needs checksums and ``ipaddress``, replacement needs
counts), so clean text costs a few Arrow scans.
"""
from __future__ import annotations

import ipaddress
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params

KINDS = ("secrets", "emails", "id_cards", "credit_cards", "ips", "phones")

# RE2 pre-filters: a row that matches none of a kind's filter cannot contain that kind
PREFILTER = {
    "secrets": r"-----BEGIN|A[KSGIRNP][IPDONV]A|gh[pousr]_|github_pat_|xox[abposr]-|AIza|sk-|[rs]k_(?:live|test)_|eyJ",
    "secret_values": r"(?i:pass|pwd|secret|token|api.?key|access.?key)",
    "emails": r"@",
    "id_cards": r"[1-9]\d{16}[\dXx]",
    "credit_cards": r"\d{4}[ -]?\d{4}[ -]?\d{4}[ -]?\d",
    "ips": r"\d\.\d{1,3}\.\d{1,3}\.\d|[0-9A-Fa-f]*::|[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}",
    "phones": r"\+\d|1[3-9]\d{9}|1[3-9]\d[ -]\d{4}[ -]\d{4}",
}

_SECRETS = re.compile("|".join(f"(?:{p})" for p in (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}",
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
    r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36}\b",
    r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",
    r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}\b",
    r"\bsk-(?:proj-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{20,}",
)))  # one alternation: a single scan of the text instead of one per key format
_SECRET_KV = re.compile(
    r"(?i)\b((?:api[_-]?key|apikey|secret(?:[_-]?key)?|client[_-]?secret|access[_-]?key(?:[_-]?id)?|password|"
    r"passwd|pwd|auth[_-]?token|access[_-]?token|token)[\"']?\s*[:=]\s*[\"']?)([^\s\"'`,;{}\[\]<>]{6,})")
_EMAIL = re.compile(r"(?<![\w.+%-])[A-Za-z0-9][A-Za-z0-9._%+-]*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+"
                    r"[A-Za-z]{2,}(?![\w-])")
_ID_CN = re.compile(r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}"
                    r"[\dXx](?![0-9A-Za-z])")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IPV4 = re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
                   r"(?!\.?\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])")
_PHONE_CN = re.compile(r"(?<![\d+])(?:(?:\+|00)?86[ -]?)?1[3-9]\d(?:\d{8}|[ -]\d{4}[ -]\d{4})(?!\d)")
_PHONE_INTL = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{2,5}){2,5}(?![\d])")

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def cn_id_valid(s: str) -> bool:
    """ISO 7064 MOD 11-2 check digit of an 18-character Chinese resident ID."""
    total = sum(int(c) * w for c, w in zip(s[:17], _ID_WEIGHTS))
    return "10X98765432"[total % 11] == s[17].upper()


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_valid(s: str) -> bool:
    digits = s.replace(" ", "").replace("-", "")
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    two, four = int(digits[:2]), int(digits[:4])
    issuer = (digits[0] == "4" or 51 <= two <= 55 or 2221 <= four <= 2720 or two in (34, 37, 36, 38, 35, 62, 65)
              or digits[:3] in ("300", "301", "302", "303", "304", "305") or digits[:4] == "6011"
              or 644 <= int(digits[:3]) <= 649)
    return issuer and luhn_valid(digits)


def ipv6_valid(s: str) -> bool:
    if not any(c.isalnum() for c in s):
        return False
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def phone_intl_valid(s: str) -> bool:
    return 8 <= sum(c.isdigit() for c in s) <= 15


class _Redactor:
    """Applies the enabled kinds to one text, counting replacements per kind."""

    def __init__(self, p):
        self.p = p
        self.extra = [(re.compile(pat), repl) for pat, repl in (p.extra_patterns or [])]

    @staticmethod
    def _sub(rx, text, repl, valid=None, group=None):
        n = 0

        def f(m):
            nonlocal n
            s = m.group(0) if group is None else m.group(group)
            if valid is not None and not valid(s):
                return m.group(0)
            n += 1
            return repl if group is None else m.group(1) + repl
        return rx.sub(f, text), n

    def __call__(self, text: str, kinds) -> tuple[str, dict[str, int]]:
        """Redact the ``kinds`` (those whose pre-filter matched this text) in order."""
        p, c = self.p, dict.fromkeys(KINDS, 0)
        if "secrets" in kinds:
            text, c["secrets"] = self._sub(_SECRETS, text, p.secret_replacement)
        if "secret_values" in kinds:
            text, n = self._sub(_SECRET_KV, text, p.secret_replacement,
                                valid=lambda v: v != p.secret_replacement, group=2)
            c["secrets"] += n
        if "emails" in kinds:
            text, c["emails"] = self._sub(_EMAIL, text, p.email_replacement)
        if "id_cards" in kinds:
            text, c["id_cards"] = self._sub(_ID_CN, text, p.id_card_replacement, cn_id_valid)
        if "credit_cards" in kinds:
            text, c["credit_cards"] = self._sub(_CARD, text, p.credit_card_replacement, card_valid)
        if "ips" in kinds:
            text, n4 = self._sub(_IPV4, text, p.ip_replacement)
            text, n6 = self._sub(_IPV6, text, p.ip_replacement, ipv6_valid)
            c["ips"] = n4 + n6
        if "phones" in kinds:
            text, n1 = self._sub(_PHONE_CN, text, p.phone_replacement)
            text, n2 = self._sub(_PHONE_INTL, text, p.phone_replacement, phone_intl_valid)
            c["phones"] = n1 + n2
        for rx, repl in self.extra:
            text = rx.sub(repl, text)
        return text, c


@register("pii_redaction_mapper")
class PiiRedactionMapper(Mapper):
    """Redact emails, IPs, phones, payment cards, Chinese IDs and secrets; stats ``pii_<kind>`` counts."""

    class Params(Params):
        mask_secrets: bool = Field(True, description="Redact private keys, tokens and key=value secrets.")
        mask_emails: bool = Field(True, description="Redact email addresses.")
        mask_id_cards: bool = Field(True, description="Redact Chinese resident ID numbers (checksum-validated).")
        mask_credit_cards: bool = Field(True, description="Redact payment-card numbers (Luhn-checked).")
        mask_ips: bool = Field(True, description="Redact IPv4 and IPv6 addresses.")
        mask_phones: bool = Field(True, description="Redact Chinese mobile and +CC international numbers.")
        secret_replacement: str = Field("[REDACTED]", description="Placeholder for secrets.")
        email_replacement: str = Field("[EMAIL_REDACTED]", description="Placeholder for emails.")
        id_card_replacement: str = Field("[ID_CARD_REDACTED]", description="Placeholder for ID numbers.")
        credit_card_replacement: str = Field("[CREDIT_CARD_REDACTED]", description="Placeholder for card numbers.")
        ip_replacement: str = Field("[IP_REDACTED]", description="Placeholder for IP addresses.")
        phone_replacement: str = Field("[PHONE_REDACTED]", description="Placeholder for phone numbers.")
        extra_patterns: list[tuple[str, str]] | None = Field(None, description="More (regex, replacement) pairs, "
                                                                               "applied last (not counted).")

    def process_batch(self, batch):
        p = self.params
        text = self.text(batch)
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        n = len(text)
        enabled = [k for k in KINDS if getattr(p, f"mask_{k}")]
        if p.mask_secrets:  # key=value secrets have their own pre-filter ("password", "token"...)
            enabled.append("secret_values")
        hits = {k: pc.fill_null(pc.match_substring_regex(text, PREFILTER[k]), False).to_numpy(zero_copy_only=False)
                for k in enabled}  # per kind, so a row only runs the expressions of the kinds it may hold
        cand = np.ones(n, bool) if p.extra_patterns else np.logical_or.reduce([*hits.values(), np.zeros(n, bool)])
        counts = {k: np.zeros(n, np.int64) for k in KINDS}
        rows = np.flatnonzero(cand & ~pc.is_null(text).to_numpy(zero_copy_only=False))
        out = text
        if len(rows):
            red = self.resource("redactor", lambda: _Redactor(p))
            new = []
            for i, t in zip(rows.tolist(), text.take(pa.array(rows)).to_pylist()):
                t2, c = red(t, [k for k in enabled if hits[k][i]])
                new.append(t2)
                for k, v in c.items():
                    counts[k][i] = v
            mask = np.zeros(n, bool)
            mask[rows] = True
            out = pc.replace_with_mask(text, pa.array(mask), pa.array(new, text.type))
        batch = C.set_column(batch, self.text_key, out)
        return C.with_stats(batch, {f"pii_{k}": counts[k] for k in KINDS})
