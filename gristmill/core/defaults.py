"""The one declaration of each run default. Recipes, the run config, reader options, shard tasks and the
Python API all take theirs from here."""

TEXT_KEY = "text"  # the field holding a sample's text
BATCH_SIZE = 1000  # rows per Arrow record batch
SHARD_SIZE_MB = 16  # big plain JSONL/text inputs are split into byte ranges of about this size
SHARD_BYTES = SHARD_SIZE_MB << 20
TMP = ".gm-tmp-"  # prefix of every temp file a run writes (a killed run's are found and removed by it)
SEED = 42  # sampling, selectors and mixture weights
REMOVED_SAMPLE = 100  # removed rows kept per op for inspection (unless keep_removed)
MAX_REJECT_RATIO = 0.05  # `gristmill run` exits 1 when more than this share of the rows read was rejected
KEEP_TRACES = 10  # before/after texts kept per mapper for the report (the tracer; Data-Juicer's trace_num)


def work_dir_for(output: str, name: str) -> str:
    """The default work dir of a run that writes ``output``: ``.gristmill-work-NAME`` beside it (resume state,
    reports, rejects), so reruns of the same command find it. The one rule the recipe, the Python API and
    ``gristmill tokenize`` share."""
    import os
    import re
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", output) and not output.lower().startswith("file://"):
        return f"{output.rstrip('/').rsplit('/', 1)[0]}/.gristmill-work-{name}"  # beside it in the bucket
    return os.path.join(os.path.dirname(os.path.abspath(output)), f".gristmill-work-{name}")
