"""``text_tagging_by_prompt_mapper`` (Data-Juicer 1.6.1's): a tag for each text chosen by an instruction
model from ``tag_list`` (default: Data-Juicer's 13 task categories, with its Chinese prompt). Data-Juicer
loads ``hf_model`` in the worker (vLLM, or a transformers pipeline); gristmill sends the same single user
message to that model served behind an OpenAI-compatible endpoint (``vllm serve Qwen/Qwen2.5-7B-Instruct``),
or, with ``is_hf_model: true`` (gristmill), runs it in the worker with transformers as the other ops'
``is_hf_model`` does. The prompt is formatted as Data-Juicer formats it: ``{tag_list}`` is the Python list's
text (``['数学', '代码', …]``). The answer, stripped, is the row's one tag: ``__dj__text_tags__`` (a
one-item list, Data-Juicer's field), or the field ``tag_field`` names. No answer is parsed, so nothing is
asked twice; a request that fails for good rejects its row with the error."""
from __future__ import annotations

from pydantic import Field

from ...registry import register
from ._api import APIClientParams, LLMRowMapper

CLASSIFICATION_PROMPT = """
请对下面的example文本回复的任务类别进行检测,并进行分类。
备选的分类包括：{tag_list}。
只回复对应的分类,不回复其他内容。
example文本:
{text}
"""
CLASSIFICATION_LIST = ["数学", "代码", "翻译", "角色扮演", "开放领域问答", "特定领域问答", "提取", "生成", "头脑风暴",
                       "分类", "总结", "改写", "其他"]
IDENTITY_BINARY_PROMPT = """
检测下面的example文本的回复中是否包含人工智能模型的自我认知(例如表现出自己是一个AI人工助手)。
备选的分类包括：{tag_list}。
只回复对应的分类,不回复其他内容。

example文本:
{text}
"""
BINARY_LIST = ["是", "否"]
TEXT_TAGS = "__dj__text_tags__"


@register("text_tagging_by_prompt_mapper")
class TextTaggingByPromptMapper(LLMRowMapper):
    """Tag each text with the one category (of ``tag_list``) an instruction model answers for ``prompt``;
    the tag goes to ``__dj__text_tags__`` as a one-item list."""

    inputs = ("{text_key}",)
    outputs = ("{tag_field}",)

    class Params(APIClientParams):
        hf_model: str = Field("Qwen/Qwen2.5-7B-Instruct", description="Model name sent in each request (the served "
                              "model), or the local model with is_hf_model.")
        is_hf_model: bool = Field(False, description="Run hf_model in the worker with transformers (a local "
                                  "directory or a model-store name; the models extra) instead of asking an endpoint "
                                  "(gristmill).")
        trust_remote_code: bool = Field(False, description="Data-Juicer's model-loading switch: no effect here "
                                        "(remote code is never run).")
        prompt: str = Field(CLASSIFICATION_PROMPT, description="The user message, with {text} and {tag_list}.")
        tag_list: list[str] = Field(CLASSIFICATION_LIST, description="The categories offered.")
        enable_vllm: bool = Field(True, description="Data-Juicer's in-process vLLM switch: no effect (the model is "
                                  "served behind the endpoint, or run with is_hf_model).")
        tensor_parallel_size: int | None = Field(None, description="Data-Juicer's vLLM setting: no effect.")
        max_model_len: int | None = Field(None, description="Data-Juicer's vLLM setting: no effect.")
        max_num_seqs: int = Field(256, description="Data-Juicer's vLLM setting: no effect.")
        tag_field: str = Field(TEXT_TAGS, description="Field the one-item tag list goes to (gristmill; "
                               "Data-Juicer's __dj__text_tags__).")
        try_num: int = Field(1, ge=1, description="Times a text is asked while its answer is empty (Data-Juicer "
                             "asks once).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        vllm, p.enable_vllm = p.enable_vllm, False  # Data-Juicer's default (True) means its own local vLLM
        try:
            self._init_api()
        finally:
            p.enable_vllm = vllm

    def model_name(self) -> str:
        return self.params.hf_model

    def messages(self, row: dict) -> list[dict]:
        p = self.params
        return [{"role": "user", "content": p.prompt.format(text=row.get(self.text_key), tag_list=p.tag_list)}]

    def parse(self, text: str):
        return text.strip()

    def parsed_ok(self, value) -> bool:
        return value is not None

    def apply_answer(self, row: dict, value) -> dict:
        row[self.params.tag_field] = [value or ""]
        return row
