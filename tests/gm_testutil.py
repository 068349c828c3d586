import gzip
import json
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "data" / "cc-sample.jsonl.gz"




def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return str(path)


def read_jsonl(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def check_accounting(report):
    """rows_in + added = rows_out + removed + rejected for every op, and ops chain up."""
    for row in report["ops"]:
        assert row["rows_in"] + row["added"] == row["rows_out"] + row["removed"] + row["rejected"], row
        assert sum(row["reasons"].values()) == row["removed"], row
    ops = [r for r in report["ops"] if r["op"] not in ("read", "mixture")]
    for a, b in zip(ops, ops[1:]):
        assert a["rows_out"] == b["rows_in"], (a, b)
    if ops:
        assert ops[-1]["rows_out"] == report["rows_out"]
