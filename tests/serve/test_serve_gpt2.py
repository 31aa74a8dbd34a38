"""The GPT-2 model loads Hugging Face GPT-2-format weights as they are and computes GPT-2's logits.

The reference is GPT-2's math written out in torch (float64) over the same state dict, saved with the
names and layouts of a Hugging Face GPT-2 safetensors file (Conv1D weights [in, out], no lm_head, the
`attn.bias` mask buffers of the published files)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from safetensors.numpy import save_file

import rumus as rm
from rumus.serve.gpt2 import GPT2Config, GPT2LMHeadModel, load_checkpoint, save_checkpoint

torch = pytest.importorskip("torch")

CFG = GPT2Config(vocab_size=50, n_positions=24, n_embd=32, n_layer=2, n_head=4)


def hf_state(cfg: GPT2Config, seed: int = 0, prefix: str = "") -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    c = cfg.n_embd

    def w(*shape: int, s: float = 0.3) -> np.ndarray:
        return (r.standard_normal(shape) * s).astype(np.float32)

    st = {f"{prefix}wte.weight": w(cfg.vocab_size, c), f"{prefix}wpe.weight": w(cfg.n_positions, c),
          f"{prefix}ln_f.weight": 1 + w(c, s=0.1), f"{prefix}ln_f.bias": w(c, s=0.1)}
    for i in range(cfg.n_layer):
        p = f"{prefix}h.{i}."
        st.update({p + "ln_1.weight": 1 + w(c, s=0.1), p + "ln_1.bias": w(c, s=0.1),
                   p + "attn.c_attn.weight": w(c, 3 * c, s=0.2), p + "attn.c_attn.bias": w(3 * c, s=0.1),
                   p + "attn.c_proj.weight": w(c, c, s=0.2), p + "attn.c_proj.bias": w(c, s=0.1),
                   p + "ln_2.weight": 1 + w(c, s=0.1), p + "ln_2.bias": w(c, s=0.1),
                   p + "mlp.c_fc.weight": w(c, 4 * c, s=0.2), p + "mlp.c_fc.bias": w(4 * c, s=0.1),
                   p + "mlp.c_proj.weight": w(4 * c, c, s=0.2), p + "mlp.c_proj.bias": w(c, s=0.1),
                   # the causal-mask buffer Hugging Face's published GPT-2 files carry
                   p + "attn.bias": np.tril(np.ones((cfg.n_positions, cfg.n_positions), np.float32))[None, None]})
    return st


def torch_gpt2_logits(st: dict[str, np.ndarray], cfg: GPT2Config, ids: np.ndarray, prefix: str = "") -> np.ndarray:
    """GPT-2's forward pass, written out by hand in float64."""
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in st.items()}
    x = t[prefix + "wte.weight"][torch.tensor(ids)] + t[prefix + "wpe.weight"][: ids.shape[1]]
    n, hd = ids.shape[1], cfg.n_embd // cfg.n_head
    ln = torch.nn.functional.layer_norm
    for i in range(cfg.n_layer):
        p = f"{prefix}h.{i}."
        a = ln(x, (cfg.n_embd,), t[p + "ln_1.weight"], t[p + "ln_1.bias"], cfg.layer_norm_epsilon)
        q, k, v = (a @ t[p + "attn.c_attn.weight"] + t[p + "attn.c_attn.bias"]).split(cfg.n_embd, -1)
        q, k, v = (z.reshape(ids.shape[0], n, cfg.n_head, hd).transpose(1, 2) for z in (q, k, v))
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(ids.shape[0], n, cfg.n_embd)
        x = x + o @ t[p + "attn.c_proj.weight"] + t[p + "attn.c_proj.bias"]
        m = ln(x, (cfg.n_embd,), t[p + "ln_2.weight"], t[p + "ln_2.bias"], cfg.layer_norm_epsilon)
        hmid = m @ t[p + "mlp.c_fc.weight"] + t[p + "mlp.c_fc.bias"]
        hmid = 0.5 * hmid * (1 + torch.tanh(math.sqrt(2 / math.pi) * (hmid + 0.044715 * hmid ** 3)))
        x = x + hmid @ t[p + "mlp.c_proj.weight"] + t[p + "mlp.c_proj.bias"]
    x = ln(x, (cfg.n_embd,), t[prefix + "ln_f.weight"], t[prefix + "ln_f.bias"], cfg.layer_norm_epsilon)
    return (x @ t[prefix + "wte.weight"].T).numpy()


@pytest.mark.parametrize("prefix", ["", "transformer."])
def test_hf_gpt2_safetensors_load_as_they_are_and_match_gpt2_math(tmp_path: os.PathLike[str], prefix: str) -> None:
    st = hf_state(CFG, prefix=prefix)
    save_file(st, os.path.join(tmp_path, "model.safetensors"))
    with open(os.path.join(tmp_path, "config.json"), "w") as f:
        f.write(CFG.to_json())
    model = load_checkpoint(tmp_path)
    ids = np.random.default_rng(1).integers(0, CFG.vocab_size, (2, 11))
    ours = model(rm.tensor(ids)).numpy()
    ref = torch_gpt2_logits(st, CFG, ids, prefix)
    assert ours.shape == (2, 11, CFG.vocab_size)
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4)


def test_state_dict_names_are_hugging_face_gpt2_names() -> None:
    names = set(GPT2LMHeadModel(CFG).state_dict())
    expected = {"transformer." + k for k in hf_state(CFG) if not k.endswith(".attn.bias")}
    assert names == expected
    assert GPT2LMHeadModel(CFG).state_dict()["transformer.h.0.attn.c_attn.weight"].shape == (32, 96)  # [in, out]


def test_save_then_load_round_trips_the_logits(tmp_path: os.PathLike[str]) -> None:
    model = GPT2LMHeadModel(CFG)
    save_checkpoint(model, tmp_path)
    ids = rm.tensor(np.arange(7)[None])
    np.testing.assert_array_equal(load_checkpoint(tmp_path)(ids).numpy(), model(ids).numpy())


def test_wrong_shapes_and_missing_weights_are_refused_naming_the_problem(tmp_path: os.PathLike[str]) -> None:
    st = hf_state(CFG)
    st["h.0.attn.c_attn.weight"] = st["h.0.attn.c_attn.weight"].T.copy()  # nn.Linear layout, not Conv1D
    save_file(st, os.path.join(tmp_path, "model.safetensors"))
    with open(os.path.join(tmp_path, "config.json"), "w") as f:
        f.write(CFG.to_json())
    with pytest.raises(rm.FormatError, match=r"c_attn.weight: shape \(96, 32\).*\[in, out\]"):
        load_checkpoint(tmp_path)
    del st["h.0.attn.c_attn.weight"]
    save_file(st, os.path.join(tmp_path, "model.safetensors"))
    with pytest.raises(rm.FormatError, match="missing.*c_attn.weight"):
        load_checkpoint(tmp_path)
    os.remove(os.path.join(tmp_path, "config.json"))
    with pytest.raises(rm.FormatError, match="config.json"):
        load_checkpoint(tmp_path)
