"""Data-Juicer 1.6.1's 1-5 LLM judges of a dialog's last assistant turn, one chat per row through gristmill's
LLM client: ``dialog_memory_consistency_mapper``, ``dialog_coreference_mapper``, ``dialog_topic_shift_mapper``,
``dialog_error_recovery_mapper``, ``dialog_clarification_quality_mapper``, ``dialog_proactivity_mapper`` and
``dialog_non_repetition_mapper``. They differ only in their rubric (the system prompt) and the meta field
they write; the asking, the answer's JSON and the record are the agent-trace judges' (``QualityJudge`` in
``gristmill/ops/agent/trace_quality.py``: Data-Juicer's shared base of both families).

The user message shows the dialog's last ``max_round`` turns (``dialog_history``'s [query, response] pairs,
then ``query``/``response`` unless they repeat the last pair): the earlier ones under ``### Earlier turns``,
then the current user message and the assistant reply to score, each clipped to
``max_query_chars_for_prompt`` / ``max_response_chars_for_prompt``. The answer's ``{"score", "reason"}`` goes
to ``meta.<key>`` as ``{score (clamped to 1..5), reason, eval_kind: "dialog_turn"}``; a row with no turn gets
``{skipped: true, reason: "empty_input"}``, an answer without JSON ``{error: "json_parse_failed", raw}``, one
whose score is no number ``{error: "bad_score", reason}``, an answer still empty after ``try_num`` requests
``{error: "empty_llm_response"}`` (one struct type: the keys a record lacks are null). A request that fails
after the client's retries rejects its row (Data-Juicer records it as an empty answer)."""
from __future__ import annotations

from ...registry import register
from ..agent.trace_quality import QualityJudge, clip
from .dialog import dialog_turns

EARLIER_TURN = "[User]\n{query}\n[Assistant]\n{response}\n"
USER_TEMPLATE = ("### Earlier turns\n{earlier}### Current user message\n{query}\n"
                 "### Assistant reply to score (evaluate this segment only)\n{response}\n")

MEMORY_CONSISTENCY_RUBRIC = (
    "You are a dialog-quality judge. From the text only: does the "
    "**Assistant reply to score** honor preferences, constraints, and "
    "stated facts from earlier turns? Any clear forgetting or "
    "self-contradiction lowers the score.\n"
    "1 = severe violation or forgetting; 3 = mostly OK with gaps; "
    "5 = key constraints respected.\n"
    "Do not invent facts that are not supported by the transcript.")
COREFERENCE_RUBRIC = (
    "You judge coreference. Using the **Current user message**, check "
    "whether the **Assistant reply to score** picks the right referents "
    "(may rely on earlier turns).\n"
    "1 = clear mis-resolution; 3 = understandable but ambiguous; "
    "5 = crisp and correct.")
TOPIC_SHIFT_RUBRIC = (
    "Step A: From Earlier turns vs the **Current user message**, decide "
    "whether the user **clearly changed topic** compared to their "
    "immediately preceding user turns.\n"
    "Step B: If there is **no** clear topic shift, score **only** whether "
    "the Assistant reply addresses the current message (3–5 if on-topic "
    "and reasonable; 1–2 only if clearly irrelevant). Do **not** say the "
    "assistant is 'stuck on an old topic' unless the user actually "
    "pivoted topics.\n"
    "If the user **did** shift topic: score whether the reply pivots to "
    "the new ask instead of the obsolete thread.\n"
    "1 = wrong focus when a pivot was needed, or clearly off-topic; "
    "5 = clean pivot or tight alignment with the current ask.")
ERROR_RECOVERY_RUBRIC = (
    "If the transcript shows the user **explicitly** correcting or "
    "disputing an **earlier assistant** mistake, score whether the "
    "**Assistant reply to score** acknowledges professionally, fixes "
    "the issue, and keeps a respectful tone.\n"
    "**Mandatory:** If there is **no** such correction/dispute context "
    "in Earlier turns + Current user message, output **score 5** and "
    "state in `reason` that there was no error-recovery scenario. "
    "Do **not** output 1–3 merely because the reply lacks an apology or "
    "because no error was visible.\n"
    "1 = denial or hostile tone when a fix was needed; 5 = clear, "
    "correct fix when a fix was needed.")
CLARIFICATION_QUALITY_RUBRIC = (
    "When the user request is vague or missing key parameters, check "
    "whether the assistant asks **few, targeted** clarifications "
    "instead of guessing wildly or over-questioning.\n"
    "When the request is already actionable, completing it directly "
    "deserves a high score.\n"
    "Short follow-ups (e.g. status checks like 'any progress?') often do "
    "**not** require new clarifying questions—a concise progress or "
    "next-step answer can merit 3–5 unless critical parameters are "
    "obviously missing.\n"
    "1 = should clarify but does not, or answers blindly; 5 = right "
    "clarifications or a one-shot good answer.")
PROACTIVITY_RUBRIC = (
    "Score whether the reply moves the dialog forward **without excess**: "
    "sensible next steps, relevant additions, brief follow-ups.\n"
    "1 = one-shot mechanical or fully passive; 5 = proactive yet "
    "restrained and useful for the user's goal.\n"
    "Penalize empty filler and off-topic digressions.")
NON_REPETITION_RUBRIC = (
    "Compare with assistant content in **Earlier turns**: does the "
    "**Assistant reply to score** mostly repeat prior messages without "
    "new information?\n"
    "1 = near-duplicate of earlier assistant text; 5 = substantive "
    "new facts, conclusions, or progress.\n"
    "Ignore small amounts of polite boilerplate repetition.")


class DialogTurnJudge(QualityJudge):
    """A judge of the dialog's last assistant turn, given the earlier turns (Data-Juicer's
    ``_DialogTurnQualityMapper``)."""

    EVAL_KIND = "dialog_turn"
    inputs = ("{history_key}?", "{query_key}?", "{response_key}?")

    def user_content(self, row: dict) -> str:
        p = self.params
        turns = dialog_turns(row, p.history_key, p.query_key, p.response_key)
        if p.max_round > 0:
            turns = turns[-p.max_round:]
        if not turns:
            return ""
        shown = [(clip(q, p.max_query_chars_for_prompt, "query truncated"),
                  clip(r, p.max_response_chars_for_prompt, "response truncated")) for q, r in turns]
        earlier = "".join(EARLIER_TURN.format(query=q, response=r) for q, r in shown[:-1])
        return USER_TEMPLATE.format(earlier=earlier, query=shown[-1][0], response=shown[-1][1])


@register("dialog_memory_consistency_mapper")
class DialogMemoryConsistencyMapper(DialogTurnJudge):
    """A 1-5 LLM judgement of whether the last assistant turn keeps the user's earlier constraints, preferences
    and facts, into ``meta.dialog_memory_consistency``."""

    META_KEY, SYSTEM = "dialog_memory_consistency", MEMORY_CONSISTENCY_RUBRIC
    outputs = ("meta.dialog_memory_consistency",)


@register("dialog_coreference_mapper")
class DialogCoreferenceMapper(DialogTurnJudge):
    """A 1-5 LLM judgement of whether the last assistant turn resolves the pronouns and references of the user's
    latest message, into ``meta.dialog_coreference``."""

    META_KEY, SYSTEM = "dialog_coreference", COREFERENCE_RUBRIC
    outputs = ("meta.dialog_coreference",)


@register("dialog_topic_shift_mapper")
class DialogTopicShiftMapper(DialogTurnJudge):
    """A 1-5 LLM judgement of whether the last assistant turn follows a change of topic (or, without one, keeps
    to the current message), into ``meta.dialog_topic_shift``."""

    META_KEY, SYSTEM = "dialog_topic_shift", TOPIC_SHIFT_RUBRIC
    outputs = ("meta.dialog_topic_shift",)


@register("dialog_error_recovery_mapper")
class DialogErrorRecoveryMapper(DialogTurnJudge):
    """A 1-5 LLM judgement of how the last assistant turn answers a user disputing an earlier mistake (5 when
    there is no dispute), into ``meta.dialog_error_recovery``."""

    META_KEY, SYSTEM = "dialog_error_recovery", ERROR_RECOVERY_RUBRIC
    outputs = ("meta.dialog_error_recovery",)


@register("dialog_clarification_quality_mapper")
class DialogClarificationQualityMapper(DialogTurnJudge):
    """A 1-5 LLM judgement of the last assistant turn's clarifying questions on a vague request (or its direct
    answer to a clear one), into ``meta.dialog_clarification_quality``."""

    META_KEY, SYSTEM = "dialog_clarification_quality", CLARIFICATION_QUALITY_RUBRIC
    outputs = ("meta.dialog_clarification_quality",)


@register("dialog_proactivity_mapper")
class DialogProactivityMapper(DialogTurnJudge):
    """A 1-5 LLM judgement of whether the last assistant turn moves the dialog forward without rambling, into
    ``meta.dialog_proactivity``."""

    META_KEY, SYSTEM = "dialog_proactivity", PROACTIVITY_RUBRIC
    outputs = ("meta.dialog_proactivity",)


@register("dialog_non_repetition_mapper")
class DialogNonRepetitionMapper(DialogTurnJudge):
    """A 1-5 LLM judgement of whether the last assistant turn brings new information rather than repeating the
    earlier assistant turns, into ``meta.dialog_non_repetition``."""

    META_KEY, SYSTEM = "dialog_non_repetition", NON_REPETITION_RUBRIC
    outputs = ("meta.dialog_non_repetition",)
