"""The engine on the WebGPU backend: the same greedy tokens as on the CPU, continuous batching and paged KV
cache included (lavapipe here, a real GPU on the H200 host)."""

from __future__ import annotations

import os

import pytest

import rumus as rm
from rumus import BackendUnavailable
from rumus.serve.engine import Engine
from rumus.serve.gpt2 import load_checkpoint
from rumus.serve.sampling import SamplingParams

from serve_client import tiny_checkpoint

try:
    rm._runtime.backend("wgpu").devices()
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)


def test_greedy_tokens_on_wgpu_match_cpu_with_requests_joining_mid_batch(tmp_path: os.PathLike[str]) -> None:
    tiny_checkpoint(str(tmp_path), n_positions=64)
    prompts = [[72, 101, 108], [1], [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215,
                                     216, 217]]
    n = [10, 16, 7]
    out = {}
    for dev in ("cpu", "wgpu"):
        eng = Engine(load_checkpoint(tmp_path, device=dev), block_size=4)
        seqs = [eng.add(prompts[0], SamplingParams(max_tokens=n[0]))]
        step = 0
        while not eng.idle or step < 3:
            if step == 2:
                seqs += [eng.add(p, SamplingParams(max_tokens=k)) for p, k in zip(prompts[1:], n[1:])]
            eng.step()
            step += 1
        out[dev] = [s.generated for s in seqs]
        assert eng.allocator.free == eng.allocator.num_blocks
    assert out["wgpu"] == out["cpu"]
    assert [len(g) for g in out["cpu"]] == n
