"""pii_redaction_mapper: exact redactions and counts on hand-checked inputs."""
import pyarrow as pa

from gristmill.ops.text.pii import card_valid, cn_id_valid, luhn_valid
from gristmill.registry import create_op


def redact(texts, **params):
    out = create_op("pii_redaction_mapper", params).process_batch(
        pa.RecordBatch.from_pylist([{"text": t} for t in texts])).to_pylist()
    return [r["text"] for r in out], [{k[4:]: v for k, v in r["__stats__"].items() if v} for r in out]


def test_checksums():
    assert cn_id_valid("11010519491231002X") and not cn_id_valid("110105194912310021")
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert card_valid("5500-0000-0000-0004") and not card_valid("1234567890123452")  # Luhn-valid, no issuer


def test_each_kind():
    texts, stats = redact([
        "Mail john.doe+x@mail.example.co.uk or bob@test.",
        "hosts 192.168.1.254 and 2001:db8::8a2e:370:7334; version 1.2.3.4.5, 12:30:45, std::vector, 999.1.1.1",
        "call 13812345678, +86 138-1234-5678 or +1 415 555 2671; not 12345678901 or +12",
        "cards 4111 1111 1111 1111, 4111 1111 1111 1112, 1234567890123456",
        "ids 11010519491231002X and 110105194912310021",
        "key AKIAIOSFODNN7EXAMPLE password=hunter22 token: abc",
        "plain text from 2024"])
    assert texts == [
        "Mail [EMAIL_REDACTED] or bob@test.",
        "hosts [IP_REDACTED] and [IP_REDACTED]; version 1.2.3.4.5, 12:30:45, std::vector, 999.1.1.1",
        "call [PHONE_REDACTED], [PHONE_REDACTED] or [PHONE_REDACTED]; not 12345678901 or +12",
        "cards [CREDIT_CARD_REDACTED], 4111 1111 1111 1112, 1234567890123456",
        "ids [ID_CARD_REDACTED] and 110105194912310021",
        "key [REDACTED] password=[REDACTED] token: abc",
        "plain text from 2024"]
    assert stats == [{"emails": 1}, {"ips": 2}, {"phones": 3}, {"credit_cards": 1}, {"id_cards": 1},
                     {"secrets": 2}, {}]


def test_secret_formats_and_pem():
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----"
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    texts, stats = redact([f"a {pem} b", f"Bearer {jwt}", "ghp_" + "a1" * 18 + " and xoxb-1234567890-abcdef",
                           'config = {"api_key": "sk-abcdefghijklmnopqrstuvwx"}'])
    assert texts == ["a [REDACTED] b", "Bearer [REDACTED]", "[REDACTED] and [REDACTED]",
                     'config = {"api_key": "[REDACTED]"}']
    assert [s["secrets"] for s in stats] == [1, 1, 2, 1]


def test_placeholders_switches_and_nulls():
    texts, stats = redact(["x@y.org at 10.0.0.1", None, "x@y.org"], mask_ips=False,
                          email_replacement="<EMAIL>", extra_patterns=[["y\\.org", "Y"]])
    assert texts == ["<EMAIL> at 10.0.0.1", None, "<EMAIL>"]
    assert stats == [{"emails": 1}, {}, {"emails": 1}]
