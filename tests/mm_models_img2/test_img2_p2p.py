"""sdxl_prompt2prompt_mapper on a tiny random SDXL pipeline saved with save_pretrained: Prompt-to-Prompt's token
alignment and word weights, the edit leaving the first prompt's image as the plain pipeline makes it and changing
the second's, files named by the prompts and params."""
import numpy as np
import pytest
import torch
from PIL import Image

from gristmill.ops.image.model_p2p import cross_alpha, global_align, prompt2prompt, refinement_mapper
from gristmill.registry import OpError, create_op
from img2_util import build_sdxl

pytest.importorskip("diffusers")


def test_alignment_and_word_weights():
    # prompt 2 inserts one token (9) and replaces one (5 → 7)
    # (a mismatch scores below two gaps: the replaced token is aligned to nothing)
    assert global_align([0, 3, 4, 5, 1], [0, 3, 9, 4, 7, 1]) == [(0, 0), (1, 1), (2, -1), (3, 2), (4, -1), (5, 4)]
    mapper, alphas = refinement_mapper([0, 3, 4, 5, 1], [0, 3, 9, 4, 7, 1], 8)
    assert mapper.tolist() == [0, 1, -1, 2, -1, 4, 6, 7] and alphas.tolist() == [1, 1, 0, 1, 0, 1, 1, 1]

    class Tok:  # one token per character, between start and end tokens
        def encode(self, text):
            return [0] + [ord(c) for c in text.replace(" ", "")] + [1]

        def decode(self, ids):
            return "".join(chr(i) for i in ids)
    a = cross_alpha("a confetti b", 4, {"default_": 1.0, "confetti": 0.8}, Tok(), 16)
    assert a.shape == (5, 16) and a[:, 0].tolist() == [1] * 5
    assert a[:, 2].tolist() == [1, 1, 1, 1, 0] and a[:, 9].tolist() == [1, 1, 1, 1, 0] and a[:, 10].tolist() == [1] * 5


@pytest.fixture(scope="module")
def sdxl(tmp_path_factory):
    return build_sdxl(tmp_path_factory.mktemp("sdxl"))


def test_pairs_of_images(sdxl, tmp_path):
    op = create_op("sdxl_prompt2prompt_mapper", {"hf_diffusion": sdxl, "text_key_second": "caption2",
                                                 "num_inference_steps": 2, "output_dir": str(tmp_path),
                                                 "device": "cpu"})
    rows = [{"text": "a cat on a mat", "caption2": "a dog on a mat"}]
    out = op.apply(rows)
    p1, p2 = out[0]["image_path1"], out[0]["image_path2"]
    assert p1.startswith(str(tmp_path / "__dj__produced_data__" / "sdxl_prompt2prompt_mapper")) and p1.endswith("_1.jpg")
    a, b = (np.asarray(Image.open(p), np.int16) for p in (p1, p2))
    assert a.shape == (64, 64, 3) and np.abs(a - b).max() > 0
    assert op.apply(rows) == out  # a rerun names (and finds) the same files
    # the edit changes only the second image: the first is the plain pipeline's for the same latents
    # (same batch, same attention arithmetic)
    pipe = op.resource("pipe", None)
    edited = prompt2prompt(pipe, ["a cat on a mat", "a dog on a mat"], 7, 2, 7.5)
    from diffusers.models.attention_processor import AttnProcessor
    saved = pipe.unet.attn_processors
    pipe.unet.set_attn_processor(AttnProcessor())  # explicit attention probabilities, as the edit computes them
    gen = torch.Generator().manual_seed(7)
    lat = torch.randn((1, 4, 8, 8), generator=gen)
    plain = pipe(["a cat on a mat", "a dog on a mat"], num_inference_steps=2, guidance_scale=7.5,
                 latents=lat.repeat(2, 1, 1, 1),
                 generator=gen).images
    pipe.unet.set_attn_processor(saved)
    assert np.array_equal(np.asarray(edited[0]), np.asarray(plain[0]))
    assert not np.array_equal(np.asarray(edited[1]), np.asarray(plain[1]))
    with pytest.raises(OpError, match="text_key_second"):
        create_op("sdxl_prompt2prompt_mapper", {"hf_diffusion": sdxl})
