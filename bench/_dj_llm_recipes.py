"""Data-Juicer's repository recipes with LLM (API-model) ops, on Data-Juicer 1.6.1 and gristmill against one
local OpenAI-compatible server (tests/llm/llm_server.py, started here on 127.0.0.1; deterministic answers).

Used by ``python bench/dj_recipes.py --llm``. Every recipe under ``configs/**`` of the mirror whose process
list holds an op that asks an LLM (an op of ``gristmill/ops/llm`` or one with ``api_model`` /
``api_or_hf_model`` / ``is_api_model`` / ``api_endpoint`` params) is listed. A runnable one runs unchanged
but for its data paths, ``work_dir``, ``np: 1`` and ``keep_stats_in_res_ds: true`` (the ops' meta and stats
exported with the rows, so that they are compared too), on both systems in turn, both pointed at the server by
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (what Data-Juicer's API client and gristmill's read when a recipe
names no ``api_endpoint``). Compared: (a) the request bodies each system sent (the server's log, sliced by
run; as sent, and as a multiset since gristmill's requests run concurrently) and (b) the exported rows.

``configs/config_all.yaml`` (Data-Juicer's reference of every op's params, not a recipe: media ops, Hub
models) is run in part: its text LLM entries of CONFIG_ALL_CHAIN, with their params as written, chained in one
recipe (one Data-Juicer start-up) on the QA rows of Data-Juicer's demo data; the other entries are listed with
the reason.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "llm"))

API_PARAMS = ("api_model", "api_or_hf_model", "is_api_model", "api_endpoint")


def llm_op_names() -> set[str]:
    """gristmill's ops that ask an LLM (those of gristmill/ops/llm)."""
    from gristmill import registry as R
    return {n for n in R.all_ops() if R.get_op_class(n).__module__.startswith("gristmill.ops.llm")}


def llm_ops_of(recipe: dict, llm: set[str]) -> list[str]:
    out = []
    for o in recipe.get("process") or []:
        if not isinstance(o, dict):
            continue
        name = next(iter(o))
        prm = o[name] if isinstance(o[name], dict) else {}
        if name in llm or any(k in prm for k in API_PARAMS):
            out.append(name)
    return out


def list_llm_recipes(git) -> list[tuple[str, dict, list[str]]]:
    """[(path, recipe, its LLM ops)] for every configs/** YAML whose process list asks an LLM."""
    llm = llm_op_names()
    found = []
    for p in sorted(git("ls-tree", "-r", "--name-only", "HEAD", "configs").splitlines()):
        if not p.endswith((".yaml", ".yml")):
            continue
        try:
            r = yaml.safe_load(git("show", f"HEAD:{p}"))
        except yaml.YAMLError:
            continue
        if isinstance(r, dict) and isinstance(r.get("process"), list):
            ops = llm_ops_of(r, llm)
            if ops:
                found.append((p, r, ops))
    return found


# -- the server's answers --------------------------------------------------------------------------------

def _h(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big")


def answer(body: dict, times_asked: int) -> str:
    """A deterministic answer that each op's parser accepts, chosen by the request's system prompt."""
    msgs = body["messages"]
    system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
    user = msgs[-1]["content"] if isinstance(msgs[-1]["content"], str) else json.dumps(msgs[-1]["content"])
    h = _h(json.dumps(msgs, ensure_ascii=False))
    if "【提示词】" in system:  # optimize_prompt_mapper: a variant of the last example
        examples = re.findall(r"【提示词】\n(.*?)\n(?=\n如下是一条示例数据|$)", user, re.DOTALL)
        last = examples[-1] if examples else user
        return f"【提示词】\n{last} Be concise (variant {h % 97}).\n"
    from llm_answers import dims_of, scoring_answer
    if dims_of(system):  # the scoring filters
        return scoring_answer(body, times_asked)
    if "Answer YES | NO" in user:  # extract_entity_relation_mapper: no more gleaning
        return "NO"
    if user.startswith("MANY entities were missed"):
        return f'("entity"<|>沙僧{h % 3}<|>person<|>师弟)<|COMPLETE|>'
    if '("relationship"' in user and "-Goal-" in user:  # extract_entity_relation_mapper's first turn
        return (f'("entity"<|>李莲花<|>person<|>神医 {h % 100})##("entity"<|>方多病<|>person<|>少侠)##'
                f'("relationship"<|>李莲花<|>方多病<|>朋友 {h % 7}<|>友情<|>{h % 10})<|COMPLETE|>')
    if "情节描述" in system:  # extract_event_mapper: two events
        return (f"### 情节1：\n- **情节描述**： 李莲花查看痕迹 {h % 100}\n- **相关人物**：李莲花，方多病\n"
                f"### 情节2：\n- **情节描述**： 众人议论 {h % 89}\n- **相关人物**：方多病\n")
    if "称呼方式" in system:  # extract_nickname_mapper
        return f"### 称呼方式1\n- **说话人**：方多病\n- **被称呼人**：李莲花\n- **方多病对李莲花的昵称**：莲花{h % 5}\n"
    if "代表性示例摘录" in system:  # extract_entity_attribute_mapper
        m = re.search(r"## (\S+)：", system)
        attr = m.group(1) if m else "人物性格"
        return f"## {attr}：描述 {h % 100}\n### 代表性示例摘录1：\n```\n摘录 {h % 13}\n```\n"
    if "文本摘录助手" in system:  # extract_support_text_mapper
        return f"原文片段 {h % 1000}"
    m = re.search(r"# (\S+)\n## (\S+)\n\.\.\.", system)
    if m:  # entity_attribute_aggregator
        return f"# {m.group(1)}\n## {m.group(2)}\n总结 {h % 1000}"
    if "## 列表" in system:  # most_relevant_entities_aggregator
        return f"## 分析\n分析 {h % 100}\n## 列表\n方多病, 笛飞声{h % 3}"
    if "文档碎片" in system:  # nested_aggregator
        return f"文档总结 {h % 1000}"
    for kw, label in (("情绪值", None), ("意图分析", "意图类别"), ("情感分析", "情感类别"), ("话题分析", "话题类别")):
        if kw in system:  # the dialog_* mappers
            if label is None:
                return f"情绪分析：analysis {h % 1000}\n情绪值：{h % 11 - 5}"
            return f"{kw}：analysis {h % 1000}\n{label}：label{h % 3}, label{h % 5}"
    if "【原因】" in system:  # pair_preference_mapper
        return f"【回答】\nrejected {h % 1000}\n【原因】\nreason {h % 89}"
    if "【问题】" in system or "【回答】" in system:  # calibrate_* / optimize_* mappers
        return f"【问题】\nquestion {h % 1000}\n【回答】\nanswer {h % 997}"
    if "content_keywords" in system or "content_keywords" in user:  # extract_keyword_mapper
        return f'("content_keywords" "kw{h % 7}, kw{h % 11}")<|COMPLETE|>'
    m = re.search(r"所以(.+?)是(.+?)的：", system)
    if m:  # relation_identity_mapper
        return f"分析推理：……\n{m.group(0)}朋友{h % 3}"
    return f"answer {h % 1000}: {user[:80]}"


# -- inputs ----------------------------------------------------------------------------------------------

def recipe_input(path: str, recipe: dict, git, work: Path, rows: int) -> Path:
    """The recipe's own dataset from the repository when it ships one (its first ``rows`` rows)."""
    ds = str(recipe.get("dataset_path") or "")
    out = work / "inputs" / f"llm-{Path(path).stem}-{rows}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [ln for ln in git("show", f"HEAD:{ds}").splitlines() if ln.strip()]
    out.write_text("".join(ln + "\n" for ln in lines[:rows]), encoding="utf-8")
    return out


def has_own_data(recipe: dict, git) -> bool:
    ds = recipe.get("dataset_path")
    if not isinstance(ds, str) or not ds.endswith(".jsonl"):
        return False
    try:
        git("cat-file", "-e", f"HEAD:{ds}")
        return True
    except subprocess.CalledProcessError:
        return False


# -- config_all.yaml's LLM entries, chained into recipes ------------------------------------------------

# the entries of configs/config_all.yaml run as written, a chain per kind of row (one Data-Juicer start-up each)
CONFIG_ALL_CHAINS = {
    "qa": ("calibrate_qa_mapper", "calibrate_query_mapper", "calibrate_response_mapper", "pair_preference_mapper",
           "extract_keyword_mapper", "relation_identity_mapper", "llm_quality_score_filter",
           "llm_difficulty_score_filter"),
    "extract": ("extract_event_mapper", "extract_support_text_mapper", "extract_nickname_mapper",
                "extract_entity_relation_mapper"),
    "dialog": ("dialog_intent_detection_mapper", "dialog_sentiment_detection_mapper",
               "dialog_sentiment_intensity_mapper", "dialog_topic_detection_mapper"),
}
# why the other LLM entries of config_all.yaml are in no chain
CONFIG_ALL_OUT = {
    "generate_qa_from_text_mapper": "Data-Juicer loads hf_model (a 7B Hub model) locally",
    "generate_qa_from_examples_mapper": "Data-Juicer loads hf_model (a 7B Hub model) locally",
    "optimize_qa_mapper": "Data-Juicer loads hf_model (a 7B Hub model) locally",
    "optimize_query_mapper": "its default hf_model is loaded locally by Data-Juicer",
    "optimize_response_mapper": "its default hf_model is loaded locally by Data-Juicer",
    "llm_perplexity_filter": "a local Hub model (Qwen2.5-0.5B)",
    "llm_task_relevance_filter": "as written (task_desc and valid_dataset null) both refuse it: Data-Juicer 1.6.1 "
                                 "at run time, after asking for every row ('Validation feature not ready yet', "
                                 "all rows dropped), gristmill before the run ('give task_desc or valid_dataset')",
    "extract_entity_attribute_mapper": "as written both refuse it before the run: config_all.yaml gives "
                                       "'entity_attribute_key', a param the op no longer has (Data-Juicer 1.6.1's "
                                       "preflight: unknown parameter; gristmill: unknown param, did you mean "
                                       "'attribute_key')",
    "text_embd_similarity_filter": "asks an embeddings endpoint with valid_dataset: null (no reference set)",
}
for _n in ("entity_attribute_aggregator", "most_relevant_entities_aggregator", "nested_aggregator"):
    CONFIG_ALL_OUT[_n] = ("Data-Juicer counts the group's tokens with the API model's tiktoken encoding, which "
                          "tiktoken downloads at run time (no network here: 'Failed to initialize the processor')")
CONFIG_ALL_OUT["meta_tags_aggregator"] = ("its meta_tag_key (query_sentiment_label) comes from "
                                          "query_sentiment_detection_mapper, a local Hub model")


def _demo(git, name: str) -> list[dict]:
    return [json.loads(ln) for ln in git("show", f"HEAD:demos/data/{name}").splitlines() if ln.strip()]


def op_test_texts(git) -> list[str]:
    """The Chinese drama and novel excerpts of Data-Juicer's own extract_* / relation_identity op tests
    (``raw_text = \"\"\"...\"\"\"``), in file order, each once."""
    out = []
    for f in ("test_extract_event_mapper", "test_extract_nickname_mapper", "test_extract_entity_attribute_mapper",
              "test_relation_identity_mapper"):
        src = git("show", f"HEAD:tests/ops/mapper/{f}.py")
        for t in re.findall(r'raw_text = """(.*?)"""', src, re.DOTALL):
            if t not in out:
                out.append(t)
    return out


def config_all_rows(kind: str, git, rows: int) -> list[dict]:
    """Rows from Data-Juicer's demo data. qa: the chatml demo's question / answer pairs and the
    human-preference demo's prompts and first answers (``text`` = the answer). dialog: the chatml demo's
    dialogs (the last turn as query / response) and the human-preference prompts three by three as
    three-turn dialogs (``history`` the earlier [query, response] pairs). extract: the excerpts of
    Data-Juicer's op tests (op_test_texts)."""
    chat = []  # each dialog's [user, assistant] turns
    for d in _demo(git, "demo-dataset-chatml.jsonl"):
        m = [x for x in d["messages"] if x["role"] in ("user", "assistant")]
        chat.append([[m[i]["content"], m[i + 1]["content"]] for i in range(0, len(m) - 1, 2)])
    pref = [(d["prompt"], d["answer1"]) for d in _demo(git, "demo-dataset-annotation-human-preference.jsonl")]
    if kind == "extract":
        return [{"text": t} for t in op_test_texts(git)][:rows]
    if kind == "qa":
        out = [{"text": t[0][1], "query": t[0][0], "response": t[0][1]} for t in chat] + \
              [{"text": r, "query": q, "response": r} for q, r in pref]
    else:
        out = [{"text": t[-1][0], "history": t[:-1], "query": t[-1][0], "response": t[-1][1]} for t in chat]
        for i in range(0, len(pref) - 2, 3):
            (q1, r1), (q2, r2), (q3, r3) = pref[i:i + 3]
            out.append({"text": q3, "history": [[q1, r1], [q2, r2]], "query": q3, "response": r3})
    return out[:rows]


def config_all_jobs(recipe: dict, llm: list[str], work: Path, git, rows: int):
    """[(label, recipe, ops, data)] and the entries left out [(label, why)]."""
    entries = {next(iter(o)): o for o in recipe["process"] if isinstance(o, dict)}
    jobs = []
    for kind, names in CONFIG_ALL_CHAINS.items():
        chain = [entries[n] for n in names if n in entries]
        data = work / "inputs" / f"llm-config_all-{kind}-{rows}.jsonl"
        data.parent.mkdir(parents=True, exist_ok=True)
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in config_all_rows(kind, git, rows)),
                        encoding="utf-8")
        jobs.append((f"configs/config_all.yaml ({kind} entries)",
                     {"project_name": f"config_all-llm-{kind}", "text_keys": "text", "process": chain},
                     [n for n in names if n in entries], data))
    chained = {n for names in CONFIG_ALL_CHAINS.values() for n in names}
    left = [(f"configs/config_all.yaml: {n}", CONFIG_ALL_OUT.get(n, "needs grouped / event rows (in no chain yet)"))
            for n in llm if n not in chained]
    return jobs, left


# -- runs -------------------------------------------------------------------------------------------------

def body_key(b: dict) -> str:
    return json.dumps(b, sort_keys=True, ensure_ascii=False)


def compare_bodies(dj: list[dict], gm: list[dict]) -> str:
    if dj == gm:
        return "yes (same order)"
    if sorted(map(body_key, dj)) == sorted(map(body_key, gm)):
        return "yes (as a multiset)"
    a, b = set(map(body_key, dj)), set(map(body_key, gm))
    if a == b:
        return (f"yes, the same {len(a)} distinct messages (DJ sends an identical request once per row, "
                "gristmill once: its request cache)")
    return f"no ({len(a - b)} only DJ, {len(b - a)} only ours)"


GM_COLUMNS = {"__stats__": "__dj__stats__", "__meta__": "__dj__meta__"}


def rounded(x):
    """Floats to 12 significant digits, throughout."""
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def sorted_graph(rows: list[dict]) -> list[dict]:
    """Rows with meta.entity and meta.relation (extract_entity_relation_mapper) sorted."""
    out = []
    for r in rows:
        m = r.get("__dj__meta__")
        if isinstance(m, dict) and any(isinstance(m.get(k), list) for k in ("entity", "relation")):
            m = dict(m)
            for k in ("entity", "relation"):
                if isinstance(m.get(k), list):
                    m[k] = sorted(m[k], key=lambda x: json.dumps(x, sort_keys=True, ensure_ascii=False))
            r = dict(r, __dj__meta__=m)
        out.append(r)
    return out


def null_key_quirk(recipe: dict, rows: list[dict]) -> list[dict]:
    """gristmill's rows as Data-Juicer 1.6.1 writes them when dialog_sentiment_intensity_mapper's
    intensities_key and analysis_key are null: both under meta key "None", the analyses written last."""
    for o in recipe["process"]:
        prm = o.get("dialog_sentiment_intensity_mapper")
        if isinstance(prm, dict) and prm.get("intensities_key", 0) is None and prm.get("analysis_key", 0) is None:
            break
    else:
        return rows
    out = []
    for r in rows:
        m = dict(r.get("__dj__meta__") or {})
        m.pop("dialog_sentiment_intensity", None)
        if "dialog_sentiment_intensity_analysis" in m:
            m = {("None" if k == "dialog_sentiment_intensity_analysis" else k): v for k, v in m.items()}
        out.append(dict(r, __dj__meta__=m))
    return out


def compare_in_order(dj: list[dict], gm: list[dict], compare) -> str:
    """Rows compared position by position (neither side has ids here), else by dj_recipes.compare."""
    if dj == gm:
        return "identical"
    if len(dj) != len(gm) or any("id" in r for r in dj):
        return compare(dj, gm)
    fields, first = {}, {}
    for i, (a, b) in enumerate(zip(dj, gm)):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k) or (k in a) != (k in b):
                fields[k] = fields.get(k, 0) + 1
                first.setdefault(k, i)
    return "; ".join(f"{c} rows differ in {k!r} (first row {first[k]})" for k, c in fields.items())


def run_llm_recipes(a, work: Path, env_dj: dict, env_gm: dict, git, rewrite, run, read_rows, compare,
                    last_error) -> tuple[list[dict], list[tuple[str, str]]]:
    from llm_server import LLMServer
    results, excluded = [], []
    recipes = list_llm_recipes(git)
    with LLMServer(answer) as srv:
        env = {"OPENAI_BASE_URL": srv.url, "OPENAI_API_KEY": "sk-bench"}
        jobs = []
        for path, recipe, ops in recipes:
            if a.only and not any(s in path for s in a.only):
                continue
            if path == "configs/config_all.yaml":
                # Data-Juicer's reference of every op's params (media ops, Hub models), not a runnable recipe:
                # its text LLM entries run as written, chained, on rows of its demo data
                more, left = config_all_jobs(recipe, ops, work, git, a.rows)
                jobs += more
                excluded += left
            elif not has_own_data(recipe, git):
                excluded.append((path, "LLM op " + ", ".join(ops) + ": no dataset in the repository"))
            else:
                jobs.append((path, recipe, ops, recipe_input(path, recipe, git, work, a.rows)))
        for path, recipe, ops, data in jobs:
            rows_in = sum(1 for _ in open(data, encoding="utf-8"))
            res = {"recipe": path, "ops": ops, "rows_in": rows_in}
            name = re.sub(r"\W+", "-", Path(path).name.removesuffix(".yaml")).strip("-")
            for side, cmd_of, e in (("dj", lambda y: [str(a.dj_bin), "--config", str(y)], env_dj),
                                    ("gm", lambda y: [sys.executable, "-m", "gristmill.cli", "run", str(y),
                                                      "--no-progress"], env_gm)):
                d = work / "runs-llm" / name / side
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
                y = d / "recipe.yaml"
                r = rewrite(recipe, data, d / "out" / "out.jsonl", d / "work")
                r["keep_stats_in_res_ds"] = True  # the ops' meta and stats exported with the rows, to compare
                y.write_text(yaml.safe_dump(r, sort_keys=False, allow_unicode=True))
                n0, b0 = srv.n, len(srv.bodies)
                with srv.lock:  # each side gets the same answers (some are garbled the first time a body is asked)
                    srv.asked.clear()
                rc, secs = run(cmd_of(y), dict(e, **env), d / "log.txt", a.timeout)
                log = (d / "log.txt").read_text(errors="replace")
                rows = read_rows(d / "out" / "out.jsonl") if rc == 0 else None
                op_err = [ln for ln in log.splitlines() if "An error occurred in" in ln] if side == "dj" else []
                res[side] = {"rc": rc, "seconds": round(secs, 1), "rows": None if rows is None else len(rows),
                             "requests": srv.n - n0,
                             "error": None if rc == 0 and not op_err else
                             (op_err[0].split(" - ", 1)[-1][:200] if op_err else last_error(log))}
                res[side + "_bodies"] = srv.bodies[b0:]
                res[side + "_rows"] = None if op_err else rows
                (d / "bodies.jsonl").write_text("".join(json.dumps(b, ensure_ascii=False) + "\n"
                                                        for b in res[side + "_bodies"]))
            res["bodies_identical"] = compare_bodies(res["dj_bodies"], res["gm_bodies"])
            if res["dj_rows"] is None:
                res["verdict"] = f"DJ failed: {res['dj']['error']}"
            elif res["gm_rows"] is None:
                res["verdict"] = f"gristmill failed: {res['gm']['error']}"
            else:
                notes = []
                if not any("id" in r for r in res["dj_rows"]) and all("id" in r for r in res["gm_rows"]):
                    # gristmill gives every row a stable id (the input's, else source:line); DJ's rows have none
                    res["gm_rows"] = [{k: v for k, v in r.items() if k != "id"} for r in res["gm_rows"]]
                    notes.append("gristmill's added `id` set aside")
                # gristmill exports the stats and meta columns as __stats__ / __meta__
                res["gm_rows"] = [{GM_COLUMNS.get(k, k): v for k, v in r.items()} for r in res["gm_rows"]]
                dj_r, gm_r = res["dj_rows"], res["gm_rows"]
                if dj_r != gm_r and rounded(dj_r) == rounded(gm_r):
                    dj_r, gm_r = rounded(dj_r), rounded(gm_r)
                    notes.append("scores equal to 12 digits, not in the last bit: see docs/llm.md")
                verdict = compare_in_order(dj_r, gm_r, compare)
                if verdict != "identical" and \
                        compare_in_order(sorted_graph(dj_r), sorted_graph(gm_r), compare) == "identical":
                    dj_r, gm_r = sorted_graph(dj_r), sorted_graph(gm_r)
                    verdict = "identical as sets"
                    notes.append("extract_entity_relation_mapper's entities and relations: Data-Juicer lists them "
                                 "in list(set(...)) order, which changes with Python's hash seed; gristmill sorts")
                if not verdict.startswith("identical") and null_key_quirk(recipe, gm_r) is not gm_r and \
                        compare_in_order(dj_r, null_key_quirk(recipe, gm_r), compare) == "identical":
                    verdict = "identical but for DJ's meta key None"
                    notes.append("Data-Juicer 1.6.1, given intensities_key and analysis_key null as config_all.yaml "
                                 "writes them, stores both under the key None, the analyses overwriting the "
                                 "intensities; gristmill uses the default fields")
                res["verdict"] = verdict + (f" ({'; '.join(notes)})" if notes else "")
            for k in ("dj_bodies", "gm_bodies", "dj_rows", "gm_rows"):
                del res[k]
            results.append(res)
            print(f"{path}: in {rows_in}, DJ {res['dj']['rows']} rows / {res['dj']['requests']} requests "
                  f"({res['dj']['seconds']}s), ours {res['gm']['rows']} / {res['gm']['requests']} "
                  f"({res['gm']['seconds']}s): bodies {res['bodies_identical']}; rows {res['verdict']}",
                  file=sys.stderr, flush=True)
    return results, excluded


def print_llm_table(results, excluded, markdown: bool) -> None:
    same = sum(r["verdict"].startswith("identical") and r["bodies_identical"].startswith("yes") for r in results)
    print(f"{same} of {len(results)} LLM recipes send the same messages and export the same rows, up to the "
          "differences noted (Data-Juicer 1.6.1 vs gristmill, one local OpenAI-compatible server)")
    head = ["recipe", "LLM ops", "rows in", "rows DJ", "rows ours", "requests DJ", "requests ours",
            "bodies identical", "rows"]
    rows = [[r["recipe"].removeprefix("configs/"), ", ".join(r["ops"]), r["rows_in"], r["dj"]["rows"],
             r["gm"]["rows"], r["dj"]["requests"], r["gm"]["requests"], r["bodies_identical"], r["verdict"]]
            for r in results]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in rows:
            print("| " + " | ".join("—" if v is None else str(v) for v in row) + " |")
        if excluded:
            print("\nNot run:\n")
            for p, why in excluded:
                print(f"- `{p.removeprefix('configs/')}`: {why}")
    else:
        for row in [head] + rows:
            print("  ".join(str("-" if v is None else v) for v in row))
        for p, why in excluded:
            print(f"not run: {p}: {why}")
