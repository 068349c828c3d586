"""Data-Juicer 1.6.1's prompts of its dialog-quality judges and agent insight mappers against gristmill's
(part of bench/llm_dj_prompts.py; runs alone too). Their texts are not ``DEFAULT_*`` constants but what a
method or a function returns (``_system_prompt()``, ``agent_insight_system_prompt(lang)``: the zh branch,
then the en one), f-strings (compared as templates, ``{}`` for each field), regexes passed to ``re`` and
strings assigned in a function; all read from Data-Juicer's sources (no import).

    python bench/llm_dj_prompts_agent.py [--dj /path/to/site-packages/data_juicer]
"""
from __future__ import annotations

import argparse
import ast
import glob
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _template(node: ast.JoinedStr) -> str:
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def _in_order(nodes):
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def dj_strings(path: str) -> dict[str, object]:
    """Per function or method (``name`` / ``Class.name``): ``name()#i`` its i-th literal return (source order),
    ``name/f#i`` its i-th f-string as a template, ``name/re#i`` the i-th literal pattern given to ``re.*``,
    ``name:var#i`` the i-th literal assigned to ``var``; and module constants by name."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out: dict[str, object] = {}
    for st in tree.body:
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
            try:
                out[st.targets[0].id] = ast.literal_eval(st.value)
            except ValueError:
                pass
    funcs = [(f.name, f) for f in tree.body if isinstance(f, ast.FunctionDef)]
    funcs += [(f"{c.name}.{f.name}", f) for c in tree.body if isinstance(c, ast.ClassDef)
              for f in c.body if isinstance(f, ast.FunctionDef)]
    for name, fn in funcs:
        nodes = list(ast.walk(fn))
        returns = [n for n in _in_order(n for n in nodes if isinstance(n, ast.Return))
                   if isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)]
        for i, r in enumerate(returns):
            out[f"{name}()#{i}"] = r.value.value
        for i, j in enumerate(_in_order(n for n in nodes if isinstance(n, ast.JoinedStr))):
            out[f"{name}/f#{i}"] = _template(j)
        calls = [n for n in _in_order(n for n in nodes if isinstance(n, ast.Call))
                 if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == "re"
                 and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)]
        for i, c in enumerate(calls):
            out[f"{name}/re#{i}"] = c.args[0].value
        seen: dict[str, int] = {}
        for a in _in_order(n for n in nodes if isinstance(n, ast.Assign)):
            if isinstance(a.targets[0], ast.Name) and isinstance(a.value, ast.Constant) and \
                    isinstance(a.value.value, str):
                k = a.targets[0].id
                out[f"{name}:{k}#{seen.get(k, 0)}"] = a.value.value
                seen[k] = seen.get(k, 0) + 1
    return out


def ours() -> list[tuple[str, str, object]]:
    """(Data-Juicer file under data_juicer/, key as dj_strings names it, gristmill's text)."""
    from gristmill.ops.agent import trace_quality as T
    from gristmill.ops.llm import agent_insight as A, dialog_quality as Q
    rows = []
    for op, rubric in (("memory_consistency", Q.MEMORY_CONSISTENCY_RUBRIC), ("coreference", Q.COREFERENCE_RUBRIC),
                       ("topic_shift", Q.TOPIC_SHIFT_RUBRIC), ("error_recovery", Q.ERROR_RECOVERY_RUBRIC),
                       ("clarification_quality", Q.CLARIFICATION_QUALITY_RUBRIC), ("proactivity", Q.PROACTIVITY_RUBRIC),
                       ("non_repetition", Q.NON_REPETITION_RUBRIC)):
        cls = "Dialog" + "".join(w.title() for w in op.split("_")) + "Mapper"
        rows.append((f"ops/mapper/dialog_{op}_mapper.py", f"{cls}._system_prompt()#0", rubric))
    f = "utils/agent_output_locale.py"
    rows += [(f, "_JSON_SCHEMA_EN", T.JSON_EN), (f, "_JSON_SCHEMA_ZH", T.JSON_ZH),
             (f, "rubric_reason_language_clause()#0", T.REASON_ZH),
             (f, "rubric_reason_language_clause()#1", T.REASON_EN),
             (f, "agent_insight_system_prompt()#0", A.INSIGHT_PROMPT_ZH),
             (f, "agent_insight_system_prompt()#1", A.INSIGHT_PROMPT_EN),
             (f, "agent_skill_insight_system_prompt()#0", A.SKILL_PROMPT_ZH),
             (f, "agent_skill_insight_system_prompt()#1", A.SKILL_PROMPT_EN)]

    def template(t: str) -> str:
        return re.sub(r"\{\w*\}", "{}", t)
    f = "ops/mapper/dialog_quality_llm_utils.py"
    rows += [(f, "build_dialog_turn_eval_user_content/f#0", template(Q.EARLIER_TURN)),
             (f, "build_dialog_turn_eval_user_content/f#1", template(Q.USER_TEMPLATE))]
    f = "ops/mapper/agent_skill_insight_mapper.py"
    rows += [(f, "AgentSkillInsightMapper.process_single/f#0", template(A.SKILL_USER_TEMPLATE)),
             (f, "AgentSkillInsightMapper.process_single/re#0", A.SKILL_SPLIT)]
    f = "ops/mapper/agent_insight_llm_mapper.py"
    rows += [(f, "AgentInsightLLMMapper.process_single:headline#0", A.PARSE_FAILED_HEADLINE["zh"]),
             (f, "AgentInsightLLMMapper.process_single:headline#1", A.PARSE_FAILED_HEADLINE["en"]),
             (f, "AgentInsightLLMMapper.process_single:audit#0", A.PARSE_FAILED_AUDIT),
             (f, "_parse_llm_json/re#0", A.INSIGHT_JSON_PATTERN)]
    return rows


def compare(dj: str) -> tuple[int, int]:
    """(same, differ), each row printed."""
    same = differ = 0
    cache: dict[str, dict] = {}
    for f, key, mine in ours():
        path = os.path.join(dj, f)
        theirs = (cache.setdefault(path, dj_strings(path)) if os.path.exists(path) else {}).get(key)
        ok = theirs == mine
        same += ok
        differ += not ok
        print(f"{'same' if ok else 'DIFFERS':8} {os.path.basename(f)}: {key}")
    return same, differ


def main() -> None:
    ap = argparse.ArgumentParser()
    found = glob.glob("/tmp/peers/dj/lib/python*/site-packages/data_juicer")
    ap.add_argument("--dj", default=found[0] if found else None, help="data_juicer package directory (1.6.1)")
    a = ap.parse_args()
    if not a.dj:
        sys.exit("no Data-Juicer sources: pip download py-data-juicer==1.6.1 --no-deps, unzip, pass --dj")
    same, differ = compare(a.dj)
    print(f"\n{same} of {same + differ} dialog-judge and agent-insight prompts, templates and patterns identical "
          f"to Data-Juicer's")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
