import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gm_testutil import SAMPLE  # noqa: E402


@pytest.fixture(scope="session")
def sample_rows():
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# The fast tier (`pytest -m "not slow"`, about 3 minutes on 2 cores): every file here is marked slow as a
# whole, as is every Ray test and every test under tests/ray/. These are the files that run long pipelines
# in subprocesses, start servers or browsers, or sweep many recipes (measured on the full suite; a file
# that grows past ~8 s of test time belongs here). CI runs the whole suite.
SLOW_FILES = frozenset({
    "tests/analysis/test_analyze.py",
    "tests/analysis/test_report_html.py",
    "tests/analysis/test_report_real.py",
    "tests/dedup/test_dedup_incremental.py",
    "tests/dedup/test_distributed.py",
    "tests/dedup/test_e2e.py",
    "tests/djcompat/test_djcompat_augment_spelling.py",
    "tests/djops/test_djops_augment.py",
    "tests/djops/test_djops_selectors.py",
    "tests/gallery/test_gallery_recipes.py",
    "tests/image/test_image_dedup.py",
    "tests/io/test_media_export_run.py",
    "tests/io/test_media_wds_extract.py",
    "tests/io/test_split.py",
    "tests/mm_models/test_mm_clip.py",
    "tests/mm_models/test_mm_ocr_frames.py",
    "tests/mm_models/test_mm_recipes.py",
    "tests/multisource/test_ms_djkeys.py",
    "tests/multisource/test_ms_run.py",
    "tests/multisource/test_ms_steel.py",
    "tests/service/test_api.py",
    "tests/service/test_api_security.py",
    "tests/service/test_jobs.py",
    "tests/service/test_mcp.py",
    "tests/service/test_mcp_http_auth.py",
    "tests/service/test_pipeline_faces.py",
    "tests/service/test_trust_limits.py",
    "tests/service/test_trust_rows.py",
    "tests/service/test_ui_browser.py",
    "tests/test_accounting_recipe.py",
    "tests/test_doc_examples.py",
    "tests/test_e2e_cli.py",
    "tests/test_export_lock.py",
    "tests/test_exports.py",
    "tests/test_models.py",
    "tests/test_op_resources.py",
    "tests/test_resume_determinism.py",
    "tests/test_safety.py",
    "tests/test_selectors_distributed.py",
    "tests/test_small_fixes.py",
    "tests/tokenize/test_run.py",
    "tests/tokenize/test_tokenize_engine.py",
    "tests/video/test_mm_video_mappers.py",
})


def pytest_collection_modifyitems(config, items):
    root = Path(__file__).parent.parent
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(root.resolve()).as_posix()
        if rel in SLOW_FILES or rel.startswith("tests/ray/") or item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.slow)
