"""Byte-level tokenizer: token id = byte value (vocab 256), so any text round-trips and no vocabulary file
is needed. Streaming decodes incrementally, holding back the bytes of an unfinished UTF-8 character."""

from __future__ import annotations

import codecs

VOCAB_SIZE = 256


def encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def decode(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


class StreamDecoder:
    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token: int) -> str:
        return str(self._dec.decode(bytes([token])))

    def flush(self) -> str:
        return str(self._dec.decode(b"", final=True))
