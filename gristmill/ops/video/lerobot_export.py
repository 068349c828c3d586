"""``export_to_lerobot_mapper``: Data-Juicer's export of hand trajectories to a LeRobot v2.0 dataset (LIBERO
style), in two phases as there.

Processing (this op, row-local, any number of workers): each episode is staged under
``<output_dir>/staging/`` as ``data/<uid>.parquet`` (``observation.state``, ``action``, ``timestamp`` =
frame / fps, ``frame_index``, placeholder ``episode_index`` / ``index`` / ``task_index``, ``next.done``),
``videos/<uid><ext>`` and ``meta/<uid>.jsonl`` (length, task, video extension), and listed in
``meta.lerobot_export`` (``uuid``, ``parquet_path``, ``video_path``, ``num_frames``):

- whole-video mode (``segment_field`` unset): per video, the actions in ``meta[hand_action_field]`` (a flat
  ``{states, actions, valid_frame_ids}`` or per hand: the first of right, left with states), the video file
  (or bytes) copied, the task the sample's text (``manipulate object`` when empty); a sample without actions
  is left as it is;
- segment mode: per atomic-action segment in ``meta[segment_field]`` (``video_atomic_action_segment_mapper``),
  the task its caption's ``action`` (``N/A``: skipped; empty: ``<hand> hand action``), missing actions as
  zeros, frame ids relative to the segment's start, and a video encoded from the segment's extracted frames
  (``frame_field``; H.264, ``fps``, crf 23, preset fast); segments are also tagged with ``segment_id`` and
  ``hand_type``.

Episodes with fewer than 2 states are skipped. Data-Juicer names staged episodes by ``uuid4``; here the
name is an MD5 of the row's ``id`` (when it has one), the source and the episode's content, so reruns and
any number of workers stage the same files, and the final episode order (by that name, as Data-Juicer
orders by its uuid) is reproducible.

Finalizing (once, after the run): ``ExportToLeRobotMapper.finalize_dataset(output_dir, fps, robot_type,
chunks_size)``, Data-Juicer's static method: episodes numbered in name order, tasks in first-seen order,
``data/chunk-NNN/episode_XXXXXX.parquet`` rewritten with the indices (``index`` = the episode's frame offset +
``frame_index``), videos moved to ``videos/chunk-NNN/observation.images.image/``, ``meta/episodes.jsonl``,
``tasks.jsonl``, ``modality.json`` and ``info.json`` (features, the first video's size, codec and pixel
format from OpenCV and ffprobe); the staging directory is removed. Per-row Python."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import columns as C
from ...core import trust
from ...media import VIDEO_KEY
from ...registry import register
from .._fields import _MISSING, _json_column, _py_values, _set_field
from ..base import Mapper, Params

log = logging.getLogger(__name__)
DEFAULT_CHUNKS_SIZE = 1000
MODALITY = {
    "state": {k: {"start": i, "end": i + 1} for i, k in enumerate(["x", "y", "z", "roll", "pitch", "yaw", "pad",
                                                                    "gripper"])},
    "action": {k: {"start": i, "end": i + 1} for i, k in enumerate(["x", "y", "z", "roll", "pitch", "yaw",
                                                                     "gripper"])},
    "video": {"primary_image": {"original_key": "observation.images.image"}},
    "annotation": {"human.action.task_description": {"original_key": "task_index"}},
}
EPISODE_SCHEMA = pa.schema([("observation.state", pa.list_(pa.float64())), ("action", pa.list_(pa.float64())),
                            ("timestamp", pa.float64()), ("frame_index", pa.int64()), ("episode_index", pa.int64()),
                            ("index", pa.int64()), ("task_index", pa.int64()), ("next.done", pa.bool_())])


def _atomic_write(path: str, write) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    write(tmp)
    os.replace(tmp, path)


def episode_table(states, actions, fps: int, frame_ids=None) -> pa.Table:
    """The staged parquet's rows: float32 states and actions (as lists of doubles), times from the frame ids
    (0..T-1 without them); the indices are placeholders until ``finalize_dataset``."""
    n = len(states)
    fids = [int(frame_ids[t]) for t in range(n)] if frame_ids else list(range(n))
    return pa.table([pa.array(np.asarray(states, np.float32).tolist(), pa.list_(pa.float64())),
                     pa.array(np.asarray(actions, np.float32).tolist(), pa.list_(pa.float64())),
                     pa.array([float(f) / fps for f in fids], pa.float64()), pa.array(fids, pa.int64()),
                     pa.array([0] * n, pa.int64()), pa.array(list(range(n)), pa.int64()),
                     pa.array([0] * n, pa.int64()), pa.array([t == n - 1 for t in range(n)], pa.bool_())],
                    schema=EPISODE_SCHEMA)


def encode_frames(paths: list[str], out: str, fps) -> str | None:
    """The frame images as an H.264 MP4 (Data-Juicer's ``_encode_frames_to_video``): every readable frame,
    resized to the first one's size; None when the first frame cannot be read or ffmpeg fails."""
    import cv2
    if not paths:
        return None
    first = cv2.imread(trust.check_read(paths[0], "export_to_lerobot_mapper: frame"))
    if first is None:
        return None
    h, w = first.shape[:2]
    chunks = [first.tobytes()]
    for p in paths[1:]:
        img = cv2.imread(trust.check_read(p, "export_to_lerobot_mapper: frame"))
        if img is None:
            continue
        if img.shape[:2] != (h, w):
            img = cv2.resize(img, (w, h))
        chunks.append(img.tobytes())
    tmp = f"{out}.tmp{os.getpid()}.mp4"
    cmd = ["ffmpeg", "-y", "-loglevel", "error", "-f", "rawvideo", "-vcodec", "rawvideo", "-pix_fmt", "bgr24",
           "-s", f"{w}x{h}", "-r", str(fps), "-i", "-", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "fast",
           "-crf", "23", "-movflags", "frag_keyframe+empty_moov", tmp]
    r = subprocess.run(cmd, input=b"".join(chunks), capture_output=True)
    if r.returncode != 0 or not os.path.exists(tmp):
        log.warning("export_to_lerobot_mapper: ffmpeg encode failed (rc=%s): %s", r.returncode,
                    r.stderr.decode(errors="replace")[-300:])
        if os.path.exists(tmp):
            os.unlink(tmp)
        return None
    os.replace(tmp, out)
    return out


def probe_video(video_dir: str) -> dict:
    """Size, channels, codec and pixel format of the first video under ``video_dir`` (sorted walk)."""
    if not os.path.exists(video_dir):
        raise ValueError(f"Video directory {video_dir} does not exist.")
    path = None
    for root, dirs, files in os.walk(video_dir):
        dirs.sort()
        for f in sorted(files):
            if f.endswith((".mp4", ".avi", ".mkv")):
                path = os.path.join(root, f)
                break
        if path:
            break
    if not path:
        raise ValueError("No video files found.")
    info = {"width": 0, "height": 0, "channels": 3, "codec": "av1", "pix_fmt": "yuv420p"}
    try:
        import cv2
        cap = cv2.VideoCapture(path)
        if cap.isOpened():
            info["width"], info["height"] = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
            ok, frame = cap.read()
            if ok and frame is not None:
                info["channels"] = frame.shape[2] if frame.ndim == 3 else 1
            cap.release()
    except Exception:  # noqa: BLE001 - Data-Juicer keeps its defaults
        pass
    try:
        r = subprocess.run(["ffprobe", "-v", "quiet", "-print_format", "json", "-show_streams", "-select_streams",
                            "v:0", path], capture_output=True, text=True, timeout=10)
        streams = json.loads(r.stdout).get("streams") if r.returncode == 0 else None
        if streams:
            info["codec"] = streams[0].get("codec_name", info["codec"])
            pix = info["pix_fmt"] = streams[0].get("pix_fmt", info["pix_fmt"])
            info["channels"] = 1 if "gray" in pix else 4 if "a" in pix and pix not in ("yuv420p", "yuvj420p") else 3
    except Exception:  # noqa: BLE001
        pass
    return info


def _scalar() -> dict:
    return {"dtype": "int64", "shape": [1], "names": None}


def finalize_dataset(output_dir: str, fps: int = 10, robot_type: str = "egodex_hand",
                     chunks_size: int = DEFAULT_CHUNKS_SIZE) -> None:
    """Turn ``<output_dir>/staging`` into the LeRobot dataset (see the module docstring). Run once, after every
    worker has finished."""
    import pyarrow.parquet as pq
    trust.check_write(output_dir, "export_to_lerobot_mapper.output_dir")
    staging = os.path.join(output_dir, "staging")
    s_data, s_video, s_meta = (os.path.join(staging, d) for d in ("data", "videos", "meta"))
    meta_dir = os.path.join(output_dir, "meta")
    os.makedirs(meta_dir, exist_ok=True)
    with open(os.path.join(meta_dir, "modality.json"), "w", encoding="utf-8") as f:
        json.dump(MODALITY, f, indent=4)
    episodes = []
    if os.path.exists(s_meta):
        for name in sorted(os.listdir(s_meta)):
            if name.endswith(".jsonl"):
                with open(os.path.join(s_meta, name), encoding="utf-8") as f:
                    episodes += [json.loads(line) for line in f if line.strip()]
    if not episodes:
        log.warning("export_to_lerobot_mapper: no staged episodes found; nothing to finalize")
        return
    episodes.sort(key=lambda e: e["uuid"])
    tasks: dict[str, int] = {}
    offset = 0
    for i, ep in enumerate(episodes):
        ep["episode_index"], ep["global_frame_offset"] = i, offset
        offset += ep["length"]
        ep["task_index"] = tasks.setdefault(ep["task"], len(tasks))
    total_chunks = max(1, (len(episodes) + chunks_size - 1) // chunks_size)
    for c in range(total_chunks):
        os.makedirs(os.path.join(output_dir, "data", f"chunk-{c:03d}"), exist_ok=True)
        os.makedirs(os.path.join(output_dir, "videos", f"chunk-{c:03d}", "observation.images.image"), exist_ok=True)
    videos = 0
    for ep in episodes:
        i, chunk = ep["episode_index"], f"chunk-{ep['episode_index'] // chunks_size:03d}"
        src = os.path.join(s_data, f"{ep['uuid']}.parquet")
        if os.path.exists(src):
            t = pq.read_table(src)
            n = t.num_rows
            fidx = t.column("frame_index").to_numpy()
            t = t.set_column(t.schema.get_field_index("episode_index"), "episode_index", pa.array([i] * n, pa.int64()))
            t = t.set_column(t.schema.get_field_index("task_index"), "task_index",
                             pa.array([ep["task_index"]] * n, pa.int64()))
            t = t.set_column(t.schema.get_field_index("index"), "index",
                             pa.array(ep["global_frame_offset"] + fidx, pa.int64()))
            dst = os.path.join(output_dir, "data", chunk, f"episode_{i:06d}.parquet")
            _atomic_write(dst, lambda p, t=t: pq.write_table(t, p))
        ext = ep.get("video_ext", ".mp4")
        src = os.path.join(s_video, f"{ep['uuid']}{ext}")
        if os.path.exists(src):
            shutil.move(src, os.path.join(output_dir, "videos", chunk, "observation.images.image",
                                          f"episode_{i:06d}{ext}"))
            videos += 1
    with open(os.path.join(meta_dir, "episodes.jsonl"), "w", encoding="utf-8") as f:
        for ep in episodes:
            f.write(json.dumps({"episode_index": ep["episode_index"], "length": ep["length"], "task": ep["task"]},
                               ensure_ascii=False) + "\n")
    with open(os.path.join(meta_dir, "tasks.jsonl"), "w", encoding="utf-8") as f:
        for task, idx in tasks.items():
            f.write(json.dumps({"task_index": idx, "task": task}, ensure_ascii=False) + "\n")
    v = probe_video(os.path.join(output_dir, "videos"))
    features = {
        "observation.state": {"dtype": "float32", "shape": [8]},
        "action": {"dtype": "float32", "shape": [7]},
        "observation.images.image": {
            "dtype": "video", "shape": [v["height"], v["width"], v["channels"]], "names": ["height", "width", "channels"],
            "info": {"video.height": v["height"], "video.width": v["width"], "video.channels": v["channels"],
                     "video.codec": v["codec"], "video.pix_fmt": v["pix_fmt"], "video.is_depth_map": False,
                     "video.fps": fps, "has_audio": False}},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        **{k: _scalar() for k in ("frame_index", "episode_index", "index", "task_index")},
    }
    info = {"codebase_version": "v2.0", "robot_type": robot_type, "total_episodes": len(episodes),
            "total_frames": offset, "total_tasks": len(tasks), "total_videos": videos, "total_chunks": total_chunks,
            "chunks_size": chunks_size, "fps": fps, "splits": {"train": f"0:{len(episodes)}"},
            "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
            "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
            "features": features}
    with open(os.path.join(meta_dir, "info.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2, ensure_ascii=False)
    shutil.rmtree(staging, ignore_errors=True)
    log.info("LeRobot dataset finalized: %d episodes, %d frames, %d tasks, %d chunks", len(episodes), offset,
             len(tasks), total_chunks)


@register("export_to_lerobot_mapper")
class ExportToLeRobotMapper(Mapper):
    """Stage each sample's hand trajectories (per video, or per atomic-action segment) as LeRobot v2.0 episodes
    under ``output_dir``; ``ExportToLeRobotMapper.finalize_dataset(output_dir)`` then builds the dataset."""

    requires = ("cv2",)
    inputs = ("{video_key}?", "{frame_field}?")
    outputs = ("meta.lerobot_export",)

    class Params(Params):
        output_dir: str = trust.path_param("write", "./lerobot_output", description="Root of the LeRobot dataset "
                                           "(episodes are staged under staging/ until finalize_dataset).")
        hand_action_field: str = Field("hand_action_tags", description="Meta field with the actions and states "
                                       "(whole-video mode).")
        fps: int = Field(10, description="Frames per second of the dataset.")
        robot_type: str = Field("egodex_hand", description="robot_type of info.json (finalize_dataset's argument).")
        chunks_size: PositiveInt = Field(DEFAULT_CHUNKS_SIZE, description="Episodes per chunk directory "
                                         "(finalize_dataset's argument).")
        segment_field: str | None = Field(None, description="Meta field with atomic-action segments: one episode "
                                          "per segment, its caption the task; unset: one episode per video.")
        frame_field: str = Field("video_frames", description="Field with the extracted frames' paths (segment "
                                 "videos).")
        video_key: str = Field(VIDEO_KEY, description="Field holding each sample's list of videos (paths or bytes).")

    finalize_dataset = staticmethod(finalize_dataset)

    def __init__(self, **params):
        super().__init__(**params)
        if self.params.segment_field and shutil.which("ffmpeg") is None:  # segment videos are encoded from frames
            raise ValueError(f"{self.name} with segment_field runs the ffmpeg program, which is not on PATH: "
                             "install it (apt-get install ffmpeg, brew install ffmpeg, or conda install -c "
                             "conda-forge ffmpeg)")

    def _dirs(self):
        root = os.path.join(os.path.abspath(self.params.output_dir), "staging")
        dirs = tuple(os.path.join(root, d) for d in ("data", "videos", "meta"))
        for d in dirs + (os.path.join(os.path.abspath(self.params.output_dir), "meta"),):
            os.makedirs(trust.check_write(d, f"{self.name}.output_dir"), exist_ok=True)
        return dirs

    @staticmethod
    def uid(*parts) -> str:
        h = hashlib.md5()
        for p in parts:
            h.update(bytes(p) if isinstance(p, (bytes, bytearray, memoryview)) else
                     json.dumps(p, sort_keys=True, default=str).encode())
            h.update(b"\0")
        return h.hexdigest()

    def stage(self, uid: str, states, actions, fids, task: str, video: str | None) -> tuple[str, int]:
        import pyarrow.parquet as pq
        data, _, meta = self._dirs()
        path = os.path.join(data, f"{uid}.parquet")
        table = episode_table(states, actions, self.params.fps, fids)
        _atomic_write(path, lambda p: pq.write_table(table, p))
        ext = (os.path.splitext(video)[1] or ".mp4") if video and isinstance(video, str) else ".mp4"
        entry = {"uuid": uid, "length": len(states), "task": task, "video_ext": ext}

        def write(p):
            with open(p, "w", encoding="utf-8") as f:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        _atomic_write(os.path.join(meta, f"{uid}.jsonl"), write)
        return path, len(states)

    def stage_video(self, source, uid: str) -> str:
        _, videos, _ = self._dirs()
        if isinstance(source, (bytes, bytearray, memoryview)):
            dst = os.path.join(videos, f"{uid}.mp4")
            if not os.path.exists(dst):
                _atomic_write(dst, lambda p: open(p, "wb").write(bytes(source)))
        else:
            dst = os.path.join(videos, f"{uid}{os.path.splitext(source)[1] or '.mp4'}")
            if not os.path.exists(dst):
                src = trust.check_read(source, f"{self.name}: video")
                _atomic_write(dst, lambda p: shutil.copy2(src, p))
        return dst

    def whole_video(self, row: dict, meta: dict):
        actions_list = meta.get(self.params.hand_action_field) or []
        if not actions_list:
            log.warning("export_to_lerobot_mapper: no hand action data found, skipping export")
            return _MISSING
        task = row["text"] or "manipulate object"
        videos = row["videos"] or []
        out = []
        for vi, per_video in enumerate(actions_list):
            if "states" in per_video:
                data = per_video
            else:
                data = next((per_video.get(h) for h in ("right", "left") if (per_video.get(h) or {}).get("states")), {})
            states, actions = data.get("states", []), data.get("actions", [])
            if len(states) < 2:
                continue
            source = videos[vi] if vi < len(videos) else None
            uid = self.uid(row["id"], source if isinstance(source, str) or source is None
                           else hashlib.md5(bytes(source)).hexdigest(), vi, states, actions, task)
            video = self.stage_video(source, uid) if source is not None else None
            path, n = self.stage(uid, states, actions, data.get("valid_frame_ids"), task, video)
            out.append({"uuid": uid, "parquet_path": path, "video_path": video, "num_frames": n})
        return out

    def segments(self, row: dict, meta: dict):
        p = self.params
        segs = meta.get(p.segment_field) or []
        if not segs:
            log.warning("export_to_lerobot_mapper: no segments found, skipping export")
            return []
        frames = row["frames"] or meta.get(p.frame_field) or []
        if isinstance(frames, list) and frames and isinstance(frames[0], list):
            frames = frames[0]
        out = []
        for si, seg in enumerate(segs):
            states, actions = seg.get("states", []), seg.get("actions", [])
            if len(states) < 2:
                continue
            if not actions or len(actions) < len(states):
                actions = [[0.0] * 7] * len(states)
            cap = seg.get("caption", {})
            task = cap.get("action", "") if isinstance(cap, dict) else (str(cap) if cap else "")
            if task == "N/A":
                continue
            task = task or f"{seg.get('hand_type', 'hand')} hand action"
            start = seg.get("start_frame", 0)
            end = seg.get("end_frame", len(frames) - 1)
            fids = [f - start for f in seg.get("valid_frame_ids", list(range(start, end + 1)))]
            uid = self.uid(row["id"], row["videos"], si, seg.get("segment_id", -1), states, actions, task)
            video = None
            picks = [frames[f] for f in range(start, min(end + 1, len(frames))) if frames[f]]
            if picks:
                video = encode_frames(picks, os.path.join(self._dirs()[1], f"{uid}.mp4"), p.fps)
            path, n = self.stage(uid, states, actions, fids, task, video)
            out.append({"uuid": uid, "parquet_path": path, "video_path": video, "num_frames": n,
                        "segment_id": seg.get("segment_id", -1), "hand_type": seg.get("hand_type", "unknown")})
        return out

    def process_batch(self, batch):
        p = self.params
        val = lambda key: [None if v is _MISSING else v for v in _py_values(batch, key)]  # noqa: E731
        texts = val(self.text_key)
        ids = val(C.ID)
        metas = val(C.META)
        rows = [{"text": t or "", "id": i, "videos": v, "frames": f}
                for t, i, v, f in zip(texts, ids, val(p.video_key), val(p.frame_field))]
        results = []
        for row, meta in zip(rows, metas):
            if not isinstance(meta, dict):
                results.append(_MISSING)
                continue
            results.append(self.segments(row, meta) if p.segment_field else self.whole_video(row, meta))
        if all(r is _MISSING for r in results):
            return batch
        new = [dict(m, lerobot_export=r) if r is not _MISSING else m for m, r in zip(metas, results)]
        return _set_field(batch, *_json_column(C.META, new))
