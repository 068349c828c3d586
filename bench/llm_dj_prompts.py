"""Data-Juicer 1.6.1's prompts and templates against gristmill's LLM ops: the same messages need the same
text, whitespace included. Reads Data-Juicer's sources (no import: its module loading needs Ray) from an
installed py-data-juicer 1.6.1 and compares every default prompt, template and pattern the ops use.

    python bench/llm_dj_prompts.py [--dj /path/to/site-packages/data_juicer]
"""
from __future__ import annotations

import argparse
import ast
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def dj_constants(path: str) -> dict[str, dict[str, object]]:
    """``{class: {DEFAULT_*: value}}`` of a Data-Juicer module; its module-level ``DEFAULT_*`` under ``""``."""
    out: dict[str, dict[str, object]] = {}
    tree = ast.parse(open(path, encoding="utf-8").read())
    for st in tree.body:
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and st.targets[0].id.startswith("DEFAULT"):
            try:
                out.setdefault("", {})[st.targets[0].id] = ast.literal_eval(st.value)
            except ValueError:
                pass
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and \
                        st.targets[0].id.startswith("DEFAULT"):
                    try:
                        out.setdefault(node.name, {})[st.targets[0].id] = ast.literal_eval(st.value)
                    except ValueError:
                        pass
    return out


def ours():
    from gristmill.ops.llm import analysis as A, dialog as D, extract as E, pair_preference as P
    from gristmill.registry import create_op
    opt = {"is_hf_model": False}
    rows = []

    def op(name, **kw):
        return create_op(name, kw)

    for f, cls, name in (("filter/llm_analysis_filter.py", "LLMAnalysisFilter", "llm_analysis_filter"),
                         ("filter/llm_quality_score_filter.py", "LLMQualityScoreFilter", "llm_quality_score_filter"),
                         ("filter/llm_difficulty_score_filter.py", "LLMDifficultyScoreFilter",
                          "llm_difficulty_score_filter"),
                         ("filter/llm_task_relevance_filter.py", "LLMTaskRelevanceFilter",
                          "llm_task_relevance_filter")):
        o = op(name, **({"task_desc": "x"} if "relevance" in name else {}))
        rows.append((f, cls, "DEFAULT_SYSTEM_PROMPT", o.system_prompt))
        rows.append((f, cls, "DEFAULT_DIM_REQUIRED_KEYS", o.dim_keys))
    rows += [("filter/llm_analysis_filter.py", "LLMAnalysisFilter", "DEFAULT_INPUT_TEMPLATE", A.INPUT_TEMPLATE),
             ("filter/llm_analysis_filter.py", "LLMAnalysisFilter", "DEFAULT_FIELD_TEMPLATE", A.FIELD_TEMPLATE)]
    for f, cls, name, extra in (("optimize_qa_mapper.py", "OptimizeQAMapper", "optimize_qa_mapper", opt),
                                ("optimize_query_mapper.py", "OptimizeQueryMapper", "optimize_query_mapper", opt),
                                ("optimize_response_mapper.py", "OptimizeResponseMapper", "optimize_response_mapper",
                                 opt),
                                ("calibrate_qa_mapper.py", "CalibrateQAMapper", "calibrate_qa_mapper", {}),
                                ("calibrate_query_mapper.py", "CalibrateQueryMapper", "calibrate_query_mapper", {}),
                                ("calibrate_response_mapper.py", "CalibrateResponseMapper",
                                 "calibrate_response_mapper", {})):
        o = op(name, **extra)
        rows.append(("mapper/" + f, cls, "DEFAULT_SYSTEM_PROMPT", o.system_prompt))
        if name in ("optimize_qa_mapper", "calibrate_qa_mapper"):
            rows.append(("mapper/" + f, cls, "DEFAULT_OUTPUT_PATTERN", o.output_pattern))
    rows += [("mapper/pair_preference_mapper.py", "PairPreferenceMapper", "DEFAULT_SYSTEM_PROMPT", P.SYSTEM_PROMPT),
             ("mapper/pair_preference_mapper.py", "PairPreferenceMapper", "DEFAULT_INPUT_TEMPLATE", P.INPUT_TEMPLATE),
             ("mapper/pair_preference_mapper.py", "PairPreferenceMapper", "DEFAULT_OUTPUT_PATTERN", P.OUTPUT_PATTERN),
             ("mapper/extract_keyword_mapper.py", "ExtractKeywordMapper", "DEFAULT_PROMPT_TEMPLATE", E.KEYWORD_PROMPT),
             ("mapper/extract_support_text_mapper.py", "ExtractSupportTextMapper", "DEFAULT_SYSTEM_PROMPT",
              E.SUPPORT_SYSTEM_PROMPT),
             ("mapper/extract_support_text_mapper.py", "ExtractSupportTextMapper", "DEFAULT_INPUT_TEMPLATE",
              E.SUPPORT_INPUT_TEMPLATE)]
    for f, cls, name in (("dialog_intent_detection_mapper.py", "DialogIntentDetectionMapper",
                          "dialog_intent_detection_mapper"),
                         ("dialog_sentiment_detection_mapper.py", "DialogSentimentDetectionMapper",
                          "dialog_sentiment_detection_mapper"),
                         ("dialog_topic_detection_mapper.py", "DialogTopicDetectionMapper",
                          "dialog_topic_detection_mapper"),
                         ("dialog_sentiment_intensity_mapper.py", "DialogSentimentIntensityMapper",
                          "dialog_sentiment_intensity_mapper")):
        o = op(name)
        tag = "LABELS" if "intensity" not in name else "INTENSITY"
        rows += [("mapper/" + f, cls, "DEFAULT_SYSTEM_PROMPT", type(o).SYSTEM_PROMPT),
                 ("mapper/" + f, cls, "DEFAULT_QUERY_TEMPLATE", o.query_template),
                 ("mapper/" + f, cls, "DEFAULT_RESPONSE_TEMPLATE", o.response_template),
                 ("mapper/" + f, cls, "DEFAULT_ANALYSIS_TEMPLATE", o.analysis_template),
                 ("mapper/" + f, cls, "DEFAULT_ANALYSIS_PATTERN", o.analysis_pattern),
                 ("mapper/" + f, cls, f"DEFAULT_{tag}_TEMPLATE", o.value_template),
                 ("mapper/" + f, cls, f"DEFAULT_{tag}_PATTERN", o.value_pattern)]
        if tag == "LABELS":
            rows.append(("mapper/" + f, cls, "DEFAULT_CANDIDATES_TEMPLATE", f"备选{o.WORD}类别：[{{candidate_str}}]"))
    for pre, cls in (("EVENT", "ExtractEventMapper"), ("NICKNAME", "ExtractNicknameMapper")):
        f = f"mapper/extract_{pre.lower()}_mapper.py"
        rows += [(f, cls, f"DEFAULT_{k}", getattr(E, f"{pre}_{k}"))
                 for k in ("SYSTEM_PROMPT", "INPUT_TEMPLATE", "OUTPUT_PATTERN")]
    from gristmill.ops.llm import meta_tags as M
    f, cls = "aggregator/meta_tags_aggregator.py", "MetaTagsAggregator"
    rows += [(f, cls, "DEFAULT_SYSTEM_PROMPT", M.SYSTEM_PROMPT), (f, cls, "DEFAULT_INPUT_TEMPLATE", M.INPUT_TEMPLATE),
             (f, cls, "DEFAULT_TARGET_TAG_TEMPLATE", M.TARGET_TAG_TEMPLATE),
             (f, cls, "DEFAULT_TAG_TEMPLATE", M.TAG_TEMPLATE), (f, cls, "DEFAULT_OUTPUT_PATTERN", M.OUTPUT_PATTERN)]
    from gristmill.ops.llm import extract_entity as X
    f, cls = "mapper/extract_entity_relation_mapper.py", "ExtractEntityRelationMapper"
    rows += [(f, cls, "DEFAULT_PROMPT_TEMPLATE", X.ENTITY_RELATION_PROMPT),
             (f, cls, "DEFAULT_CONTINUE_PROMPT", X.CONTINUE_PROMPT), (f, cls, "DEFAULT_IF_LOOP_PROMPT", X.IF_LOOP_PROMPT),
             (f, cls, "DEFAULT_ENTITY_TYPES", X.ENTITY_TYPES), (f, cls, "DEFAULT_ENTITY_PATTERN", X.ENTITY_PATTERN),
             (f, cls, "DEFAULT_RELATION_PATTERN", X.RELATION_PATTERN)]
    f, cls = "mapper/extract_entity_attribute_mapper.py", "ExtractEntityAttributeMapper"
    rows += [(f, cls, "DEFAULT_SYSTEM_PROMPT_TEMPLATE", X.ATTRIBUTE_SYSTEM_PROMPT_TEMPLATE),
             (f, cls, "DEFAULT_INPUT_TEMPLATE", X.ATTRIBUTE_INPUT_TEMPLATE),
             (f, cls, "DEFAULT_ATTR_PATTERN_TEMPLATE", X.ATTR_PATTERN_TEMPLATE),
             (f, cls, "DEFAULT_DEMON_PATTERN", X.DEMO_PATTERN)]
    from gristmill.ops.llm import generate_qa_examples as G
    f, cls = "mapper/generate_qa_from_examples_mapper.py", "GenerateQAFromExamplesMapper"
    rows += [(f, cls, "DEFAULT_SYSTEM_PROMPT", G.SYSTEM_PROMPT), (f, cls, "DEFAULT_INPUT_TEMPLATE", G.INPUT_TEMPLATE),
             (f, cls, "DEFAULT_EXAMPLE_TEMPLATE", G.EXAMPLE_TEMPLATE),
             (f, cls, "DEFAULT_QA_PAIR_TEMPLATE", G.QA_PAIR_TEMPLATE), (f, cls, "DEFAULT_OUTPUT_PATTERN", G.OUTPUT_PATTERN)]
    from gristmill.ops.llm import optimize_prompt as O
    f, cls = "mapper/optimize_prompt_mapper.py", "OptimizePromptMapper"
    rows += [(f, cls, "DEFAULT_SYSTEM_PROMPT", O.SYSTEM_PROMPT), (f, cls, "DEFAULT_INPUT_TEMPLATE", O.INPUT_TEMPLATE),
             (f, cls, "DEFAULT_EXAMPLE_TEMPLATE", O.EXAMPLE_TEMPLATE),
             (f, cls, "DEFAULT_PROMPT_TEMPLATE", O.PROMPT_TEMPLATE), (f, cls, "DEFAULT_OUTPUT_PATTERN", O.OUTPUT_PATTERN)]
    from gristmill.ops.llm import aggregators as AG
    f, cls = "aggregator/nested_aggregator.py", "NestedAggregator"
    rows += [(f, cls, "DEFAULT_SYSTEM_PROMPT", AG.NESTED_SYSTEM_PROMPT),
             (f, cls, "DEFAULT_INPUT_TEMPLATE", AG.NESTED_INPUT_TEMPLATE),
             (f, cls, "DEFAULT_SUB_DOC_TEMPLATE", AG.NESTED_SUB_DOC_TEMPLATE)]
    f, cls = "aggregator/most_relevant_entities_aggregator.py", "MostRelevantEntitiesAggregator"
    rows += [(f, cls, "DEFAULT_SYSTEM_TEMPLATE", AG.MOST_RELEVANT_SYSTEM_TEMPLATE),
             (f, cls, "DEFAULT_INPUT_TEMPLATE", AG.MOST_RELEVANT_INPUT_TEMPLATE),
             (f, cls, "DEFAULT_OUTPUT_PATTERN", AG.MOST_RELEVANT_OUTPUT_PATTERN)]
    f, cls = "aggregator/entity_attribute_aggregator.py", "EntityAttributeAggregator"
    rows += [(f, cls, "DEFAULT_SYSTEM_TEMPLATE", AG.ENTITY_ATTRIBUTE_SYSTEM_TEMPLATE),
             (f, cls, "DEFAULT_EXAMPLE_PROMPT", AG.ENTITY_ATTRIBUTE_EXAMPLE_PROMPT),
             (f, cls, "DEFAULT_INPUT_TEMPLATE", AG.ENTITY_ATTRIBUTE_INPUT_TEMPLATE),
             (f, cls, "DEFAULT_OUTPUT_PATTERN_TEMPLATE", AG.ENTITY_ATTRIBUTE_OUTPUT_PATTERN_TEMPLATE)]
    assert D.language_note("zh", "intent")
    rows += issue28_part_b()
    return rows


def issue28_part_b():
    """llm_condition_filter, llm_extract_mapper, pii_llm_suspect_mapper, relation_identity_mapper,
    text_tagging_by_prompt_mapper, image_tagging_vlm_mapper, video_captioning_from_vlm_mapper."""
    from gristmill.ops.llm import _semantic as S, pii_suspect as PII, relation_identity as R, tagging as T, vlm as V
    f = "../utils/llm_semantic_ops.py"
    rows = [(f, "", "DEFAULT_EXTRACT_SYSTEM", S.EXTRACT_SYSTEM), (f, "", "DEFAULT_CONDITION_SYSTEM", S.CONDITION_SYSTEM)]
    for kind, templates in (("EXTRACT", S.EXTRACT_TEMPLATES), ("CONDITION", S.CONDITION_TEMPLATES)):
        for strategy, name in (("direct", "USER"), ("cot", "COT"), ("few_shot", "FEW_SHOT"), ("cot_shot", "COT_SHOT")):
            rows.append((f, "", f"DEFAULT_{kind}_{name}_TEMPLATE", templates[strategy]))
    f = "mapper/pii_llm_suspect_mapper.py"
    rows += [(f, "", "DEFAULT_SYSTEM_PROMPT", PII.SYSTEM_PROMPT), (f, "", "DEFAULT_SYSTEM_PROMPT_EN", PII.SYSTEM_PROMPT_EN),
             (f, "", "DEFAULT_REDACTION_PLACEHOLDER", PII.REDACTION_PLACEHOLDER)]
    f, cls = "mapper/relation_identity_mapper.py", "RelationIdentityMapper"
    rows += [(f, cls, "DEFAULT_SYSTEM_PROMPT_TEMPLATE", R.SYSTEM_PROMPT_TEMPLATE),
             (f, cls, "DEFAULT_INPUT_TEMPLATE", R.INPUT_TEMPLATE),
             (f, cls, "DEFAULT_OUTPUT_PATTERN_TEMPLATE", R.OUTPUT_PATTERN_TEMPLATE)]
    f = "mapper/text_tagging_by_prompt_mapper.py"
    rows += [(f, "", f"DEFAULT_{k}", getattr(T, k)) for k in ("CLASSIFICATION_PROMPT", "CLASSIFICATION_LIST",
                                                              "IDENTITY_BINARY_PROMPT", "BINARY_LIST")]
    f, cls = "mapper/image_tagging_vlm_mapper.py", "ImageTaggingVLMMapper"
    rows += [(f, cls, "DEFAULT_SYSTEM_PROMPT", V.IMAGE_TAG_SYSTEM_PROMPT),
             (f, cls, "DEFAULT_INPUT_TEMPLATE", V.IMAGE_TAG_INPUT_TEMPLATE),
             ("mapper/video_captioning_from_vlm_mapper.py", "", "DEFAULT_PROMPT", V.VIDEO_CAPTION_PROMPT)]
    return rows


# Data-Juicer renders the messages of these rows with its own code (run in its venv), gristmill with its ops
RENDER_ROWS = [
    {"text": "Call Mr Smith at 13812345678 tomorrow, the meeting is about the budget review.", "query": "  ",
     "response": "ok", "bg": "Rivers are water.", "messages": [
         {"role": "system", "content": "sys"},
         {"role": "user", "content": [{"type": "text", "text": "my key is sk-abcdefghijklmnopqrstuvwxyz"}, "plain"]},
         {"role": "assistant", "content": "noted"}]},
    {"text": "李莲花笑着说：“方小宝，过来。” 我叫张三想咨询", "bg": None},
    {"text": "hello world how are you", "response": "x" * 7000},
]
DJ_RENDER = r"""
import json, sys
from data_juicer.utils.llm_semantic_ops import get_condition_prompt, get_extract_prompt, InferenceStrategy as S
from data_juicer.ops.mapper.pii_llm_suspect_mapper import PiiLlmSuspectMapper
from data_juicer.ops.mapper.relation_identity_mapper import RelationIdentityMapper
from data_juicer.ops.mapper.text_tagging_by_prompt_mapper import DEFAULT_CLASSIFICATION_PROMPT, DEFAULT_CLASSIFICATION_LIST
rows = json.loads(sys.stdin.read())
pii = PiiLlmSuspectMapper(api_model="m", max_chars_per_field=200, max_messages_for_prompt=2)
rel = RelationIdentityMapper(api_model="m", source_entity="李莲花", target_entity="方多病")
out = []
for r in rows:
    kg = str(r["bg"]) if r.get("bg") is not None else None
    block, used = pii._assemble_user_block(r)
    out.append({
        "condition": [get_condition_prompt(r["text"], "mentions a river", kg, s, "EX") for s in S],
        "extract": [get_extract_prompt("\n".join(f"{k}: {r[k]}" for k in ("text", "query") if r.get(k) is not None),
                                       {"river": "the river", "year": "the year"}, kg, s, "EX") for s in S],
        "pii": [block, used, pii._heuristic_allow_llm(block)],
        "relation": [rel.system_prompt, rel.input_template.format(entity1="李莲花", entity2="方多病", text=r["text"])],
        "tagging": DEFAULT_CLASSIFICATION_PROMPT.format(text=r["text"], tag_list=DEFAULT_CLASSIFICATION_LIST)})
print(json.dumps(out, ensure_ascii=False))
"""


def ours_rendered() -> list[dict]:
    from gristmill.registry import create_op
    cond = create_op("llm_condition_filter", {"condition": "mentions a river", "knowledge_grounding_key": "bg"})
    ext = create_op("llm_extract_mapper", {"input_keys": ["text", "query"], "knowledge_grounding_key": "bg",
                                           "output_schema": {"river": "the river", "year": "the year"}})
    pii = create_op("pii_llm_suspect_mapper", {"max_chars_per_field": 200, "max_messages_for_prompt": 2})
    rel = create_op("relation_identity_mapper", {"source_entity": "李莲花", "target_entity": "方多病"})
    tag = create_op("text_tagging_by_prompt_mapper", {})
    out = []
    for r in RENDER_ROWS:
        block, used = pii.user_block(r)
        cp, ep = [], []
        for s in ("direct", "cot", "few_shot", "cot_shot"):
            cond.params.strategy = ext.params.strategy = s
            cond.params.examples = ext.params.examples = "EX"
            cp.append(cond.messages(r["text"], r)[1]["content"])
            ep.append(ext.messages(r)[1]["content"])
        out.append({"condition": cp, "extract": ep, "pii": [block, used, pii.gate_open(block)],
                    "relation": [m["content"] for m in rel.messages(r)], "tagging": tag.messages(r)[0]["content"]})
    return out


def compare_rendered(dj_python: str) -> tuple[int, int]:
    """(same, differ) over the rendered messages of RENDER_ROWS."""
    import json
    import subprocess
    proc = subprocess.run([dj_python, "-c", DJ_RENDER], input=json.dumps(RENDER_ROWS), capture_output=True,
                          text=True, timeout=600, env={**os.environ, "OPENAI_API_KEY": "x"})
    if proc.returncode:
        print(f"(Data-Juicer could not render: {proc.stderr.strip().splitlines()[-1:]})")
        return 0, 0
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    same = differ = 0
    for i, (a, b) in enumerate(zip(theirs, ours_rendered())):
        for k in a:
            ok = a[k] == b[k]
            same += ok
            differ += not ok
            print(f"{'same' if ok else 'DIFFERS':8} row {i} {k} messages")
    return same, differ


def main() -> None:
    ap = argparse.ArgumentParser()
    found = glob.glob("/tmp/peers/dj/lib/python*/site-packages/data_juicer")
    ap.add_argument("--dj", default=found[0] if found else None, help="data_juicer package directory (1.6.1)")
    a = ap.parse_args()
    if not a.dj:
        sys.exit("no Data-Juicer sources: pip download py-data-juicer==1.6.1 --no-deps, unzip, pass --dj")
    same = differ = 0
    for f, cls, const, mine in ours():
        theirs = dj_constants(os.path.join(a.dj, "ops", f)).get(cls, {}).get(const)
        ok = theirs == (list(mine) if isinstance(theirs, list) else mine)
        same += ok
        differ += not ok
        print(f"{'same' if ok else 'DIFFERS':8} {cls or os.path.basename(f)}.{const}")
    from llm_dj_prompts_agent import compare as compare_agent  # dialog judges, agent insights: not DEFAULT_*
    s3, d3 = compare_agent(a.dj)
    same, differ = same + s3, differ + d3
    print(f"\n{same} of {same + differ} prompts, templates and patterns identical to Data-Juicer's")
    dj_python = os.path.join(a.dj.split("/lib/python")[0], "bin", "python")
    if os.path.exists(dj_python):
        s2, d2 = compare_rendered(dj_python)
        print(f"{s2} of {s2 + d2} rendered messages (Data-Juicer's own code for the same rows) identical")
        differ += d2
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
