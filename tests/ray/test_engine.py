"""The Ray engine on its own: one-line refusals (no Ray installed, no cluster at the address), a local Ray
instance it starts for one run and shuts down, and resolve pieces (``map``) that come back in order with an
op's own exception."""
import subprocess
import sys
import time

import pytest
import yaml
from gm_testutil import REPO
from rayutil import artifacts, make_input, run

from gristmill.engine.interrupt import Interrupted

BASIC = [{"replace_content_mapper": {"pattern": r"https?://\S+", "repl": ""}},
         {"words_num_filter": {"min_num": 50}},
         {"document_deduplicator": {"lowercase": True}}]


def _recipe(tmp_path, **kw) -> str:
    r = {"dataset_path": str(REPO / "examples" / "data" / "cc-sample.jsonl.gz"),
         "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "work"), "process": BASIC, **kw}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(r))
    return str(p)


def _cli(*args, block_ray=False):
    pre = "import sys; sys.modules['ray'] = None; " if block_ray else "import sys; "
    code = pre + "from gristmill.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "run", *args, "--no-progress"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_without_ray_installed_one_line_exit_2(tmp_path):
    res = _cli(_recipe(tmp_path, executor_type="ray"), block_ray=True)
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()
    assert err[-1].startswith("error: engine 'ray' needs Ray: pip install 'gristmill[ray]'"), res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "work").exists()


def test_no_cluster_at_the_address_one_line_exit_2(tmp_path):
    res = _cli(_recipe(tmp_path), "--engine", "ray", "--address", "127.0.0.1:1")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        "error: cannot reach the Ray cluster at 127.0.0.1:1: Connection refused (is `ray start --head` running "
        "there, and is the port open?)")


@pytest.mark.ray
def test_a_local_ray_instance_for_one_run_same_bytes(tmp_path):
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()
    data = make_input(tmp_path)
    local = artifacts(run(data, BASIC, tmp_path / "local" / "out.jsonl", tmp_path / "wl", np=1))
    got = artifacts(run(data, BASIC, tmp_path / "ray" / "out.jsonl", tmp_path / "wr", np=2, engine="ray"))
    assert got == local and local["rows"] == (210, 132, 9)
    assert not ray.is_initialized()  # the instance it started is gone


@pytest.mark.ray
def test_map_in_order_errors_as_themselves_and_abort(tmp_path):
    ray = pytest.importorskip("ray")
    from gristmill.engine.ray.executor import RayExecutor
    ex = RayExecutor(2, None)
    try:
        assert ex.workers == 2
        # module-level functions travel by reference (workers import them): here builtins and the stdlib's
        assert ex.map(abs, [-3, 1, -4, 1, -5, 9, -2]) == [3, 1, 4, 1, 5, 9, 2]
        with pytest.raises(ValueError, match="^invalid literal for int\\(\\) with base 10: 'x'$"):
            ex.map(int, ["1", "x"])
        # an interrupt while pieces run: close(abort=True) cancels them (the engine's except path)
        import signal
        import threading
        threading.Timer(1.0, lambda: signal.raise_signal(signal.SIGINT)).start()
        from gristmill.engine.interrupt import signals_raise
        with pytest.raises(Interrupted), signals_raise():
            ex.map(time.sleep, [3600, 3600])
        ex.close(abort=True)
        assert not ray.is_initialized()
    finally:
        ex.close(abort=True)
