"""The inference engine: one `step()` runs one iteration of continuous batching over a GPT-2 model.

A step prefills the sequences the scheduler admitted (each its whole prompt, writing its keys and values
into the paged KV cache) and decodes one token for every other running sequence in one batched forward
(keys and values gathered from each sequence's blocks, padding masked out with -inf). With
`use_kv_cache=False` the same schedule recomputes every sequence from its first token each step (the
reference the cached path is tested against). The engine is single-threaded: the server drives it from one
worker thread.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence as Seq
from dataclasses import dataclass

import numpy as np

import rumus as rm
from rumus_contracts import RumusError

from ..nn._functional_attention import causal_bias
from ..tensor import Tensor
from .gpt2 import GPT2LMHeadModel
from .kv_cache import BlockAllocator, BlockTable, KVPool
from .sampling import SamplingParams, make_rng, partial_stop, sample, stop_match
from .scheduler import Scheduler, Sequence, State


class RequestTooLarge(RumusError):
    """A prompt or prompt + max_tokens beyond the engine's limits (the message names the limit)."""


@dataclass(frozen=True)
class Event:
    """Tokens a step released for one sequence: usually one; none while the output's tail could still be the
    start of a stop sequence (held back so a client never sees part of a stop), several once it cannot."""
    seq: Sequence
    tokens: list[int]
    finished: bool
    error: str | None = None  # this request failed (and only this one): the reason


class Engine:
    def __init__(self, model: GPT2LMHeadModel, *, block_size: int = 16, num_blocks: int | None = None,
                 max_running: int = 64, token_budget: int | None = None, use_kv_cache: bool = True) -> None:
        cfg = model.config
        self.model, self.use_kv_cache = model, use_kv_cache
        self.max_len = cfg.n_positions
        self.token_budget = token_budget if token_budget is not None else max(256, cfg.n_positions)
        if num_blocks is None:  # room for every running sequence at full length
            num_blocks = max_running * -(-cfg.n_positions // block_size)
        weight = model.transformer.wte.weight
        self.device, self.dtype = weight.device, weight.dtype
        self.allocator = BlockAllocator(num_blocks, block_size)
        self.pool = KVPool(cfg.n_layer, cfg.n_embd, self.allocator, self.dtype, self.device) if use_kv_cache \
            else None
        self.scheduler = Scheduler(self.allocator, max_running, self.token_budget)
        self._ids = itertools.count()
        self.tokens_generated = 0

    # ---- requests ---------------------------------------------------------------------------------------
    def check(self, prompt: Seq[int], params: SamplingParams, length_field: str = "max_tokens") -> None:
        """Raise RequestTooLarge / RumusError for a request this engine can never serve (length_field: what
        the client called max_tokens)."""
        if len(prompt) == 0:
            raise RumusError("the prompt is empty: give at least one token")
        vocab = self.model.config.vocab_size
        bad = next((i for i, t in enumerate(prompt) if not isinstance(t, int) or isinstance(t, bool)
                    or not 0 <= t < vocab), None)
        if bad is not None:
            shown = repr(prompt[bad])[:24]
            raise RumusError(f"token ids must be ints in [0, {vocab}); 'token_ids'[{bad}] is {shown}")
        if len(prompt) > self.token_budget:
            raise RequestTooLarge(f"prompt of {len(prompt)} tokens exceeds the limit of {self.token_budget} "
                                  f"tokens per prompt")
        if len(prompt) + params.max_tokens > self.max_len:
            raise RequestTooLarge(f"prompt ({len(prompt)} tokens) + {length_field} ({params.max_tokens}) exceeds "
                                  f"the model's context length of {self.max_len} tokens")
        if self.allocator.blocks_for(len(prompt) + params.max_tokens) > self.allocator.num_blocks:
            raise RequestTooLarge(f"request needs more KV cache than the {self.allocator.num_blocks} blocks of "
                                  f"{self.allocator.block_size} tokens there are")

    def add(self, prompt: Seq[int], params: SamplingParams) -> Sequence:
        self.check(prompt, params)
        seq = Sequence(next(self._ids), list(prompt), params, make_rng(params), BlockTable(self.allocator))
        self.scheduler.add(seq)
        return seq

    def cancel(self, seq: Sequence) -> None:
        """Drop a request (its client went away): it leaves the batch and its KV blocks are freed now."""
        self.scheduler.finish(seq, "cancelled")

    @property
    def idle(self) -> bool:
        return self.scheduler.idle

    # ---- one iteration ----------------------------------------------------------------------------------
    def step(self) -> list[Event]:
        plan = self.scheduler.plan()
        events: list[Event] = []
        with rm.no_grad():
            if plan.decode:
                rows = self._decode(plan.decode) if self.use_kv_cache else self._recompute(plan.decode)
                events += [self._emit(s, r) for s, r in zip(plan.decode, rows)]
            for seq in plan.prefill:
                row = self._prefill(seq) if self.use_kv_cache else self._recompute([seq])[0]
                seq.prefilled = True
                events.append(self._emit(seq, row))
        return events

    def run(self, prompts: Seq[Seq[int]], params: SamplingParams | Seq[SamplingParams],
            on_step: Callable[[int], None] | None = None) -> list[list[int]]:
        """Generate for every prompt (all submitted now); the new tokens of each. on_step(i) runs before step i."""
        ps = [params] * len(prompts) if isinstance(params, SamplingParams) else list(params)
        seqs = [self.add(p, q) for p, q in zip(prompts, ps)]
        i = 0
        while not self.idle:
            if on_step is not None:
                on_step(i)
            self.step()
            i += 1
        return [s.generated for s in seqs]

    def _emit(self, seq: Sequence, logits: np.ndarray) -> Event:
        try:
            token = sample(logits, seq.params, seq.rng)
        except RumusError as exc:  # this sequence alone: the rest of the batch carries on
            self.scheduler.finish(seq, "error")
            return Event(seq, [], True, f"{type(exc).__name__}: {exc}")
        seq.generated.append(token)
        self.tokens_generated += 1
        cut = stop_match(seq.generated, seq.params.stop)
        if cut:
            del seq.generated[-cut:]
            self.scheduler.finish(seq, "stop")
        elif len(seq.generated) >= seq.params.max_tokens:
            self.scheduler.finish(seq, "length")
        done = seq.state is State.FINISHED
        upto = len(seq.generated) - (0 if done else partial_stop(seq.generated, seq.params.stop))
        released, seq.released = seq.generated[seq.released:upto], max(seq.released, upto)
        return Event(seq, released, done)

    # ---- forwards ---------------------------------------------------------------------------------------
    def _ids_tensor(self, rows: list[list[int]]) -> Tensor:
        return rm.tensor(np.asarray(rows, dtype=np.int64), device=self.device)

    def _prefill(self, seq: Sequence) -> np.ndarray:
        n = len(seq.prompt)
        seq.table.reserve(n)
        write = seq.table.slots(0, n)
        read = write[None, :]
        assert self.pool is not None
        pool = self.pool
        h = self.model.hidden(self._ids_tensor([seq.prompt]), np.arange(n),
                              causal_bias(n, n, 0, self.dtype, self.device),
                              lambda i, kv: pool.write_and_read(i, kv, write, read))
        row: np.ndarray = self.model.logits(h[:, n - 1:n]).numpy()[0, 0]
        return row

    def _decode(self, seqs: list[Sequence]) -> np.ndarray:
        """One new token for each sequence: input = its last token, keys/values = its cached ones + the new."""
        lengths = np.array([s.length for s in seqs])
        longest = int(lengths.max())
        read = np.zeros((len(seqs), longest), dtype=np.int64)
        write = np.zeros(len(seqs), dtype=np.int64)
        for b, s in enumerate(seqs):
            s.table.reserve(s.length)
            rows = s.table.slots(0, s.length)
            read[b, : s.length] = rows
            read[b, s.length:] = rows[0]  # padding reads a valid row; its -inf bias zeroes its weight
            write[b] = rows[-1]
        bias = np.where(np.arange(longest)[None, :] < lengths[:, None], 0.0, -np.inf)[:, None, None, :]
        assert self.pool is not None
        pool = self.pool
        ids = self._ids_tensor([[s.generated[-1]] for s in seqs])
        h = self.model.hidden(ids, (lengths - 1)[:, None], rm.tensor(bias, dtype=self.dtype, device=self.device),
                              lambda i, kv: pool.write_and_read(i, kv, write, read))
        out: np.ndarray = self.model.logits(h).numpy()[:, 0]
        return out

    def _recompute(self, seqs: list[Sequence]) -> np.ndarray:
        """No KV cache: the whole of every sequence again, right-padded (causal masking keeps real tokens from
        seeing the padding); the logits at each sequence's last token."""
        lengths = [s.length for s in seqs]
        longest = max(lengths)
        rows = [s.prompt + s.generated + [0] * (longest - s.length) for s in seqs]
        h = self.model.hidden(self._ids_tensor(rows), np.arange(longest),
                              causal_bias(longest, longest, 0, self.dtype, self.device), None)
        logits = self.model.logits(h).numpy()
        return np.stack([logits[b, n - 1] for b, n in enumerate(lengths)])

