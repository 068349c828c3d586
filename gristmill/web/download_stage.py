"""A recipe's ``download:`` section (the model the recipe validates), apart from the downloader: reading a
recipe must not import ``web.download`` (urllib, http.client, ssl, email) for a run that downloads nothing."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError


class DownloadStage(BaseModel):
    """A recipe's ``download:`` section: fetched (resumably) before the recipe reads ``dataset_path``."""
    model_config = ConfigDict(extra="forbid")

    urls: str | list[str] = Field(..., description="File of URLs / Common Crawl paths (.gz ok), or a list of URLs.")
    out_dir: str = Field(..., description="Directory to download into (point dataset_path at it).")
    base_url: str | None = Field(None, description="Prefix for relative paths (default for *paths.gz: Common Crawl).")
    workers: int = Field(8, ge=1)
    retries: int = Field(5, ge=0)
    backoff: float = Field(1.0, ge=0)
    timeout: float = Field(60.0, gt=0)
    checksums: str | None = Field(None, description="sha256sum/md5sum-style file to verify against.")
    etag_md5: bool = False
    limit: int | None = Field(None, ge=1, description="Only the first N entries.")
    allow_file_urls: bool = Field(False, description="Accept file:// URLs (they copy local files).")
    on_failure: Literal["stop", "continue"] = Field(
        "stop", description="'stop': a file that failed after all retries stops the run before processing; "
                            "'continue': process what was downloaded.")

    @model_validator(mode="after")
    def _list_is_usable(self):
        """Read and check the list when the recipe loads: a missing file or a bad URL is refused before any
        work, with the recipe's error format."""
        from .download import DownloadError, planned
        try:
            planned(self.urls, self.out_dir, self.base_url, self.limit, self.allow_file_urls)
        except DownloadError as e:
            raise PydanticCustomError("bad_download_list", str(e)) from None
        return self
