"""`gristmill head` shows rows that have no text field (chat / Baike / Zhihu data, made into text by a
recipe's first op); an explicit --text-key still requires that field."""
import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from gm_testutil import REPO, write_jsonl

ROWS = [{"instruction": "把这句话翻译成英文", "input": "你好", "output": "Hello"},
        {"instruction": "总结", "input": "", "output": "好", "text": "有正文"}]


def head(*args):
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "head", *args], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    return [json.loads(x) for x in res.stdout.splitlines()]


def test_head_jsonl_without_text(tmp_path):
    p = write_jsonl(tmp_path / "belle.jsonl", ROWS)
    got = head(p)
    assert [{k: v for k, v in r.items() if k != "id"} for r in got] == ROWS
    assert head(p, "-n", "1")[0]["output"] == "Hello"
    # an explicit text key is required: only the row that has it
    assert [r["output"] for r in head(p, "--text-key", "output")] == ["Hello", "好"]
    assert [r["instruction"] for r in head(p, "--text-key", "input")] == ["把这句话翻译成英文", "总结"]
    assert head(p, "--text-key", "body") == []


def test_head_parquet_without_text(tmp_path):
    p = tmp_path / "zhihu.parquet"
    pq.write_table(pa.table({"INSTRUCTION": ["问"], "RESPONSE": ["答"]}), p)
    got = head(str(p))
    assert len(got) == 1 and got[0]["INSTRUCTION"] == "问" and got[0]["RESPONSE"] == "答"
