"""A pickle reader that runs no code: an opcode interpreter with an explicit allow-list.

Python's `pickle.Unpickler`, even with `find_class` restricted, still applies BUILD to whatever an
allowed global returns (`obj.__dict__.update(state)` / `setattr`), calls NEWOBJ on allowed classes and
APPEND/SETITEM on anything with those methods: an allowed *object* (a dtype singleton) can be rewritten
for the whole process. This interpreter instead knows each opcode it accepts and what it may touch:

- GLOBAL / STACK_GLOBAL push only what the caller's `globals` table maps the name to (else FormatError);
- REDUCE calls only callables from that table, and only with a tuple of arguments;
- BUILD applies only to an `OrderedDict` made by this load (torch's `_metadata` attribute), with a
  dict of plain string names; every other BUILD is refused;
- APPEND(S) only on a `list`, SETITEM(S) only on a `dict`/`OrderedDict`, ADDITEMS only on a `set`,
  all of them made by this load (GLOBAL never yields a container);
- NEWOBJ, NEWOBJ_EX, INST, OBJ, EXT*, the protocol-5 buffers and the text (protocol 0) opcodes are
  refused: torch.save never writes them;
- BINPERSID hands the popped id to `persistent_load` (the caller's storage rule);
- memo references (BINGET, MEMOIZE) push the same object again, so shared references stay shared and
  nothing is ever walked twice;
- every length is checked against the bytes left before it is read, integers are bounded
  (`limits.MAX_INT_BYTES`), and any malformed stream is a FormatError, never a Python exception.
"""

from __future__ import annotations

import pickle
import struct
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from rumus_contracts import FormatError, RumusError

from . import limits

_MARK = object()  # the stack marker MARK pushes


def _op(code: bytes) -> int:
    return code[0]


class RestrictedUnpickler:
    """Reads one pickle from `data[pos:]`; `load()` returns the object and sets `end` to the next byte."""

    def __init__(self, data: bytes | memoryview, pos: int, globals_table: Callable[[str, str], Any],
                 persistent_load: Callable[[Any], Any], name: str) -> None:
        self._data, self.pos, self.end = memoryview(data), pos, pos
        self._globals, self._persistent_load, self._name = globals_table, persistent_load, name
        self._callables: set[int] = set()  # ids of the callables GLOBAL handed out: REDUCE calls only these
        self._keep: list[Any] = []  # keeps those callables alive so their ids stay theirs

    # ---- byte reading ----------------------------------------------------------------------------
    def _read(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self._data):
            raise FormatError(f"{self._name}: truncated pickle (wants {n} bytes at byte {self.pos}, the stream "
                              f"has {len(self._data) - self.pos} left)")
        out = bytes(self._data[self.pos:self.pos + n])
        self.pos += n
        return out

    def _line(self) -> str:
        rest = self._data[self.pos:self.pos + 1024]
        end = bytes(rest).find(b"\n")
        if end < 0:
            raise FormatError(f"{self._name}: truncated pickle (a global name without its end of line)")
        text = bytes(rest[:end])
        self.pos += end + 1
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"{self._name}: a global name in the pickle is not UTF-8") from None

    def _u(self, fmt: str) -> int:
        value: int = struct.unpack(fmt, self._read(struct.calcsize(fmt)))[0]
        return value

    # ---- the interpreter -------------------------------------------------------------------------
    def load(self) -> Any:
        try:
            return self._run()
        except RumusError:
            raise
        except (RecursionError, MemoryError) as exc:
            raise FormatError(f"{self._name}: the pickle builds an object too large or deep to hold "
                              f"({type(exc).__name__})") from None
        except Exception as exc:  # noqa: BLE001 - a malformed stream fails in many ways; each one is a FormatError
            raise FormatError(f"{self._name}: corrupt pickle: {type(exc).__name__}: {str(exc)[:200]}") from None

    def _global(self, module: str, name: str) -> Any:
        obj = self._globals(module, name)
        if obj is None:
            raise FormatError(f"{self._name}: the checkpoint names '{module}.{name}', which is not a tensor, "
                              f"container or number; refusing to load it (nothing from it was run). Only load "
                              f"files you trust with PyTorch itself, and re-save plain state_dicts")
        if callable(obj):
            self._callables.add(id(obj))
            self._keep.append(obj)
        return obj

    def _pop_mark(self, stack: list[Any]) -> list[Any]:
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is _MARK:
                items = stack[i + 1:]
                del stack[i:]
                return items
        raise FormatError(f"{self._name}: corrupt pickle (a MARK is missing)")

    def _run(self) -> Any:  # noqa: C901 - one branch per opcode reads best as one function
        stack: list[Any] = []
        memo: dict[int, Any] = {}
        P = pickle
        while True:
            at = self.pos
            code = self._read(1)[0]
            if code == _op(P.PROTO):
                if self._read(1)[0] > 5:
                    raise FormatError(f"{self._name}: unknown pickle protocol")
            elif code == _op(P.FRAME):
                self._u("<Q")  # frames only group bytes; the lengths below are checked anyway
            elif code == _op(P.STOP):
                self.end = self.pos
                if len(stack) != 1 or stack[0] is _MARK:
                    raise FormatError(f"{self._name}: corrupt pickle (STOP with {len(stack)} values on the stack)")
                return stack[0]
            elif code == _op(P.MARK):
                stack.append(_MARK)
            elif code == _op(P.POP):
                self._pop(stack)
            elif code == _op(P.POP_MARK):
                self._pop_mark(stack)
            elif code == _op(P.DUP):
                stack.append(self._top(stack))
            # ---- constants
            elif code == _op(P.NONE):
                stack.append(None)
            elif code == _op(P.NEWTRUE):
                stack.append(True)
            elif code == _op(P.NEWFALSE):
                stack.append(False)
            elif code == _op(P.BININT):
                stack.append(self._u("<i"))
            elif code == _op(P.BININT1):
                stack.append(self._read(1)[0])
            elif code == _op(P.BININT2):
                stack.append(self._u("<H"))
            elif code in (_op(P.LONG1), _op(P.LONG4)):
                n = self._read(1)[0] if code == _op(P.LONG1) else self._u("<i")
                if n > limits.MAX_INT_BYTES:
                    raise FormatError(f"{self._name}: an integer of {n} bytes in the pickle; the limit is "
                                      f"rumus.io.limits.MAX_INT_BYTES = {limits.MAX_INT_BYTES}")
                stack.append(int.from_bytes(self._read(n), "little", signed=True))
            elif code == _op(P.BINFLOAT):
                stack.append(struct.unpack(">d", self._read(8))[0])
            elif code in (_op(P.BINUNICODE), _op(P.SHORT_BINUNICODE), _op(P.BINUNICODE8)):
                fmt = {_op(P.BINUNICODE): "<I", _op(P.SHORT_BINUNICODE): "<B", _op(P.BINUNICODE8): "<Q"}[code]
                stack.append(self._read(self._u(fmt)).decode("utf-8", "surrogatepass"))
            elif code in (_op(P.SHORT_BINSTRING), _op(P.BINSTRING)):  # a Python 2 str: UTF-8 text, as torch reads it
                n = self._read(1)[0] if code == _op(P.SHORT_BINSTRING) else self._u("<i")
                stack.append(self._read(n).decode("utf-8"))
            elif code in (_op(P.SHORT_BINBYTES), _op(P.BINBYTES), _op(P.BINBYTES8)):
                fmt = {_op(P.SHORT_BINBYTES): "<B", _op(P.BINBYTES): "<I", _op(P.BINBYTES8): "<Q"}[code]
                stack.append(self._read(self._u(fmt)))
            # ---- containers
            elif code == _op(P.EMPTY_TUPLE):
                stack.append(())
            elif code == _op(P.TUPLE):
                stack.append(tuple(self._pop_mark(stack)))
            elif code in (_op(P.TUPLE1), _op(P.TUPLE2), _op(P.TUPLE3)):
                k = {_op(P.TUPLE1): 1, _op(P.TUPLE2): 2, _op(P.TUPLE3): 3}[code]
                if len(stack) < k or any(v is _MARK for v in stack[-k:]):
                    raise FormatError(f"{self._name}: corrupt pickle (a tuple of missing values)")
                packed = tuple(stack[-k:])
                del stack[-k:]
                stack.append(packed)
            elif code == _op(P.EMPTY_LIST):
                stack.append([])
            elif code == _op(P.LIST):
                stack.append(self._pop_mark(stack))
            elif code == _op(P.EMPTY_DICT):
                stack.append({})
            elif code == _op(P.DICT):
                items = self._pop_mark(stack)
                d: dict[Any, Any] = {}
                self._set_items(d, items)
                stack.append(d)
            elif code == _op(P.EMPTY_SET):
                stack.append(set())
            elif code == _op(P.FROZENSET):
                stack.append(frozenset(self._pop_mark(stack)))
            elif code == _op(P.APPEND):
                value = self._pop(stack)
                self._target(stack, list, "APPEND").append(value)
            elif code == _op(P.APPENDS):
                items = self._pop_mark(stack)
                self._target(stack, list, "APPENDS").extend(items)
            elif code == _op(P.SETITEM):
                value, key = self._pop(stack), self._pop(stack)
                self._set_items(self._target(stack, dict, "SETITEM"), [key, value])
            elif code == _op(P.SETITEMS):
                items = self._pop_mark(stack)
                self._set_items(self._target(stack, dict, "SETITEMS"), items)
            elif code == _op(P.ADDITEMS):
                items = self._pop_mark(stack)
                self._target(stack, set, "ADDITEMS").update(items)
            # ---- memo
            elif code in (_op(P.BINPUT), _op(P.LONG_BINPUT)):
                idx = self._read(1)[0] if code == _op(P.BINPUT) else self._u("<I")
                memo[idx] = self._top(stack)
            elif code == _op(P.MEMOIZE):
                memo[len(memo)] = self._top(stack)
            elif code in (_op(P.BINGET), _op(P.LONG_BINGET)):
                idx = self._read(1)[0] if code == _op(P.BINGET) else self._u("<I")
                if idx not in memo:
                    raise FormatError(f"{self._name}: corrupt pickle (memo entry {idx} was never stored)")
                stack.append(memo[idx])
            # ---- the risky ones, each narrowed
            elif code == _op(P.GLOBAL):
                module = self._line()
                stack.append(self._global(module, self._line()))
            elif code == _op(P.STACK_GLOBAL):
                name, module = self._pop(stack), self._pop(stack)
                if not (isinstance(module, str) and isinstance(name, str)):
                    raise FormatError(f"{self._name}: corrupt pickle (STACK_GLOBAL of non-strings)")
                stack.append(self._global(module, name))
            elif code == _op(P.REDUCE):
                args, func = self._pop(stack), self._pop(stack)
                if id(func) not in self._callables or not callable(func):
                    raise FormatError(f"{self._name}: the pickle calls {type(func).__name__!s:.40}, which is not an "
                                      f"allowed rebuild function; refusing to load it")
                if type(args) is not tuple:
                    raise FormatError(f"{self._name}: corrupt pickle (REDUCE arguments are not a tuple)")
                stack.append(func(*args))
            elif code == _op(P.BUILD):
                state = self._pop(stack)
                self._build(self._top(stack), state)
            elif code in (_op(P.BINPERSID),):
                stack.append(self._persistent_load(self._pop(stack)))
            else:
                raise FormatError(f"{self._name}: the pickle uses opcode {bytes([code])!r} at byte {at}, which "
                                  f"torch.save never writes and RUMUS does not run (weights-only loading)")

    def _pop(self, stack: list[Any]) -> Any:
        if not stack or stack[-1] is _MARK:
            raise FormatError(f"{self._name}: corrupt pickle (an opcode takes a value the stack does not hold)")
        return stack.pop()

    def _top(self, stack: list[Any]) -> Any:
        if not stack or stack[-1] is _MARK:
            raise FormatError(f"{self._name}: corrupt pickle (an opcode with an empty stack)")
        return stack[-1]

    def _target(self, stack: list[Any], kind: type, opcode: str) -> Any:
        top = self._top(stack)
        ok = type(top) in ((dict, OrderedDict) if kind is dict else (kind,))
        if not ok:
            raise FormatError(f"{self._name}: the pickle applies {opcode} to a {type(top).__name__!s:.40}; only "
                              f"a {kind.__name__} the file itself made may be filled")
        return top

    def _set_items(self, target: dict[Any, Any], items: list[Any]) -> None:
        if len(items) % 2:
            raise FormatError(f"{self._name}: corrupt pickle (a dict item without its value)")
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    def _build(self, inst: Any, state: Any) -> None:
        """torch's rule, narrowed: BUILD sets attributes only on an OrderedDict (state_dict `_metadata`)."""
        if type(inst) is not OrderedDict:
            raise FormatError(f"{self._name}: the pickle sets the state of a {type(inst).__name__!s:.40} (BUILD); "
                              f"only an OrderedDict's attributes may be set. Refusing: BUILD on a dtype, "
                              f"storage or tensor could change objects outside this file")
        if not isinstance(state, Mapping) or not all(
                isinstance(k, str) and k.isidentifier() and not k.startswith("__") for k in state):
            raise FormatError(f"{self._name}: an OrderedDict's BUILD state must map plain attribute names")
        inst.__dict__.update(state)


def check_exhausted(unpickler: RestrictedUnpickler, what: str) -> None:
    """Nothing may follow the pickle of a zip entry: trailing bytes mean the file was spliced."""
    if unpickler.end != len(unpickler._data):
        raise FormatError(f"{unpickler._name}: {len(unpickler._data) - unpickler.end} bytes follow the end of "
                          f"{what}")
