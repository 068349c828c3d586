"""audEERING's age/gender model (``audeering/wav2vec2-large-robust-24-ft-age-gender``): a wav2vec2 encoder whose
hidden states, averaged over time, feed two heads (dense, tanh, projection): ``age`` (1 output, age / 100) and
``gender`` (3 outputs, softmaxed: female, male, child). The architecture as its model card defines it, with the
checkpoint's weight names (``wav2vec2.*``, ``age.dense``, ``age.out_proj``, ``gender.*``), so the published
weights load with ``from_pretrained`` and no remote code runs. Imports torch and transformers: load lazily."""
from __future__ import annotations

import torch
from torch import nn
from transformers import Wav2Vec2Model, Wav2Vec2PreTrainedModel


class ModelHead(nn.Module):
    def __init__(self, config, num_labels: int):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(getattr(config, "final_dropout", 0.0))
        self.out_proj = nn.Linear(config.hidden_size, num_labels)

    def forward(self, x):
        x = torch.tanh(self.dense(self.dropout(x)))
        return self.out_proj(self.dropout(x))


class AgeGenderModel(Wav2Vec2PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.wav2vec2 = Wav2Vec2Model(config)
        self.age = ModelHead(config, 1)
        self.gender = ModelHead(config, 3)
        self.post_init()

    def forward(self, input_values):
        hidden = self.wav2vec2(input_values)[0].mean(dim=1)
        return hidden, self.age(hidden), torch.softmax(self.gender(hidden), dim=1)
