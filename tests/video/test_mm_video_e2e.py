"""``gristmill run`` on a video recipe: filters, scene split and video_deduplicator through the engine;
corrupt media land in rejects, counts add up, two runs give the same bytes."""
import json
import shutil
import subprocess
import sys

import yaml
from gm_avutil import BARS, PORTRAIT, RANDOM, SCENES, TESTSRC, TRUNCATED

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def read_jsonl(p):
    return [json.loads(x) for x in open(p, encoding="utf-8") if x.strip()]


def recipe(tmp, rows, process, name="r"):
    data = tmp / f"{name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = {"project_name": name, "dataset_path": str(data), "export_path": str(tmp / f"{name}-out.jsonl"),
         "work_dir": str(tmp / f"{name}-work"), "np": 2, "process": process,
         "max_reject_ratio": 1.0}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(r))
    return p


def run(p):
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr
    return res


def test_video_recipe_end_to_end(tmp_path):
    remux = str(tmp_path / "bars_remuxed.mkv")  # same packets, other container: a duplicate of BARS
    subprocess.run(["ffmpeg", "-v", "error", "-i", BARS, "-c", "copy", remux], check=True)
    rows = [{"id": "bars", "text": "<__dj__video> bars", "videos": [BARS]},
            {"id": "src", "text": "<__dj__video> testsrc", "videos": [TESTSRC]},
            {"id": "portrait", "text": "<__dj__video> tall", "videos": [PORTRAIT]},
            {"id": "scenes", "text": "<__dj__video> three scenes", "videos": [SCENES]},
            {"id": "remux", "text": "<__dj__video> same bars", "videos": [remux]},
            {"id": "trunc", "text": "<__dj__video> broken", "videos": [TRUNCATED]},
            {"id": "random", "text": "<__dj__video> noise", "videos": [RANDOM]},
            {"id": "missing", "text": "<__dj__video> gone", "videos": [str(tmp_path / "nope.mp4")]}]
    save = tmp_path / "clips"
    process = [{"video_duration_filter": {"min_duration": 1.8}},
               {"video_aspect_ratio_filter": {"min_ratio": "1/1", "max_ratio": "2/1"}},
               {"video_deduplicator": {}},
               {"video_split_by_scene_mapper": {"save_dir": str(save)}}]
    p = recipe(tmp_path, rows, process)
    run(p)
    out = read_jsonl(tmp_path / "r-out.jsonl")
    assert [r["id"] for r in out] == ["bars", "src", "scenes"]
    assert out[2]["text"].count("<__dj__video>") == 3 and len(out[2]["videos"]) == 3
    assert all(v.startswith(str(save)) for v in out[2]["videos"])
    assert out[0]["videos"] == [BARS]
    work = tmp_path / "r-work"
    report = json.loads((work / "report.json").read_text())
    by_op = {o["op"]: o for o in report["ops"]}
    assert by_op["video_duration_filter"]["removed"] == 1  # portrait, 1.5 s
    assert by_op["video_deduplicator"]["removed"] == 1  # the remuxed copy
    assert sum(o["rejected"] for o in report["ops"]) == 3
    for o in report["ops"]:
        assert o["rows_in"] + o["added"] == o["rows_out"] + o["removed"] + o["rejected"], o
    rejects = [json.loads(x) for f in sorted(work.rglob("*reject*")) if f.is_file()
               for x in open(f, encoding="utf-8") if x.strip()]
    text = json.dumps(rejects)
    assert all(k in text for k in ("truncated.mp4", "random_bytes.mp4", "nope.mp4"))
    # deterministic: a second run in another work dir writes the same bytes
    first = (tmp_path / "r-out.jsonl").read_bytes()
    shutil.rmtree(work)
    run(p)
    assert (tmp_path / "r-out.jsonl").read_bytes() == first


def test_split_by_duration_recipe_expands_rows(tmp_path):
    rows = [{"id": "s", "text": "<__dj__video> scenes", "videos": [SCENES]},
            {"id": "t", "text": "no video here"}]
    p = recipe(tmp_path, rows, [{"video_split_by_duration_mapper": {"split_duration": 2, "save_dir": str(tmp_path / "c")}},
                                {"video_duration_filter": {"max_duration": 2.6, "any_or_all": "all"}}], name="d")
    run(p)
    out = read_jsonl(tmp_path / "d-out.jsonl")
    assert [r["id"] for r in out] == ["s#split", "t"]  # the 4.5 s original is filtered out, its clips stay
    assert out[0]["text"] == "<__dj__video><__dj__video><__dj__video> scenes<|__dj__eoc|>"
    assert len(out[0]["videos"]) == 3
