"""latex_merge_tex_mapper against Data-Juicer 1.6.1: on these archives (tar.gz with a directory entry,
zip, empty tar) DJ's op gave texts of lengths [5138, 5138, 0] / [136, 136, 0] / [120, 120, 0] for the three
param sets below, equal to the strings built here (checked against DJ's output during development)."""
import io
import json
import tarfile
import zipfile

import pytest
import yaml

from djops_util import fused, run

MAIN = "\\documentclass{article}\n\\begin{document}\n\\input{intro}\nThéorème 1.\n\\end{document}\n".encode()
FILES = [("paper/main.tex", MAIN), ("paper/intro.tex", b"\\section{Intro}\nWe study mills.\n"),
         ("paper/fig.png", b"\x89PNG..."), ("paper/bad.tex", b"caf\xe9 latin-1 byte\n"),
         ("paper/big.tex", b"x" * 5000), ("notes.txt", b"not tex")]


@pytest.fixture
def archives(tmp_path):
    with tarfile.open(tmp_path / "p.tar.gz", "w:gz") as tf:
        for n, b in FILES:
            ti = tarfile.TarInfo(n)
            ti.size = len(b)
            tf.addfile(ti, io.BytesIO(b))
        ti = tarfile.TarInfo("paper/sub.tex")
        ti.type = tarfile.DIRTYPE
        tf.addfile(ti)
    with zipfile.ZipFile(tmp_path / "p.zip", "w") as zf:
        for n, b in FILES:
            zf.writestr(n, b)
    with tarfile.open(tmp_path / "empty.tar", "w"):
        pass
    return [{"compressed_file": str(tmp_path / n)} for n in ("p.tar.gz", "p.zip", "empty.tar")]


def _dec(b):
    return b.decode("utf-8", errors="replace")


def test_same_text_as_data_juicer(archives):
    tex = [_dec(b) for n, b in FILES if n.endswith(".tex")]
    cases = [({}, "\n\n".join(tex)),
             ({"max_file_size": 4000}, "\n\n".join(tex[:3])),  # big.tex skipped
             ({"max_total_size": 120, "separator": "\n%---\n"}, "\n%---\n".join(tex[:2]))]  # bad.tex: over 120 B
    for params, want in cases:
        kept, _ = run("latex_merge_tex_mapper", archives, **params)
        assert [r["text"] for r in kept] == [want, want, ""], params
    assert [len(r["text"]) for r in run("latex_merge_tex_mapper", archives)[0]] == [5138, 5138, 0]
    assert "caf\ufffd latin-1" in run("latex_merge_tex_mapper", archives)[0][0]["text"]


def test_bad_archives_are_rejected_with_the_error(archives, tmp_path):
    (tmp_path / "x.rar").write_bytes(b"Rar!")
    (tmp_path / "broken.zip").write_bytes(b"PK\x03\x04 truncated")
    rows = archives[:1] + [{"compressed_file": str(tmp_path / "x.rar")}, {"compressed_file": str(tmp_path / "broken.zip")},
                           {"compressed_file": str(tmp_path / "missing.tgz")}, {"compressed_file": None}]
    kept, removed, rejects = fused("latex_merge_tex_mapper", rows)
    assert len(kept) == 1 and not removed and len(rejects) == 4
    assert "unsupported archive" in str(rejects[0])


def test_recipe_merges_then_strips_comments(archives, tmp_path):
    """End to end: gristmill run with latex_merge_tex_mapper then remove_comments_mapper."""
    import subprocess
    import sys
    src = tmp_path / "papers.jsonl"
    src.write_text("".join(json.dumps({"id": f"p{i}", **a}) + "\n" for i, a in enumerate(archives[:2])))
    recipe = {"dataset_path": str(src), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
              "process": [{"latex_merge_tex_mapper": {"max_file_size": 4000}},
                          {"remove_comments_mapper": {}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(out) == 2 and out[0]["text"] == out[1]["text"]
    assert out[0]["text"].startswith("\\documentclass{article}") and "We study mills." in out[0]["text"]
