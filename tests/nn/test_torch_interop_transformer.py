"""PyTorch interop: a transformer encoder built and saved in PyTorch loads into the same rumus architecture
(safetensors + load_state_dict) and agrees on outputs and on the gradient of every parameter; activations,
losses, attention and embedding agree with torch one by one."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus import nn
from rumus.nn import functional as F

torch = pytest.importorskip("torch")
st_torch = pytest.importorskip("safetensors.torch")
TF = torch.nn.functional

DEVICE = rm.default_device()


def r(a: np.ndarray, requires_grad: bool = False) -> rm.Tensor:
    return rm.tensor(np.asarray(a), device=DEVICE, requires_grad=requires_grad)


def t(a: np.ndarray, requires_grad: bool = False) -> torch.Tensor:
    return torch.tensor(np.asarray(a), requires_grad=requires_grad)


def close(got: rm.Tensor, want: torch.Tensor, rtol: float = 1e-5, atol: float = 1e-6, what: str = "") -> None:
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=rtol, atol=atol, err_msg=what)


# ---- a small transformer encoder, PyTorch -> safetensors -> rumus -----------------------------------------

D, HEADS, FF, LAYERS, CLASSES = 16, 4, 32, 2, 3


class TorchEncoder(torch.nn.Module):
    def __init__(self, norm_first: bool, activation: str) -> None:
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, activation=activation, batch_first=True,
                                                 norm_first=norm_first)
        self.encoder = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x, mask=None, padding=None):
        return self.head(self.encoder(x, mask=mask, src_key_padding_mask=padding))


class RumusEncoder(nn.Module):
    def __init__(self, norm_first: bool, activation: str) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, activation=activation, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, LAYERS)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, x, mask=None, padding=None):
        return self.head(self.encoder(x, mask=mask, src_key_padding_mask=padding))


@pytest.mark.parametrize("norm_first,activation,masks", [(False, "relu", False), (True, "gelu", True)])
def test_encoder_outputs_and_parameter_gradients_match_torch(tmp_path, norm_first, activation, masks):
    torch.manual_seed(0)
    tm = TorchEncoder(norm_first, activation).eval()
    path = str(tmp_path / "encoder.safetensors")
    st_torch.save_file({k: v.contiguous() for k, v in tm.state_dict().items()}, path)
    rm_model = RumusEncoder(norm_first, activation).to(DEVICE).eval()
    rm_model.load_state_dict(rm.io.load_file(path, device=DEVICE))
    assert list(rm_model.state_dict()) == list(tm.state_dict())

    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 7, D)).astype(np.float32)
    target = rng.standard_normal((3, 7, CLASSES)).astype(np.float32)
    mask_t = mask_r = pad_t = pad_r = None
    if masks:
        causal = np.triu(np.ones((7, 7), bool), 1)  # True = may not attend (PyTorch's nn convention)
        padding = np.zeros((3, 7), bool)
        padding[1, 5:] = True
        mask_t, mask_r = t(causal), r(causal)
        pad_t, pad_r = t(padding), r(padding)

    out_t = tm(t(x), mask_t, pad_t)
    out_r = rm_model(r(x), mask_r, pad_r)
    close(out_r, out_t, rtol=1e-5, atol=1e-5, what="encoder output")

    ((out_t - t(target)) ** 2).mean().backward()
    F.mse_loss(out_r, r(target)).backward()
    grads_t = dict(tm.named_parameters())
    for name, p in rm_model.named_parameters():
        assert p.grad is not None, name
        close(p.grad, grads_t[name].grad, rtol=1e-4, atol=1e-6, what=f"gradient of {name}")


def test_multihead_attention_weights_and_layouts_match_torch():
    torch.manual_seed(1)
    for batch_first, kdim in ((False, None), (True, 6)):
        tm = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first, kdim=kdim, vdim=kdim)
        rmha = nn.MultiheadAttention(8, 2, batch_first=batch_first, kdim=kdim, vdim=kdim).to(DEVICE)
        rmha.load_state_dict({k: r(v.detach().numpy()) for k, v in tm.state_dict().items()})
        rng = np.random.default_rng(2)
        q = rng.standard_normal((4, 3, 8) if not batch_first else (3, 4, 8)).astype(np.float32)
        kv = rng.standard_normal((5, 3, kdim or 8) if not batch_first else (3, 5, kdim or 8)).astype(np.float32)
        for avg in (True, False):
            ot, wt = tm(t(q), t(kv), t(kv), average_attn_weights=avg)
            orr, wr = rmha(r(q), r(kv), r(kv), average_attn_weights=avg)
            close(orr, ot, rtol=1e-5, atol=1e-6)
            close(wr, wt, rtol=1e-5, atol=1e-6)


# ---- attention ---------------------------------------------------------------------------------------

def test_scaled_dot_product_attention_matches_torch():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 4)))
    bool_mask = rng.uniform(size=(5, 6)) > 0.3
    bool_mask[:, 0] = True  # no fully masked rows
    float_mask = rng.standard_normal((2, 1, 5, 6)).astype(np.float32)
    cases = [dict(), dict(attn_mask=bool_mask), dict(attn_mask=float_mask), dict(scale=0.2)]
    for kw in cases:
        tq, tk, tv = (t(a, True) for a in (q, k, v))
        rq, rk, rv = (r(a, True) for a in (q, k, v))
        kt = {**kw, **({"attn_mask": t(kw["attn_mask"])} if "attn_mask" in kw else {})}
        kr = {**kw, **({"attn_mask": r(kw["attn_mask"])} if "attn_mask" in kw else {})}
        ot = TF.scaled_dot_product_attention(tq, tk, tv, **kt)
        orr = F.scaled_dot_product_attention(rq, rk, rv, **kr)
        close(orr, ot, rtol=1e-5, atol=1e-6, what=str(list(kw)))
        ot.sum().backward()
        orr.sum().backward()
        for a, b in ((rq, tq), (rk, tk), (rv, tv)):
            close(a.grad, b.grad, rtol=1e-4, atol=1e-5, what=f"grad {list(kw)}")
    # causal with L == S, and grouped-query heads
    qq = rng.standard_normal((2, 4, 6, 8)).astype(np.float32)
    kk = rng.standard_normal((2, 2, 6, 8)).astype(np.float32)
    close(F.scaled_dot_product_attention(r(qq), r(kk), r(kk), is_causal=True, enable_gqa=True),
          TF.scaled_dot_product_attention(t(qq), t(kk), t(kk), is_causal=True, enable_gqa=True), rtol=1e-5, atol=1e-6)


# ---- activations ---------------------------------------------------------------------------------------

ACTIVATIONS = [
    ("gelu", lambda x: F.gelu(x), lambda x: TF.gelu(x)),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
    ("silu", F.silu, TF.silu),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2)),
    ("softplus", lambda x: F.softplus(x, 2.0, 5.0), lambda x: TF.softplus(x, 2.0, 5.0)),
    ("elu", lambda x: F.elu(x, 0.7), lambda x: TF.elu(x, 0.7)),
    ("sigmoid", F.sigmoid, torch.sigmoid),
    ("tanh", F.tanh, torch.tanh),
    ("relu6", F.relu6, TF.relu6),
    ("mish", F.mish, TF.mish),
    ("logsigmoid", F.logsigmoid, TF.logsigmoid),
    ("erf", F.erf, torch.erf),
]


@pytest.mark.parametrize("name,fr,ft", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_matches_torch(name, fr, ft):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(257) * 4).astype(np.float32)
    x = np.where(np.abs(x) < 1e-3, 0.5, x)  # off the kinks
    xt, xr = t(x, True), r(x, True)
    yt, yr = ft(xt), fr(xr)
    close(yr, yt, rtol=2e-6, atol=2e-6, what=name)
    g = rng.standard_normal(257).astype(np.float32)
    yt.backward(t(g))
    yr.backward(r(g))
    close(xr.grad, xt.grad, rtol=1e-5, atol=2e-6, what=f"{name} grad")


def test_activation_modules_match_torch():
    x = np.linspace(-5, 5, 41, dtype=np.float32)
    pairs = [(nn.GELU(), torch.nn.GELU()), (nn.GELU("tanh"), torch.nn.GELU("tanh")), (nn.SiLU(), torch.nn.SiLU()),
             (nn.LeakyReLU(0.1), torch.nn.LeakyReLU(0.1)), (nn.Softplus(), torch.nn.Softplus()),
             (nn.ELU(), torch.nn.ELU()), (nn.Sigmoid(), torch.nn.Sigmoid()), (nn.Tanh(), torch.nn.Tanh()),
             (nn.Mish(), torch.nn.Mish()), (nn.ReLU6(), torch.nn.ReLU6())]
    for mr, mt in pairs:
        close(mr(r(x)), mt(t(x)), rtol=2e-6, atol=2e-6, what=type(mr).__name__)


# ---- losses ---------------------------------------------------------------------------------------------

def _loss_cases():
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((6, 4)).astype(np.float32)
    logits3 = rng.standard_normal((3, 4, 5)).astype(np.float32)
    cls = np.array([0, 3, 1, -100, 2, 3])
    cls3 = rng.integers(0, 4, (3, 5))
    w = rng.uniform(0.5, 2, 4).astype(np.float32)
    probs = rng.dirichlet(np.ones(4), 6).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.uniform(0, 1, (5, 3)).astype(np.float32)
    pw = rng.uniform(0.5, 3, 3).astype(np.float32)
    yy = (x + rng.uniform(-2, 2, (5, 3))).astype(np.float32)
    out = []
    for red in ("mean", "sum", "none"):
        out += [
            (f"ce/{red}", logits, lambda a, red=red: F.cross_entropy(a, r(cls), reduction=red),
             lambda a, red=red: TF.cross_entropy(a, t(cls), reduction=red)),
            (f"ce-weight-smooth/{red}", logits,
             lambda a, red=red: F.cross_entropy(a, r(cls), weight=r(w), label_smoothing=0.1, reduction=red),
             lambda a, red=red: TF.cross_entropy(a, t(cls), weight=t(w), label_smoothing=0.1, reduction=red)),
            (f"ce-kdim/{red}", logits3, lambda a, red=red: F.cross_entropy(a, r(cls3), reduction=red),
             lambda a, red=red: TF.cross_entropy(a, t(cls3), reduction=red)),
            (f"ce-probs/{red}", logits,
             lambda a, red=red: F.cross_entropy(a, r(probs), weight=r(w), label_smoothing=0.2, reduction=red),
             lambda a, red=red: TF.cross_entropy(a, t(probs), weight=t(w), label_smoothing=0.2, reduction=red)),
            (f"nll/{red}", logits, lambda a, red=red: F.nll_loss(F.log_softmax(a, 1), r(cls), r(w), reduction=red),
             lambda a, red=red: TF.nll_loss(TF.log_softmax(a, 1), t(cls), t(w), reduction=red)),
            (f"bce-logits/{red}", x,
             lambda a, red=red: F.binary_cross_entropy_with_logits(a, r(y), reduction=red, pos_weight=r(pw)),
             lambda a, red=red: TF.binary_cross_entropy_with_logits(a, t(y), reduction=red, pos_weight=t(pw))),
            (f"bce/{red}", x, lambda a, red=red: F.binary_cross_entropy(F.sigmoid(a), r(y), reduction=red),
             lambda a, red=red: TF.binary_cross_entropy(torch.sigmoid(a), t(y), reduction=red)),
            (f"smooth_l1/{red}", x, lambda a, red=red: F.smooth_l1_loss(a, r(yy), reduction=red, beta=0.5),
             lambda a, red=red: TF.smooth_l1_loss(a, t(yy), reduction=red, beta=0.5)),
            (f"huber/{red}", x, lambda a, red=red: F.huber_loss(a, r(yy), reduction=red, delta=0.7),
             lambda a, red=red: TF.huber_loss(a, t(yy), reduction=red, delta=0.7)),
            (f"l1/{red}", x, lambda a, red=red: F.l1_loss(a, r(yy), reduction=red),
             lambda a, red=red: TF.l1_loss(a, t(yy), reduction=red)),
            (f"mse/{red}", x, lambda a, red=red: F.mse_loss(a, r(yy), reduction=red),
             lambda a, red=red: TF.mse_loss(a, t(yy), reduction=red)),
        ]
    return out


LOSSES = _loss_cases()


@pytest.mark.parametrize("name,x,fr,ft", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_matches_torch(name, x, fr, ft):
    xt, xr = t(x, True), r(x, True)
    lt, lr = ft(xt), fr(xr)
    close(lr, lt, rtol=1e-5, atol=1e-6, what=name)
    g = np.random.default_rng(6).standard_normal(lt.shape).astype(np.float32)
    lt.backward(t(g))
    lr.backward(r(g))
    close(xr.grad, xt.grad, rtol=1e-5, atol=1e-6, what=f"{name} grad")


def test_loss_modules_match_torch():
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((5, 3)).astype(np.float32)
    cls = np.array([0, 2, 1, 1, 0])
    w = np.array([1.0, 2.0, 0.5], np.float32)
    close(nn.CrossEntropyLoss(weight=r(w), ignore_index=1, label_smoothing=0.05)(r(logits), r(cls)),
          torch.nn.CrossEntropyLoss(weight=t(w), ignore_index=1, label_smoothing=0.05)(t(logits), t(cls)))
    close(nn.NLLLoss()(r(logits), r(cls)), torch.nn.NLLLoss()(t(logits), t(cls)))
    y = rng.uniform(0, 1, (5, 3)).astype(np.float32)
    close(nn.BCEWithLogitsLoss(pos_weight=r(w))(r(logits), r(y)),
          torch.nn.BCEWithLogitsLoss(pos_weight=t(w))(t(logits), t(y)))
    close(nn.SmoothL1Loss(beta=2.0)(r(logits), r(y)), torch.nn.SmoothL1Loss(beta=2.0)(t(logits), t(y)))
    close(nn.MSELoss(reduction="sum")(r(logits), r(y)), torch.nn.MSELoss(reduction="sum")(t(logits), t(y)))
    close(nn.L1Loss(reduction="none")(r(logits), r(y)), torch.nn.L1Loss(reduction="none")(t(logits), t(y)))


# ---- embedding ------------------------------------------------------------------------------------------

def test_embedding_matches_torch_including_padding_and_repeats():
    torch.manual_seed(2)
    te = torch.nn.Embedding(7, 5, padding_idx=2)
    re_ = nn.Embedding(7, 5, padding_idx=2).to(DEVICE)
    re_.load_state_dict({"weight": r(te.weight.detach().numpy())})
    idx = np.array([[1, 2, 2, 6], [6, 6, 0, 2]])
    g = np.random.default_rng(8).standard_normal((2, 4, 5)).astype(np.float32)
    yt, yr = te(t(idx)), re_(r(idx))
    close(yr, yt)
    yt.backward(t(g))
    yr.backward(r(g))
    close(re_.weight.grad, te.weight.grad)
    assert np.all(re_.weight.grad.numpy()[2] == 0)
    yr32 = re_(r(idx.astype(np.int32)))
    close(yr32, yt)
