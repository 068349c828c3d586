"""s3_upload_file_mapper and s3_download_file_mapper side by side with Data-Juicer 1.6.1 on one S3 endpoint
(moto's server on 127.0.0.1, started here): the same rows (local files of real photos, a list per row, a
missing file, an s3:// value, an http URL), each side into its own prefix / save_dir; compared: the rewritten
fields (prefix and directory normalised), the bytes, the objects in the bucket; and the seconds of each side.

    python bench/dj_s3_ops.py [--files 200]

Data-Juicer runs in its venv (``PEERS_DIR``, default /tmp/peers; boto3 added to it) through its ops'
``process_batched``; gristmill through ``op.apply``."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DJ_PY = Path(os.environ.get("PEERS_DIR", "/tmp/peers")) / "dj" / "bin" / "python"
MEDIA = REPO / "tests" / "data" / "media"

DJ_RUNNER = r"""
import json, sys, time
from loguru import logger
logger.remove()
from data_juicer.ops.mapper.s3_upload_file_mapper import S3UploadFileMapper
from data_juicer.ops.mapper.s3_download_file_mapper import S3DownloadFileMapper
rows, bucket, save_dir = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
ep = __import__("os").environ["AWS_ENDPOINT_URL"]
t = time.perf_counter()
up = S3UploadFileMapper(upload_field="f", s3_bucket=bucket, s3_prefix="dj", endpoint_url=ep)
out = up.process_batched({"f": [r["f"] for r in rows]})
t_up = time.perf_counter() - t
t = time.perf_counter()
down = S3DownloadFileMapper(download_field="f", save_dir=save_dir, save_field="b", endpoint_url=ep)
back = down.process_batched({"f": out["f"]})
t_down = time.perf_counter() - t
print(json.dumps({"up": out["f"], "down": back["f"], "bytes": [[None if x is None else x.hex() for x in v]
                  if isinstance(v, list) else (None if v is None else v.hex()) for v in back["b"]],
                  "seconds": [t_up, t_down]}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=60, help="local files uploaded and downloaded by each side")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from moto.server import ThreadedMotoServer
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    os.environ.update(env)
    import s3fs
    s3 = s3fs.S3FileSystem(endpoint_url=env["AWS_ENDPOINT_URL"])
    s3.mkdir("bench")
    photos = sorted(p for p in MEDIA.iterdir() if p.suffix.lower() in (".jpg", ".png"))
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            src = tmp / "src"
            src.mkdir()
            names = []
            for i in range(args.files):
                p = photos[i % len(photos)]
                dst = src / f"{i:04d}{p.suffix}"
                shutil.copy(p, dst)
                names.append(str(dst))
            rows = [{"f": names[i:i + 3]} for i in range(0, len(names), 3)]
            rows += [{"f": [str(src / "missing.jpg"), "s3://bench/elsewhere/x.jpg"]}, {"f": "https://example.com/a.jpg"}]
            r = subprocess.run([str(DJ_PY), "-c", DJ_RUNNER, json.dumps(rows), "bench", str(tmp / "dj-dl")],
                               capture_output=True, text=True, env=dict(os.environ, **env))
            if r.returncode:
                sys.exit(r.stderr[-3000:])
            dj = json.loads(r.stdout.strip().splitlines()[-1])
            from gristmill.registry import create_op
            t = time.perf_counter()
            up = create_op("s3_upload_file_mapper", {"upload_field": "f", "s3_bucket": "bench", "s3_prefix": "gm"})
            from gristmill.core import columns as C
            out = C.to_pylist(up.apply(C.from_records(rows)))  # as the readers hold a field of mixed shapes
            t_up = time.perf_counter() - t
            t = time.perf_counter()
            down = create_op("s3_download_file_mapper", {"download_field": "f", "save_dir": str(tmp / "gm-dl"),
                                                         "save_field": "b"})
            back = C.to_pylist(down.apply(C.from_records(out)))
            t_down = time.perf_counter() - t
            norm = lambda v, a, b: json.loads(json.dumps(v).replace(a, b))  # noqa: E731
            same_up = norm([o["f"] for o in out], "s3://bench/gm/", "s3://bench/dj/") == dj["up"]
            same_down = norm([o["f"] for o in back], str(tmp / "gm-dl"), str(tmp / "dj-dl")) == dj["down"]
            ours_bytes = [[None if x is None else x.hex() for x in o["b"]] if isinstance(o["b"], list)
                          else (None if o["b"] is None else o["b"].hex()) for o in back]
            # a field of mixed shapes: gristmill's bytes are all lists (JSON holds no bytes)
            want_bytes = [[v] if isinstance(v, str) and any(isinstance(x, list) for x in dj["bytes"]) else v
                          for v in dj["bytes"]]
            keys = lambda pre: sorted(k.rsplit("/", 1)[1] for k in s3.find(f"bench/{pre}"))  # noqa: E731
            print(f"{len(rows)} rows, {args.files} files + 3 odd values")
            print(f"upload fields equal: {same_up}; objects equal: {keys('gm') == keys('dj')} ({len(keys('gm'))})")
            print(f"download fields equal: {same_down}; bytes equal: {ours_bytes == want_bytes}")
            print(f"seconds upload / download: gristmill {t_up:.2f} / {t_down:.2f}, "
                  f"Data-Juicer {dj['seconds'][0]:.2f} / {dj['seconds'][1]:.2f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
