"""A tokenizer's own chat template (``tokenizer_config.json`` → ``chat_template``, Jinja), rendered the way
Hugging Face's ``apply_chat_template`` renders it: a sandboxed, immutable Jinja environment with
``trim_blocks``/``lstrip_blocks``, loop controls, the ``tojson`` filter that keeps non-ASCII text,
``raise_exception``, ``strftime_now``, and the tokenizer's special tokens (``bos_token``, ``eos_token``...)
as variables. The template is user data: the sandbox keeps it from reaching Python internals."""
from __future__ import annotations

import json
import os
from datetime import datetime

SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
                "additional_special_tokens")


def read_tokenizer_config(path: str) -> dict:
    """``tokenizer_config.json`` of a tokenizer directory (or that file itself)."""
    f = os.path.join(path, "tokenizer_config.json") if os.path.isdir(path) else path
    try:
        with open(f, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as e:
        raise ValueError(f"cannot read the tokenizer config {f!r}: {e.strerror}") from None
    except ValueError as e:
        raise ValueError(f"{f}: not JSON ({e})") from None


def template_of(config: dict, name: str | None = None, where: str = "tokenizer_config.json") -> str:
    """The chat template string: ``chat_template`` is a string, or a list of {name, template} (then
    ``name``, default 'default')."""
    t = config.get("chat_template")
    if isinstance(t, list):
        want = name or "default"
        named = {x.get("name"): x.get("template") for x in t if isinstance(x, dict)}
        if want not in named:
            raise ValueError(f"{where}: no chat template named {want!r} (has {sorted(named)})")
        t = named[want]
    if not isinstance(t, str) or not t:
        raise ValueError(f"{where} has no chat_template")
    return t


def special_tokens(config: dict) -> dict:
    """The special tokens a template may use, by name, as strings (an AddedToken dict gives its content)."""
    out = {}
    for k in SPECIAL_KEYS:
        v = config.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if v is not None:
            out[k] = v
    return out


def compile_template(source: str):
    """The compiled template, in the sandbox (ImmutableSandboxedEnvironment) with HF's settings."""
    import jinja2
    import jinja2.ext
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        """``{% generation %}…{% endgeneration %}`` marks assistant text for a loss mask: rendered as is."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise ValueError(f"chat template: Jinja syntax error line {e.lineno}: {e.message}") from None


def render(template, messages: list[dict], specials: dict) -> str:
    """One conversation (``[{role, content}]``) through the template, without a generation prompt."""
    return template.render(messages=messages, tools=None, documents=None, add_generation_prompt=False, **specials)
