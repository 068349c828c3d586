"""The language-model loss Data-Juicer's perplexity-family filters compute (``llm_perplexity_filter``'s
``_loss``), batched: the messages' contents joined by spaces, tokenized with left truncation at
``model_params.max_length``; only the last message's tokens (its own tokenization's length, less one when the
tokenizer has a BOS token) count in the mean next-token cross entropy. Sequences of a batch are right-padded
under the attention mask (a causal model's logits on the real tokens do not change), so each loss is the one
of the text alone, to float precision."""
from __future__ import annotations

import numpy as np

from ...core import trust
from ...media import inference as inf


def messages_of(row: dict, query_template: str, response_template: str, system_prompt: str | None = None) -> list:
    """Data-Juicer's ``sample_with_messages``: the row's own ``messages`` when it has them, else a user turn
    (``query_template``) and an assistant turn (``response_template``), both formatted with the row's fields,
    after a system turn when ``system_prompt`` is given."""
    msgs = row.get("messages")
    if msgs is not None:
        return [dict(m) for m in msgs]
    fields = {k: v for k, v in row.items() if isinstance(k, str)}
    out = [{"role": "user", "content": query_template.format(**fields)},
           {"role": "assistant", "content": response_template.format(**fields)}]
    return ([{"role": "system", "content": system_prompt}] + out) if system_prompt is not None else out


class CausalLoss:
    """A causal LM and its tokenizer; ``losses(list of message lists) -> float64 array``."""

    def __init__(self, ref: str, device: str, model_params: dict | None, batch_size: int):
        import torch
        import transformers
        inf._quiet_transformers()
        if inf.model_threads():
            torch.set_num_threads(inf.model_threads())
        mp = dict(model_params or {})
        self.max_length = mp.get("max_length")
        path = inf.model_dir(ref)
        kw = {"local_files_only": True, "trust_remote_code": trust.remote_code_allowed(bool(mp.get("trust_remote_code")))}
        self.tok = transformers.AutoTokenizer.from_pretrained(path, **kw)
        self.tok.truncation_side = "left"
        self.model = transformers.AutoModelForCausalLM.from_pretrained(path, **kw)
        self.model = self.model.to(inf.pick_device(mp.get("device") or device)).eval()
        self.batch_size = batch_size

    def _ids(self, text: str) -> list[int]:
        kw = {"max_length": self.max_length, "truncation": True} if self.max_length else {}
        return list(self.tok(text, **kw)["input_ids"])

    def encode(self, msgs: list[dict]) -> tuple[list[int], list[int]]:
        """(input ids, labels) of one message list, as Data-Juicer builds them (-100: not scored)."""
        full = " ".join(str(m["content"]) for m in msgs).strip()
        ids = self._ids(full)
        n_resp = len(self._ids(str(msgs[-1]["content"]).strip())) - int(self.tok.bos_token_id is not None)
        labels = list(ids)
        cut = labels[:-n_resp]  # Python's slice, as Data-Juicer's tensor slice (n_resp 0: nothing masked)
        labels[:len(cut)] = [-100] * len(cut)
        return ids, labels

    def losses(self, items: list[list[dict]]) -> np.ndarray:
        import torch
        enc = [self.encode(m) for m in items]
        out = np.full(len(enc), np.nan)
        order = sorted(range(len(enc)), key=lambda i: len(enc[i][0]))
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        dev = self.model.device
        with torch.inference_mode():
            for s in range(0, len(order), self.batch_size):
                part = order[s:s + self.batch_size]
                width = max(len(enc[i][0]) for i in part)
                ids = torch.full((len(part), width), pad, dtype=torch.long)
                lab = torch.full((len(part), width), -100, dtype=torch.long)
                att = torch.zeros((len(part), width), dtype=torch.long)
                for r, i in enumerate(part):
                    n = len(enc[i][0])
                    ids[r, :n] = torch.tensor(enc[i][0])
                    lab[r, :n] = torch.tensor(enc[i][1])
                    att[r, :n] = 1
                logits = self.model(input_ids=ids.to(dev), attention_mask=att.to(dev)).logits.float()
                target = lab[:, 1:].to(dev)
                ce = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), target, ignore_index=-100,
                                                       reduction="none")
                n_tok = (target != -100).sum(dim=1)
                loss = (ce.sum(dim=1) / n_tok).double().cpu().numpy()
                out[part] = loss
        return out
