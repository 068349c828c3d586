"""A service job on a Ray cluster that was started without the job's trust policy (a cluster of its own, as
`ray start` makes): the driver hands the policy to every Ray worker (runtime_env), so a row naming a file
outside the data roots is a reject there too, not a read."""
import json
import os
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.ray


def test_ray_workers_run_under_the_drivers_trust_policy(cluster, tmp_path):
    from PIL import Image

    from gristmill.core import trust
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    Image.new("RGB", (40, 30), "red").save(root / "in.png")
    Image.new("RGB", (40, 30), "blue").save(outside / "out.png")
    (root / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "a", "text": "inside", "images": [str(root / "in.png")]},
        {"id": "b", "text": "outside", "images": [str(outside / "out.png")]}]))
    recipe = {"dataset_path": str(root / "rows.jsonl"), "export_path": str(root / "out.jsonl"),
              "work_dir": str(root / "work"), "executor_type": "ray", "ray_address": cluster.address, "np": 2,
              "max_reject_ratio": 1.0, "process": [{"image_shape_filter": {"min_width": 10}}]}
    (root / "r.yaml").write_text(yaml.safe_dump(recipe))
    env = dict(os.environ, **{trust.ENV: trust.to_env(trust.service_policy([root]))})
    env.pop("RAY_ADDRESS", None)
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(root / "r.yaml"), "--no-progress"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((root / "work" / "report.json").read_text())
    assert report["rows_out"] == 1 and report["rejects"] == 1, report
    assert [r["error_type"] for r in report["reject_reasons"]] == ["Refused"], report["reject_reasons"]
    assert [json.loads(x)["id"] for x in (root / "out.jsonl").read_text().splitlines()] == ["a"]
