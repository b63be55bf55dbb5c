"""A griffe extension: doctest examples in docstrings render as Python code blocks.

The docstrings hold bare ``>>>`` sessions, which doctest runs; Markdown would read their
``>`` as quotes. Each run of lines from a ``>>>`` line to the next blank line becomes a
fenced ``pycon`` block, without its ``# doctest:`` directives.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_PROMPT = re.compile(r"^(\s*)>>>")
_FLAGS = re.compile(r"\s*# doctest:.*$")  # for the test runner, not for the reader


def fence(text: str) -> str:
    out: list[str] = []
    indent = None
    for line in text.splitlines():
        if indent is None:
            match = _PROMPT.match(line)
            if match:
                indent = match.group(1)
                out.append(f"{indent}```pycon")
        elif not line.strip():
            out.append(f"{indent}```")
            indent = None
        out.append(_FLAGS.sub("", line) if indent is not None else line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence(obj.docstring.value)
