"""export_to_lerobot_mapper: staged episodes (whole-video and segment modes) and finalize_dataset's LeRobot
v2.0 layout. bench/dj_video_rule_ops2.py --only lerobot compares the datasets with Data-Juicer 1.6.1's."""
import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from gristmill.core import columns as C
from gristmill.registry import create_op


def hand(n, start=0, kind="right"):
    st = np.arange(n * 8, dtype=float).reshape(n, 8) / 10
    return {"hand_type": kind, "states": st.tolist(), "actions": (st[:, :7] + 1).tolist(),
            "valid_frame_ids": list(range(start, start + 2 * n, 2))}


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    import av
    path = str(tmp_path_factory.mktemp("v") / "clip.mp4")
    with av.open(path, "w") as c:
        s = c.add_stream("mpeg4", rate=10)
        s.width, s.height, s.pix_fmt = 32, 24, "yuv420p"
        for i in range(4):
            for p in s.encode(av.VideoFrame.from_ndarray(np.full((24, 32, 3), 40 * i, np.uint8), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def test_whole_video_episodes(video, tmp_path):
    out_dir = tmp_path / "ds"
    op = create_op("export_to_lerobot_mapper", {"output_dir": str(out_dir), "fps": 5, "chunks_size": 1})
    rows = [{"id": "a", "text": "stack the cups", "videos": [video, video],
             "__meta__": {"hand_action_tags": [{"left": hand(3, kind="left"), "right": hand(4)},
                                               {"states": hand(1)["states"], "actions": []}]}},
            {"id": "b", "text": "", "videos": [video], "__meta__": {"hand_action_tags": [{"left": hand(2)}]}},
            {"id": "c", "text": "none", "videos": [video], "__meta__": {}}]
    out = C.to_pylist(op.apply(C.from_records(rows)))
    assert out == C.to_pylist(op.apply(C.from_records(rows)))  # names from the content: reruns stage the same
    ex = [(r["__meta__"] or {}).get("lerobot_export") for r in out]
    assert [len(e) for e in ex[:2]] == [1, 1] and ex[2] is None  # a 1-state hand is skipped; no actions: as is
    assert ex[0][0]["num_frames"] == 4 and ex[0][0]["video_path"].endswith(ex[0][0]["uuid"] + ".mp4")
    staged = pq.read_table(ex[0][0]["parquet_path"]).to_pydict()
    assert staged["frame_index"] == [0, 2, 4, 6] and staged["timestamp"] == [0.0, 0.4, 0.8, 1.2]
    assert staged["next.done"] == [False, False, False, True]
    assert staged["action"][0] == np.float32([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6]).tolist()  # float32, as there
    op.finalize_dataset(str(out_dir), 5, "egodex_hand", 1)
    assert not (out_dir / "staging").exists()
    eps = [json.loads(x) for x in (out_dir / "meta" / "episodes.jsonl").read_text().splitlines()]
    order = sorted([ex[0][0]["uuid"], ex[1][0]["uuid"]])  # episodes numbered in name order
    tasks = {ex[0][0]["uuid"]: "stack the cups", ex[1][0]["uuid"]: "manipulate object"}
    assert eps == [{"episode_index": i, "length": {ex[0][0]["uuid"]: 4, ex[1][0]["uuid"]: 2}[u], "task": tasks[u]}
                   for i, u in enumerate(order)]
    second = pq.read_table(out_dir / "data" / "chunk-001" / "episode_000001.parquet").to_pydict()
    assert second["episode_index"] == [1] * eps[1]["length"]
    assert second["index"] == [eps[0]["length"] + f for f in second["frame_index"]]
    assert (out_dir / "videos" / "chunk-001" / "observation.images.image" / "episode_000001.mp4").exists()
    info = json.loads((out_dir / "meta" / "info.json").read_text())
    assert (info["total_episodes"], info["total_frames"], info["total_chunks"], info["total_videos"]) == (2, 6, 2, 2)
    assert info["features"]["observation.images.image"]["shape"] == [24, 32, 3]
    assert info["features"]["observation.images.image"]["info"]["video.codec"] == "mpeg4"
    assert json.loads((out_dir / "meta" / "modality.json").read_text())["action"]["gripper"] == {"start": 6, "end": 7}


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="segment videos are encoded with ffmpeg")
def test_segment_episodes(tmp_path):
    import cv2
    frames = []
    for i in range(12):
        frames.append(str(tmp_path / f"f{i}.png"))
        cv2.imwrite(frames[-1], np.full((24, 32, 3), 20 * i, np.uint8))

    def seg(sid, start, end, caption, **kw):
        h = hand(end - start + 1, start)
        h.update(segment_id=sid, start_frame=start, end_frame=end, caption=caption, **kw)
        return h
    segs = [seg(0, 0, 4, {"action": "pick"}), seg(1, 3, 8, "open", actions=[]), seg(2, 9, 11, {"action": "N/A"}),
            seg(3, 9, 11, {"action": ""}, hand_type="left"), seg(4, 11, 11, "one state")]
    op = create_op("export_to_lerobot_mapper", {"output_dir": str(tmp_path / "ds"),
                                                "segment_field": "atomic_action_segments"})
    out = op.apply([{"text": "", "video_frames": [frames], "__meta__": {"atomic_action_segments": segs}}])
    ex = out[0]["__meta__"]["lerobot_export"]
    assert [(e["segment_id"], e["hand_type"], e["num_frames"]) for e in ex] == [(0, "right", 5), (1, "right", 6),
                                                                              (3, "left", 3)]
    t = pq.read_table(ex[1]["parquet_path"]).to_pydict()
    assert t["frame_index"] == [0, 2, 4, 6, 8, 10] and t["action"] == [[0.0] * 7] * 6  # relative ids, zero actions
    with __import__("av").open(ex[0]["video_path"]) as c:
        assert c.streams.video[0].codec_context.name == "h264" and c.streams.video[0].frames in (0, 5)
    op.finalize_dataset(str(tmp_path / "ds"))
    tasks = sorted(json.loads(x)["task"] for x in (tmp_path / "ds" / "meta" / "tasks.jsonl").read_text().splitlines())
    assert tasks == ["left hand action", "open", "pick"]
