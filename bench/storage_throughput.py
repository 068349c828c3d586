"""Read and write throughput of gristmill's filesystem layer: a local S3 server (moto's ThreadedMotoServer on
127.0.0.1) against local disk, in the same run; a one-file export composed in the bucket from fragments
(engine.remote_parts.compose) against the same concatenation on local disk; a one-file Parquet export composed
from Parquet parts against the driver re-encoding it; plus one `gristmill run` with every
path on S3 against the same run on local disk (its bytes compared).

    python bench/storage_throughput.py [--mb 256] [--rows-mb 64]

Writes go through ``gristmill.fs.upload`` (s3fs multipart, 16 MB parts, in parallel) and through an fsspec
file (what a streaming writer would do); reads through ``gristmill.fs.open_input`` (16 MB read-ahead blocks,
sequential), the path every reader takes. Local disk: the same sizes with ``open`` + fsync for writes,
after dropping the file from the page cache (posix_fadvise DONTNEED) for reads, so both sides read real bytes.
moto keeps objects in memory in this process: the S3 figures measure the protocol (HTTP, signing, multipart,
ranges) and not a disk, so they are an upper bound for a real endpoint on the same machine.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes / 1e6 / max(seconds, 1e-9)


def drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def compose_figures(fs, s3, data: bytes, tmp: str) -> None:
    """A one-file export from per-shard fragments, three ways, same bytes: concatenated on local disk (what
    the driver does with a POSIX work dir: copy_file_range into one file, fsync); composed in the bucket
    (engine.remote_parts.compose: one multipart upload, UploadPartCopy of fragments of 5 MiB or more, small
    ones streamed through the composer); and the way a driver without composition would do it (download
    every fragment, concatenate, upload)."""
    from gristmill.engine.remote_parts import compose
    from gristmill.io.writers import _append
    n = len(data)
    print(f"one-file export of {n / 1e6:,.0f} MB from fragments (bytes checked equal each time):")
    for count in (16, 256):
        step = n // count
        frags = [data[i * step:(i + 1) * step if i < count - 1 else n] for i in range(count)]
        local = []
        for i, b in enumerate(frags):
            p = os.path.join(tmp, f"frag-{count}-{i:04d}")
            with open(p, "wb") as f:
                f.write(b)
            local.append(p)
            s3.pipe(f"gm-bench/frags-{count}/f-{i:04d}", b)
        for p in local:
            drop_cache(p)
        out = os.path.join(tmp, f"export-{count}.bin")
        t = time.perf_counter()
        with open(out, "wb") as f:
            for p in local:
                _append(p, f)
            f.flush()
            os.fsync(f.fileno())
        t_local = time.perf_counter() - t
        urls = [f"s3://gm-bench/frags-{count}/f-{i:04d}" for i in range(count)]
        t = time.perf_counter()
        got = compose(urls, f"s3://gm-bench/export-{count}.bin")
        t_comp = time.perf_counter() - t
        t = time.perf_counter()
        via = os.path.join(tmp, f"via-{count}.bin")
        with open(via, "wb") as f:
            for u in urls:
                with fs.open_input(u) as src:
                    while b := src.read(16 << 20):
                        f.write(b)
        fs.upload(via, f"s3://gm-bench/via-{count}.bin")
        t_via = time.perf_counter() - t
        same = (s3.cat_file(f"gm-bench/export-{count}.bin") == data == open(out, "rb").read()
                == s3.cat_file(f"gm-bench/via-{count}.bin"))
        mb = step / 2**20
        print(f"  {count} fragments of {mb:.1f} MiB: local disk concat {mbps(n, t_local):7,.0f} MB/s | composed in "
              f"S3 {mbps(n, t_comp):7,.0f} MB/s ({mbps(n, t_comp) / mbps(n, t_local):4.2f}x local; "
              f"{got['copied'] / 1e6:,.0f} MB copied server-side, {got['streamed'] / 1e6:,.0f} MB streamed) | "
              f"through the driver {mbps(n, t_via):7,.0f} MB/s; same bytes: {same}")
        for p in local + [out, via]:
            os.unlink(p)


def parquet_compose_figures(fs, s3, tmp: str, mb: int) -> None:
    """A one-file Parquet export from per-shard Parquet parts (what the workers write on Ray with an s3://
    work dir): composed in the bucket (``PAR1`` + the parts' row-group byte ranges by UploadPartCopy + one
    merged footer, engine.remote_parts) against the driver re-encoding the same batches into one file on
    local disk (io.writers.assemble's writer), bytes compared."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from gristmill.engine.remote_parts import compose, read_parquet_footer
    from gristmill.io import parquet_footer as pf
    from gristmill.io.writers import _ParquetPiece
    rng = np.random.default_rng(0)
    count, rows = 16, max(1, (mb << 20) // 16 // 600)
    batches = []
    for i in range(count):
        words = rng.integers(0, 50_000, size=(rows, 100)).astype(str)
        batches.append(pa.record_batch({"id": pa.array(np.arange(i * rows, (i + 1) * rows)),
                                        "text": pa.array([" ".join(w) for w in words])}))
    schema = batches[0].schema
    urls = []
    for i, b in enumerate(batches):
        p = os.path.join(tmp, f"pq-part-{i}.parquet")
        w = _ParquetPiece(p, schema)
        w.write(b)
        w.close()
        fs.upload(p, f"s3://gm-bench/pq/part-{i:03d}.parquet")
        urls.append(f"s3://gm-bench/pq/part-{i:03d}.parquet")
    t = time.perf_counter()
    out = os.path.join(tmp, "pq-local.parquet")
    w = _ParquetPiece(out, schema)
    for b in batches:
        w.write(b)
    w.close()
    with open(out, "rb") as f:
        os.fsync(f.fileno())
    t_local = time.perf_counter() - t
    n = os.path.getsize(out)
    t = time.perf_counter()
    footers = [read_parquet_footer(u) for u in urls]
    ranges, footer = pf.compose_plan(footers)
    s3.pipe("gm-bench/pq/footer.bin", footer)
    got = compose([(urls[0], 0, 4)] + [(urls[i], a, b) for i, a, b in ranges] + ["s3://gm-bench/pq/footer.bin"],
                  "s3://gm-bench/pq/export.parquet")
    t_comp = time.perf_counter() - t
    same = s3.cat_file("gm-bench/pq/export.parquet") == open(out, "rb").read()
    print(f"one-file Parquet export of {n / 1e6:,.0f} MB ({count} parts of {rows:,} rows, zstd): driver re-encoding "
          f"on local disk {mbps(n, t_local):7,.0f} MB/s | composed in S3 {mbps(n, t_comp):7,.0f} MB/s "
          f"({mbps(n, t_comp) / mbps(n, t_local):4.2f}x local; {got['copied'] / 1e6:,.0f} MB copied server-side, "
          f"{got['streamed'] / 1e6:,.2f} MB streamed, footer {len(footer):,} B); same bytes: {same}")


def compressed_shards_figures(fs, tmp: str, mb: int) -> None:
    """A compressed sharded JSONL export (.gz, export_shard_size) from 16 compressed fragments in the bucket,
    two ways, bytes compared: the driver downloading every fragment, recompressing the shards
    (io.writers.assemble) and uploading them (what a Ray run did before), against the workers' path
    (engine.remote_parts.export_jsonl_compressed: line indexes, cuts planned in the driver, files compressed by
    the tasks, parts copied into place). Here the tasks run one after another in this process (no Ray), so
    the figure to compare is the driver's share: its bytes and its own time; the tasks' CPU time is what a
    cluster spreads over its workers."""
    import random
    from gristmill.engine import remote_parts as rp
    from gristmill.io import writers as W
    r = random.Random(0)
    words = [bytes(r.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 9))) for _ in range(5000)]
    count, shard = 16, (mb << 20) // 7
    local, raw, n = [], 0, 0
    for i in range(count):
        p = os.path.join(tmp, f"cs-frag-{i:02d}.jsonl.gz")
        f, fh = W._open_compressed(p, ".gz")
        while raw < (mb << 20) * (i + 1) // count:
            line = b'{"id": %d, "text": "%s"}\n' % (n, b" ".join(r.choices(words, k=r.randint(20, 400))))
            f.write(line)
            raw, n = raw + len(line), n + 1
        W._close_compressed(f, fh)
        fs.upload(p, f"s3://gm-bench/csw/stages/01/out/{os.path.basename(p)}")
        local.append(p)
    comp_bytes = sum(os.path.getsize(p) for p in local)
    # before: download, recompress here, upload
    t, c = time.perf_counter(), time.process_time()
    dl = os.path.join(tmp, "cs-dl")
    os.makedirs(dl)
    got = []
    for p in local:
        fs.download(f"s3://gm-bench/csw/stages/01/out/{os.path.basename(p)}", os.path.join(dl, os.path.basename(p)))
        got.append(os.path.join(dl, os.path.basename(p)))
    files = W.assemble([got], os.path.join(tmp, "cs-out", "c.jsonl.gz"), shard)
    for f in files:
        fs.upload(f, f"s3://gm-bench/cs-old/{os.path.basename(f)}")
    t_old, c_old = time.perf_counter() - t, time.process_time() - c
    driver_old = comp_bytes + sum(os.path.getsize(f) for f in files)
    # now: the workers' path, the tasks run here through RemoteTask (timed apart from the driver's share)
    work = rp.RemoteWork(os.path.join(tmp, "cs-staging"), "s3://gm-bench/csw")
    task_cpu = [0.0]

    def here(w, tasks):
        out = []
        for task in tasks:
            c0 = time.process_time()
            out.append(w.landed(w.wrap(task).run()))
            task_cpu[0] += time.process_time() - c0
        return out
    logs = []
    real, rp.run_on_workers = rp.run_on_workers, here
    try:
        t, c = time.perf_counter(), time.process_time()
        names = rp.export_jsonl_compressed(work, [[os.path.join(work.local, "stages/01/out", os.path.basename(p))]
                                                  for p in local], "s3://gm-bench/cs-new/c.jsonl.gz", shard, ".gz",
                                           logs.append)
        t_new, c_new = time.perf_counter() - t, time.process_time() - c
    finally:
        rp.run_on_workers = real
    index_read = int(next(x for x in logs if "bytes of line index" in x).split("read ")[1].split(" bytes")[0]
                     .replace(",", ""))
    same = [fs.read_bytes(u) for u in names] == [open(f, "rb").read() for f in files]
    print(f"compressed sharded export (.gz) of {raw / 1e6:,.0f} MB of JSONL ({comp_bytes / 1e6:,.0f} MB in {count} "
          f"fragments, {len(files)} files): same bytes: {same}")
    print(f"  before (driver downloads, recompresses, uploads): {t_old:6.1f} s wall, {c_old:6.1f} s driver CPU, "
          f"{driver_old / 1e6:,.0f} MB through the driver")
    print(f"  now (workers index + compress, parts copied in S3): driver {max(c_new - task_cpu[0], 0):6.2f} s CPU, "
          f"{index_read / 1e6:,.3f} MB of line index read, 0 rows; tasks {task_cpu[0]:6.1f} s CPU in all "
          f"(spread over the workers); {t_new:6.1f} s wall here with the tasks in series")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256, help="size of the throughput file")
    ap.add_argument("--rows-mb", type=int, default=32, help="JSONL input of the end-to-end run")
    args = ap.parse_args()
    from moto.server import ThreadedMotoServer
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    tmp = tempfile.mkdtemp(prefix="gm-storage-bench-")
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=f"http://{host}:{port}", GRISTMILL_STAGING=os.path.join(tmp, "staging"))
    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from gristmill import fs
    s3, _ = fs.filesystem("s3://gm-bench")
    s3.mkdir("gm-bench")
    try:
        n = args.mb << 20
        data = os.urandom(1 << 20) * args.mb  # incompressible enough; nothing here compresses
        src = os.path.join(tmp, "blob.bin")
        rows = []
        # local disk
        t = time.perf_counter()
        with open(src, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        rows.append(("write", "local disk (open + fsync)", mbps(n, time.perf_counter() - t)))
        drop_cache(src)
        t = time.perf_counter()
        with fs.open_input(src) as f:
            while f.read(16 << 20):
                pass
        rows.append(("read", "local disk (page cache dropped)", mbps(n, time.perf_counter() - t)))
        # S3 on 127.0.0.1
        t = time.perf_counter()
        fs.upload(src, "s3://gm-bench/blob.bin")
        rows.append(("write", "S3 upload (multipart, parallel parts)", mbps(n, time.perf_counter() - t)))
        t = time.perf_counter()
        with s3.open("gm-bench/blob2.bin", "wb", block_size=fs.WRITE_BLOCK) as f:
            for i in range(0, n, 4 << 20):
                f.write(data[i:i + (4 << 20)])
        rows.append(("write", "S3 streaming file (16 MB parts)", mbps(n, time.perf_counter() - t)))
        t = time.perf_counter()
        got = 0
        with fs.open_input("s3://gm-bench/blob.bin") as f:
            while b := f.read(16 << 20):
                got += len(b)
        assert got == n
        rows.append(("read", "S3 sequential (16 MB read-ahead)", mbps(n, time.perf_counter() - t)))
        t = time.perf_counter()
        with s3.open("gm-bench/blob.bin", "rb", block_size=5 << 20, cache_type="bytes") as f:
            while f.read(1 << 20):
                pass
        rows.append(("read", "S3 fsspec defaults (5 MB blocks)", mbps(n, time.perf_counter() - t)))
        local_w = next(r[2] for r in rows if r[0] == "write")
        local_r = next(r[2] for r in rows if r[0] == "read")
        print(f"throughput, {args.mb} MB file, this machine ({os.cpu_count()} cores), S3 = moto on 127.0.0.1:")
        for op, what, v in rows:
            base = local_w if op == "write" else local_r
            print(f"  {op:5s} {what:40s} {v:9,.0f} MB/s   ({v / base:5.2f}x local disk)")

        compose_figures(fs, s3, data, tmp)
        parquet_compose_figures(fs, s3, tmp, args.mb)
        compressed_shards_figures(fs, tmp, max(args.mb // 4, 8))

        # end to end: the same recipe, every path local vs every path on S3
        sample = os.path.join(REPO, "examples", "data", "cc-sample.jsonl.gz")
        lines = gzip.open(sample, "rb").read().splitlines(keepends=True)
        inp = os.path.join(tmp, "in")
        os.makedirs(inp)
        size, k = 0, 0
        while size < args.rows_mb << 20:
            p = os.path.join(inp, f"part-{k:03d}.jsonl")
            with open(p, "wb") as f:
                for ln in lines:
                    row = json.loads(ln)
                    row["id"] = f"{k}-{row.get('id', '')}"
                    f.write(json.dumps(row).encode() + b"\n")
            size += os.path.getsize(p)
            fs.upload(p, f"s3://gm-bench/in/part-{k:03d}.jsonl")
            k += 1
        ops = [{"words_num_filter": {"min_num": 20}}, {"document_deduplicator": {}}]
        times = {}
        import yaml
        for name, where in (("local disk", {"dataset_path": inp, "export_path": os.path.join(tmp, "out/c.jsonl"),
                                            "work_dir": os.path.join(tmp, "work")}),
                            ("S3", {"dataset_path": "s3://gm-bench/in/", "export_path": "s3://gm-bench/out/c.jsonl",
                                    "work_dir": "s3://gm-bench/work"})):
            rec = os.path.join(tmp, f"{name[:2]}.yaml")
            with open(rec, "w") as f:
                yaml.safe_dump({"process": ops, "np": 2, **where}, f)
            t = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", rec, "--no-progress"], cwd=tmp,
                               capture_output=True, text=True)
            times[name] = time.perf_counter() - t
            if p.returncode:
                sys.exit(f"{name} run failed: {p.stderr[-800:]}")
        same = s3.cat_file("gm-bench/out/c.jsonl") == open(os.path.join(tmp, "out/c.jsonl"), "rb").read()
        print(f"gristmill run, {size / 1e6:,.0f} MB JSONL in {k} files, 2 ops, np=2 (wall time incl. start-up):")
        for name, s in times.items():
            print(f"  {name:10s} {s:7.1f} s   {size / 1e6 / s:7.1f} MB/s")
        print(f"  S3 / local: {times['S3'] / times['local disk']:.2f}x the time; export bytes identical: {same}")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
