"""Iteration-level (continuous) batching: which sequences run in the next engine step.

Every step, each running sequence decodes one token; waiting requests are admitted in arrival order while
the step's token budget (decode tokens + prompt tokens to prefill), the running-sequence cap and the KV
cache allow. A request joins at the next step after it arrives and leaves the step it finishes, so short
requests never wait for long ones. KV blocks are allocated as a sequence grows; admission counts each
running sequence's worst case (prompt + max_tokens) so a decode step can never run out of blocks and no
sequence ever has to be preempted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from .kv_cache import BlockAllocator, BlockTable
from .sampling import SamplingParams


class State(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    id: int
    prompt: list[int]
    params: SamplingParams
    rng: np.random.Generator
    table: BlockTable
    generated: list[int] = field(default_factory=list)
    state: State = State.WAITING
    finish_reason: str | None = None  # "length", "stop", "cancelled"
    prefilled: bool = False
    released: int = 0  # generated tokens handed to the client so far

    @property
    def length(self) -> int:
        return len(self.prompt) + len(self.generated)

    @property
    def worst_case(self) -> int:
        return len(self.prompt) + self.params.max_tokens


@dataclass
class Plan:
    prefill: list[Sequence]
    decode: list[Sequence]


class Scheduler:
    def __init__(self, allocator: BlockAllocator, max_running: int, token_budget: int) -> None:
        self.allocator, self.max_running, self.token_budget = allocator, max_running, token_budget
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def _uncommitted_blocks(self) -> int:
        """Free blocks minus those running sequences may still claim."""
        owed = sum(self.allocator.blocks_for(s.worst_case) - len(s.table.blocks) for s in self.running)
        return self.allocator.free - owed

    def plan(self) -> Plan:
        decode = [s for s in self.running if s.prefilled]
        budget = self.token_budget - len(decode)
        prefill: list[Sequence] = []
        while self.waiting and len(self.running) < self.max_running:
            seq = self.waiting[0]
            if len(seq.prompt) > budget or self.allocator.blocks_for(seq.worst_case) > self._uncommitted_blocks():
                break  # first come, first served: later requests do not overtake the head of the queue
            self.waiting.popleft()
            seq.state = State.RUNNING
            self.running.append(seq)
            prefill.append(seq)
            budget -= len(seq.prompt)
        return Plan(prefill, decode)

    def finish(self, seq: Sequence, reason: str) -> None:
        """Leave the batch now; the KV blocks go back to the pool."""
        if seq.state is State.FINISHED:
            return
        if seq.state is State.RUNNING:
            self.running.remove(seq)
        else:
            self.waiting.remove(seq)
        seq.state, seq.finish_reason = State.FINISHED, reason
        seq.table.release()

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running
