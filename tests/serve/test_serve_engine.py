"""The engine: greedy decoding gives the same tokens single, batched and continuously batched, with and
without the KV cache; KV blocks are reused and freed; sampling is per-request reproducible."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus.serve.engine import Engine, RequestTooLarge
from rumus.serve.gpt2 import GPT2Config, GPT2LMHeadModel
from rumus.serve.sampling import SamplingParams, sample

CFG = GPT2Config(vocab_size=40, n_positions=48, n_embd=32, n_layer=2, n_head=4)
PROMPTS = [[1, 2, 3], [7], [5, 9, 11, 13, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 3], [30, 31], [8, 8, 8, 8]]
MAX_NEW = [9, 14, 6, 12, 10]


@pytest.fixture(scope="module")
def model() -> GPT2LMHeadModel:
    rm.manual_seed(0)
    m = GPT2LMHeadModel(CFG)
    with rm.no_grad():  # larger weights than GPT-2's init: well-separated logits, so argmax ties are not a risk
        for p in m.parameters():
            if p.ndim == 2:
                p.copy_(rm.randn(*p.shape) * 0.3)
    m.eval()
    return m


def reference_greedy(model: GPT2LMHeadModel, prompt: list[int], n: int) -> list[int]:
    """Plain full-sequence forward, argmax, append: no engine involved."""
    ids = list(prompt)
    with rm.no_grad():
        for _ in range(n):
            ids.append(int(np.argmax(model(rm.tensor(np.array([ids]))).numpy()[0, -1])))
    return ids[len(prompt):]


def greedy(n: int) -> SamplingParams:
    return SamplingParams(max_tokens=n)


@pytest.mark.parametrize("use_kv_cache", [True, False])
def test_greedy_single_batched_and_continuous_batching_agree_token_for_token(model: GPT2LMHeadModel,
                                                                            use_kv_cache: bool) -> None:
    expected = [reference_greedy(model, p, n) for p, n in zip(PROMPTS, MAX_NEW)]
    single = [Engine(model, use_kv_cache=use_kv_cache, block_size=4).run([p], greedy(n))[0]
              for p, n in zip(PROMPTS, MAX_NEW)]
    batched = Engine(model, use_kv_cache=use_kv_cache, block_size=4).run(PROMPTS, [greedy(n) for n in MAX_NEW])

    # continuous: requests arrive while others are mid-decode and join at the next step
    eng = Engine(model, use_kv_cache=use_kv_cache, block_size=4)
    arrivals = {0: [0], 2: [1, 2], 3: [3], 7: [4]}
    seqs: dict[int, object] = {}
    step = 0
    while step <= max(arrivals) or not eng.idle:
        for i in arrivals.get(step, []):
            seqs[i] = eng.add(PROMPTS[i], greedy(MAX_NEW[i]))
        eng.step()
        step += 1
    continuous = [seqs[i].generated for i in range(len(PROMPTS))]  # type: ignore[attr-defined]
    assert single == expected
    assert batched == expected
    assert continuous == expected
    assert eng.allocator.free == eng.allocator.num_blocks  # every block came back


def test_requests_join_at_the_next_step_and_leave_when_done(model: GPT2LMHeadModel) -> None:
    eng = Engine(model, block_size=4)
    a = eng.add([1, 2], greedy(3))
    eng.step()
    b = eng.add([3], greedy(5))
    eng.step()  # a decodes, b prefills in the same step
    assert (len(a.generated), len(b.generated)) == (2, 1)
    eng.step()
    assert a.finish_reason == "length" and a not in eng.scheduler.running and b in eng.scheduler.running


def test_kv_blocks_grow_a_block_at_a_time_and_cancel_frees_them(model: GPT2LMHeadModel) -> None:
    eng = Engine(model, block_size=4, num_blocks=10)
    s = eng.add([1, 2, 3], greedy(20))
    eng.step()
    assert len(s.table.blocks) == 1  # 3 prompt tokens
    for _ in range(2):
        eng.step()
    assert len(s.table.blocks) == 2  # 5 tokens cached
    eng.cancel(s)
    assert eng.allocator.free == 10 and eng.idle and s.finish_reason == "cancelled"


def test_admission_waits_for_kv_blocks_and_the_token_budget(model: GPT2LMHeadModel) -> None:
    eng = Engine(model, block_size=4, num_blocks=6, token_budget=20)
    a = eng.add([1] * 10, greedy(10))  # worst case 20 tokens = 5 blocks
    b = eng.add([2] * 3, greedy(5))  # 2 blocks: must wait for a
    eng.step()
    assert a.generated and not b.generated
    while a.finish_reason is None:
        eng.step()
    eng.step()
    assert b.generated
    with pytest.raises(RequestTooLarge, match="limit of 20 tokens per prompt"):
        eng.add([1] * 21, greedy(1))
    with pytest.raises(RequestTooLarge, match="context length of 48"):
        eng.add([1] * 10, greedy(39))


def test_stop_sequences_end_the_output_and_are_excluded(model: GPT2LMHeadModel) -> None:
    full = reference_greedy(model, [5, 6], 10)
    stop = tuple(full[3:5])
    out = Engine(model).run([[5, 6]], SamplingParams(max_tokens=10, stop=(stop,)))[0]
    first = next(i for i in range(len(full) - 1) if tuple(full[i:i + 2]) == stop)
    assert out == full[:first]
    # streamed: the stop's first token is held back until it is known not to start the stop, never sent
    eng = Engine(model)
    seq = eng.add([5, 6], SamplingParams(max_tokens=10, stop=(stop, (full[0], 99))))
    streamed: list[int] = []
    while not eng.idle:
        streamed += [t for ev in eng.step() for t in ev.tokens]
    assert streamed == out == seq.generated


def test_seeded_sampling_is_reproducible_whatever_is_batched_alongside(model: GPT2LMHeadModel) -> None:
    p = SamplingParams(max_tokens=12, temperature=1.0, top_k=10, top_p=0.9, seed=123)
    alone = Engine(model).run([[1, 2, 3]], p)[0]
    crowd = Engine(model).run([[1, 2, 3], [4, 5], [6]], [p, SamplingParams(max_tokens=12, temperature=0.7, seed=1),
                                                         SamplingParams(max_tokens=3, temperature=2.0)])[0]
    assert alone == crowd
    assert Engine(model).run([[1, 2, 3]], SamplingParams(max_tokens=12, temperature=1.0, seed=124))[0] != alone


def test_top_k_and_top_p_sample_only_from_the_allowed_tokens() -> None:
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    rng = np.random.default_rng(0)
    k2 = {sample(logits, SamplingParams(temperature=1.0, top_k=2), rng) for _ in range(300)}
    p7 = {sample(logits, SamplingParams(temperature=1.0, top_p=0.7), rng) for _ in range(300)}
    p9 = {sample(logits, SamplingParams(temperature=1.0, top_p=0.9), rng) for _ in range(300)}
    assert k2 == {0, 1} and p7 == {0, 1} and p9 == {0, 1, 2}
    assert sample(logits, SamplingParams(), rng) == 0


def test_a_sequence_whose_logits_cannot_be_sampled_fails_alone(model: GPT2LMHeadModel,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """NaN logits for one request (here: forced for the request with seed 13) end that request with an error
    event; the others in the same batch finish with exactly their greedy tokens."""
    import rumus.serve.engine as engine_mod
    real = engine_mod.sample

    def poisoned(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
        return real(np.full_like(logits, np.nan) if params.seed == 13 else logits, params, rng)
    monkeypatch.setattr(engine_mod, "sample", poisoned)
    eng = Engine(model, block_size=4)
    good = [eng.add(p, greedy(n)) for p, n in zip(PROMPTS[:3], MAX_NEW[:3])]
    bad = eng.add([4, 5], SamplingParams(max_tokens=5, seed=13))
    errors = []
    while not eng.idle:
        errors += [ev for ev in eng.step() if ev.error is not None]
    assert [ev.seq for ev in errors] == [bad] and "NaN or infinite logits" in str(errors[0].error)
    assert bad.finish_reason == "error" and bad.generated == []
    assert [s.generated for s in good] == [reference_greedy(model, p, n) for p, n in zip(PROMPTS[:3], MAX_NEW[:3])]
    assert eng.allocator.free == eng.allocator.num_blocks  # the failed sequence's blocks went back too


def test_a_tiny_temperature_samples_the_top_token_instead_of_nan() -> None:
    logits = np.array([0.5, 3.0, -2.0, 1.0], dtype=np.float32)
    for t in (1e-310, 5e-324, 1e-30):
        p = SamplingParams(temperature=t, seed=0)
        assert sample(logits, p, np.random.default_rng(0)) == 1
    for bad in (float("nan"), float("inf"), -1e-300, 100.5):
        with pytest.raises(rm.RumusError, match="temperature"):
            SamplingParams(temperature=bad)


def test_worker_calls_take_turns_with_generation_instead_of_running_back_to_back(model: GPT2LMHeadModel) -> None:
    """Embedding requests (worker calls) queued behind a generating request: between any two calls at least
    one engine step runs while the request still generates, so a burst of embeddings cannot stall it."""
    import asyncio
    import time as _time

    from rumus.serve.worker import Handle, Worker
    eng = Engine(model, block_size=4)
    worker = Worker(eng)
    worker.start()
    seen: list[int] = []

    def slow_call() -> int:
        _time.sleep(0.005)  # any duration: the engine then steps for as long before the next call
        seen.append(eng.tokens_generated)
        return len(seen)

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        h = Handle([1, 2, 3], greedy(40), loop)
        worker.submit(h)
        while eng.tokens_generated == 0:
            await asyncio.sleep(0.001)
        results = await asyncio.gather(*[worker.call(slow_call, loop) for _ in range(6)])
        assert sorted(results) == [1, 2, 3, 4, 5, 6]
        kinds = []
        while True:
            kind, _ = await h.out.get()
            kinds.append(kind)
            if kind != "token":
                return kinds
    try:
        kinds = asyncio.run(scenario())
    finally:
        worker.stop()
    assert kinds.count("token") == 40 and kinds[-1] == "done"
    during = [n for n in seen if n < 40]
    assert len(during) >= 2 and all(b > a for a, b in zip(during, during[1:])), seen
