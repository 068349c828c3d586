"""`gristmill download`'s arguments, apart from the downloader: building the CLI's parser must not import
``web.download`` (pydantic models, urllib, http.client, ssl) for every other command."""
from __future__ import annotations

CC_BASE_URL = "https://data.commoncrawl.org/"


def add_download_command(subparsers) -> None:
    """Register ``gristmill download`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "download", help="download URL lists or Common Crawl path lists (parallel, resumable)",
        description="Download every URL in LIST (one per line; .gz allowed), or every path in a Common Crawl "
                    "warc.paths.gz / wet.paths.gz joined to --base-url, into OUT_DIR. Finished files are "
                    "skipped on a rerun; partial files resume.")
    p.add_argument("list", help="file of URLs or relative paths (e.g. warc.paths.gz)")
    p.add_argument("out_dir", help="directory to download into")
    p.add_argument("--base-url", default=None, help=f"prefix for relative paths (default for *paths.gz: {CC_BASE_URL})")
    p.add_argument("--workers", "-j", type=int, default=8, help="parallel downloads (default 8)")
    p.add_argument("--retries", type=int, default=5, help="retries per file (default 5)")
    p.add_argument("--backoff", type=float, default=1.0, help="first retry delay in seconds, doubled each time")
    p.add_argument("--timeout", type=float, default=60.0, help="socket timeout in seconds (default 60)")
    p.add_argument("--checksums", default=None, help="sha256sum/md5sum-style file to verify against")
    p.add_argument("--etag-md5", action="store_true", help="treat 32-hex ETags as MD5 checksums (S3-style)")
    p.add_argument("--limit", type=int, default=None, help="only the first N entries")
    p.add_argument("--report", default=None, help="where to write the JSON report (default OUT_DIR/download-report.json)")
    p.add_argument("--allow-file-urls", action="store_true", help="accept file:// URLs (they copy local files)")
    p.add_argument("--quiet", "-q", action="store_true", help="no per-file lines")
    p.set_defaults(fn=run_download_command)


def run_download_command(args) -> int:
    from .download import run_download_command as run
    return run(args)
