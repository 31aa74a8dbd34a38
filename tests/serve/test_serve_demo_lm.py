"""`rumus demo lm` trains on Python's own text, offline, and writes a checkpoint the server loads."""

from __future__ import annotations

import ast
import os
from typing import Any

import numpy as np

import rumus as rm
from rumus.cli import main as rumus_main
from rumus.serve.demo_lm import corpus, train, zen_of_python
from rumus.serve.encoder import load_encoder
from rumus.serve.engine import Engine
from rumus.serve.gpt2 import GPT2Config, load_checkpoint
from rumus.serve.sampling import SamplingParams
from rumus.serve.tokenizer import decode, encode


def test_corpus_is_pythons_own_text() -> None:
    text = decode(corpus(200_000).tolist())
    assert text.startswith("The Zen of Python")
    assert "def dedent(" in text  # textwrap's source


def test_training_lowers_the_loss_well_below_a_uniform_guess() -> None:
    _, losses = train(GPT2Config(vocab_size=256, n_positions=32, n_embd=32, n_layer=1, n_head=2), steps=40,
                      batch=8, log_every=0)
    assert losses[0] > 5.0  # ~ln 256 at the start
    assert np.mean(losses[-5:]) < 3.6, losses[-5:]


def test_rumus_demo_lm_writes_a_checkpoint_that_serves(tmp_path: os.PathLike[str]) -> None:
    out = os.path.join(tmp_path, "lm")
    assert rumus_main(["demo", "lm", "--out", out, "--steps", "3", "--n-embd", "32", "--n-head", "2",
                       "--n-layer", "1", "--context", "32", "--batch", "4", "--encoder-steps", "2"]) == 0
    assert sorted(os.listdir(out)) == ["config.json", "encoder", "loss.png", "model.safetensors"]
    assert load_encoder(os.path.join(out, "encoder")).config.hidden_size == 32
    model = load_checkpoint(out)
    assert model.config.n_positions == 32 and model.config.vocab_size == 256
    got = Engine(model).run([encode("abc")], SamplingParams(max_tokens=5))[0]
    assert len(got) == 5 and all(0 <= t < 256 for t in got)
    rm.manual_seed(0)


def test_the_zen_alone_is_what_the_default_demo_learns() -> None:
    zen = decode(zen_of_python().tolist())
    assert zen.startswith("The Zen of Python") and zen.rstrip().endswith("let's do more of those!")
    assert "def " not in zen


def test_the_default_demo_prints_a_readable_sample_and_the_next_command(tmp_path: os.PathLike[str],
                                                                         capsys: Any) -> None:
    out = os.path.join(tmp_path, "lm")
    assert rumus_main(["demo", "lm", "--out", out, "--steps", "120", "--encoder-steps", "0"]) == 0
    printed = capsys.readouterr().out
    assert f"rumus serve {out} --port 8000" in printed and "/v1/completions" in printed
    sample = printed.split("greedy sample: ", 1)[1].splitlines()[0]
    words = ast.literal_eval(sample).split()  # the repr of a str
    assert sum(w.strip(".,") in ZEN_WORDS for w in words) >= 0.5 * len(words), sample


ZEN_WORDS = set(decode(zen_of_python().tolist()).replace(".", " ").replace(",", " ").split())
