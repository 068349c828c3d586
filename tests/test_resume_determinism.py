"""kill -9 midway + resume gives byte-identical output; any np gives byte-identical output."""
import json
import os
import signal
import subprocess
import sys
import time

import yaml

from gm_testutil import REPO, check_accounting, write_jsonl



def gated(gate):
    """An identity lambda that blocks forever on rows of shards 2-5 while `gate` exists: the kill then
    always lands after shards 0-1 finished and before the rest did, however loaded the machine is."""
    return (f"lambda s: (__import__('os').path.exists({str(gate)!r}) and int(s['text'].split()[1]) % 6 >= 2"
            " and __import__('time').sleep(3600), s)[1]")


def corpus(tmp_path, n=2400):
    rows = [{"text": f"doc {i} " + " ".join(f"w{(i * j) % 53}" for j in range(i % 40)), "score": i % 17}
            for i in range(n)]
    rows += rows[:300]  # exact duplicates, for the dedup stage
    return write_jsonl(tmp_path / "in.jsonl", rows)


def recipe(tmp_path, data, name, np_, process, **kw):
    r = {"project_name": name, "dataset_path": data, "export_path": str(tmp_path / f"{name}.jsonl"),
         "work_dir": str(tmp_path / f"work-{name}"), "np": np_, "shard_size_mb": 1, "batch_size": 100,
         "allow_scripts": True, "process": process, **kw}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(r))
    return p


def process(gate):
    return [{"python_lambda_mapper": {"lambda_str": gated(gate)}},
            {"words_num_filter": {"min_num": 5}},
            {"random_selector": {"select_ratio": 0.9, "seed": 7}},
            {"replace_content_mapper": {"pattern": "w1", "repl": "W1"}}]


def cmd(p):
    return [sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"]


def small_shards(data_path, tmp_path):
    """Re-split input so there are several shards (shard_size_mb is at least 1 MB)."""
    rows = [json.loads(x) for x in open(data_path)]
    d = tmp_path / "parts"
    d.mkdir()
    for k in range(6):
        write_jsonl(d / f"part-{k}.jsonl", rows[k::6])
    return str(d)


def test_kill9_then_resume_is_byte_identical(tmp_path):
    data = small_shards(corpus(tmp_path), tmp_path)
    gate = tmp_path / "gate"
    clean = recipe(tmp_path, data, "clean", 1, process(gate))
    assert subprocess.run(cmd(clean), capture_output=True, cwd=REPO, timeout=300).returncode == 0
    killed = recipe(tmp_path, data, "killed", 2, process(gate))
    gate.touch()
    proc = subprocess.Popen(cmd(killed), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    done_dir = None
    deadline = time.time() + 240
    while time.time() < deadline:  # wait until shards 0-1 are finished; 2-5 are held by the gate
        dirs = list((tmp_path / "work-killed" / "stages").glob("00-*/done")) \
            if (tmp_path / "work-killed" / "stages").exists() else []
        if dirs and len(list(dirs[0].iterdir())) >= 2:
            done_dir = dirs[0]
            break
        time.sleep(0.05)
    assert done_dir is not None, "the first shards never finished"
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    gate.unlink()
    assert not (tmp_path / "killed.jsonl").exists()  # no partial export is ever visible
    finished_before = len(list(done_dir.iterdir()))
    res = subprocess.run(cmd(killed), capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"{finished_before} of 6 shards already done" in res.stderr
    assert (tmp_path / "killed.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()
    report = json.loads((tmp_path / "work-killed" / "report.json").read_text())
    check_accounting(report)
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".gm-tmp-")]


def test_output_identical_for_any_np_and_export_format(tmp_path):
    data = small_shards(corpus(tmp_path, 1200), tmp_path)
    ops = process(tmp_path / "no-gate")[1:]
    outs = []
    for np_ in (1, 2):
        p = recipe(tmp_path, data, f"np{np_}", np_, ops)
        assert subprocess.run(cmd(p), capture_output=True, cwd=REPO, timeout=300).returncode == 0
        outs.append((tmp_path / f"np{np_}.jsonl").read_bytes())
    assert outs[0] == outs[1] and outs[0]


def test_changed_recipe_recomputes_and_says_why(tmp_path):
    data = small_shards(corpus(tmp_path, 600), tmp_path)
    p = recipe(tmp_path, data, "chg", 1, [{"words_num_filter": {"min_num": 5}}])
    assert subprocess.run(cmd(p), capture_output=True, cwd=REPO, timeout=300).returncode == 0
    first = (tmp_path / "chg.jsonl").read_bytes()
    res = subprocess.run(cmd(p), capture_output=True, text=True, cwd=REPO, timeout=300)
    assert "6 of 6 shards already done" in res.stderr and "export already complete" in res.stderr
    p = recipe(tmp_path, data, "chg", 1, [{"words_num_filter": {"min_num": 20}}])
    res = subprocess.run(cmd(p), capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0
    assert "stage 0 recomputed: words_num_filter changed (min_num: 5 → 20)" in res.stderr
    assert (tmp_path / "chg.jsonl").read_bytes() != first
