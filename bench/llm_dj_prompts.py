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
    out: dict[str, dict[str, object]] = {}
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
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
    return rows


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
        print(f"{'same' if ok else 'DIFFERS':8} {cls}.{const}")
    print(f"\n{same} of {same + differ} prompts, templates and patterns identical to Data-Juicer's")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
