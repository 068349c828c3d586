"""A path param that does not take an object-storage URL refuses one when the op is built (it would become a
local folder named ``s3:``); the params that do (``Op.url_params``) take it."""
import pytest

from gristmill.registry import OpError, all_ops, create_op


@pytest.mark.parametrize("op,params,key", [
    ("image_blur_mapper", {"save_dir": "s3://bucket/blurred"}, "save_dir"),
    ("stopwords_filter", {"stopwords_dir": "gs://bucket/words"}, "stopwords_dir"),
    ("url_filter", {"blocklist_dir": ["/tmp/a", "s3://bucket/lists"]}, "blocklist_dir"),
])
def test_a_url_where_a_local_path_is_needed_is_refused(op, params, key):
    with pytest.raises(OpError, match=rf"process\[0\]\.{op}\.{key}: '.+://.+': this param takes a local path"):
        create_op(op, params, f"process[0].{op}")


def test_the_signature_files_take_urls():
    op = create_op("document_minhash_deduplicator", {"save_signatures_path": "memory://sig/a.parquet"})
    assert op.params.save_signatures_path == "memory://sig/a.parquet"


def test_url_params_name_declared_path_params():
    from gristmill.core import trust
    for name, cls in all_ops().items():
        assert set(cls.url_params) <= set(trust.path_params(cls.Params)), name
