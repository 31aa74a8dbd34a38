"""The engine's thread: it owns the model and the engine (neither is shared with the event loop), takes
requests from a thread-safe inbox, runs engine steps while there is work and hands every token to its
request's asyncio queue through `loop.call_soon_threadsafe`."""

from __future__ import annotations

import asyncio
import collections
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .engine import Engine
from .metrics import Histogram, TokenRate
from .sampling import SamplingParams
from .scheduler import Sequence


@dataclass(eq=False)
class Handle:
    """One request as the event loop sees it; `out` receives ("token", id), ("done", reason) or ("error", msg)."""
    prompt: list[int]
    params: SamplingParams
    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    arrived: float = field(default_factory=time.perf_counter)
    seq: Sequence | None = None
    last_token_at: float | None = None
    cancelled: bool = False
    on_done: Callable[[Handle], None] | None = None  # run on the loop when the engine is done with it


class Worker:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.ttft = Histogram("rumus_time_to_first_token_seconds", "Time from request arrival to its first token")
        self.itl = Histogram("rumus_inter_token_latency_seconds", "Time between consecutive tokens of a request")
        self.rate = TokenRate()
        self.tokens_total = 0
        self.error: str | None = None
        self.calling = 0  # 1 while a call() (an embedding request) runs on this thread
        # calls wait here and share the thread with generation: after a call, engine steps run for as long
        # as it took before the next call (generation gets half the time at least while both have work)
        self._owed = 0.0
        self._calls: collections.deque[tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop]] = \
            collections.deque()
        self._live: dict[int, Handle] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rumus-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def submit(self, h: Handle) -> None:
        self.inbox.put(("add", h))

    def cancel(self, h: Handle) -> None:
        h.cancelled = True
        self.inbox.put(("cancel", h))

    def call(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
        """Run fn on the engine thread (between steps); the returned future resolves on the loop."""
        fut: asyncio.Future[Any] = loop.create_future()
        self.inbox.put(("call", (fn, fut, loop)))
        return fut

    @property
    def running(self) -> int:
        return len(self.engine.scheduler.running)

    @property
    def waiting(self) -> int:
        return len(self.engine.scheduler.waiting)

    def _run(self) -> None:
        while not (self._stop.is_set() and self.engine.idle and self.inbox.empty() and not self._calls):
            try:
                self._drain(block=self.engine.idle and not self._calls)
                if self._calls and (self.engine.idle or self._owed <= 0.0):
                    started = time.perf_counter()
                    self._call(*self._calls.popleft())
                    self._owed = time.perf_counter() - started
                if not self.engine.idle:
                    started = time.perf_counter()
                    self._step()
                    self._owed -= time.perf_counter() - started
            except Exception as exc:  # keep serving: fail what was in flight, say why, carry on
                self._fail_all(f"{type(exc).__name__}: {exc}")

    def _drain(self, block: bool) -> None:
        try:
            cmd, arg = self.inbox.get(timeout=0.05) if block else self.inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            self._do(cmd, arg)
            try:
                cmd, arg = self.inbox.get_nowait()
            except queue.Empty:
                return

    def _do(self, cmd: str, arg: Any) -> None:
        if cmd == "add":
            h: Handle = arg
            if h.cancelled:
                return
            h.seq = self.engine.add(h.prompt, h.params)
            self._live[h.seq.id] = h
        elif cmd == "cancel":
            h = arg
            if h.seq is not None and self._live.pop(h.seq.id, None) is not None:
                self.engine.cancel(h.seq)
        elif cmd == "call":
            self._calls.append(arg)

    def _call(self, fn: Callable[[], Any], fut: asyncio.Future[Any], loop: asyncio.AbstractEventLoop) -> None:
        self.calling = 1
        try:
            result, ok = fn(), True
        except Exception as exc:
            result, ok = exc, False
        finally:
            self.calling = 0
        loop.call_soon_threadsafe(_settle, fut, result, ok)

    def _step(self) -> None:
        events = self.engine.step()
        now = time.perf_counter()
        produced = 0
        for ev in events:
            h = self._live.get(ev.seq.id)
            if h is None:
                continue
            produced += 1  # a token held back (a possible stop sequence's start) was still generated
            for token in ev.tokens:
                if h.last_token_at is None:
                    self.ttft.observe(now - h.arrived)
                else:
                    self.itl.observe(now - h.last_token_at)
                h.last_token_at = now
                h.loop.call_soon_threadsafe(h.out.put_nowait, ("token", token))
            if ev.finished:
                del self._live[ev.seq.id]
                end = ("error", ev.error) if ev.error is not None else ("done", ev.seq.finish_reason)
                h.loop.call_soon_threadsafe(h.out.put_nowait, end)
                if h.on_done is not None:
                    h.loop.call_soon_threadsafe(h.on_done, h)
        self.tokens_total += produced
        self.rate.add(produced)

    def _fail_all(self, msg: str) -> None:
        self.error = msg
        for h in list(self._live.values()):
            if h.seq is not None:
                self.engine.cancel(h.seq)
            h.loop.call_soon_threadsafe(h.out.put_nowait, ("error", msg))
            if h.on_done is not None:
                h.loop.call_soon_threadsafe(h.on_done, h)
        self._live.clear()


def _settle(fut: asyncio.Future[Any], result: Any, ok: bool) -> None:
    if fut.cancelled():
        return
    if ok:
        fut.set_result(result)
    else:
        fut.set_exception(result)
