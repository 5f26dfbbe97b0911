r"""Showing an identifier that came from outside: a name, a namespace, a kind.

Such text comes from a manifest, a command line or a store written before names were
checked, and it ends up in messages, logs and tables. A control character in it printed
raw forges lines of output (a newline), rewrites them (a carriage return) or drives the
terminal (ESC sequences); a lone surrogate cannot even be encoded. Text whose every
character prints is shown as it is; anything else is shown escaped as Python's ``repr`` does,
quotes included so that the escaping shows (``'a\nb'``), as Kubernetes quotes names
with Go's ``%q`` in its messages. A name admission accepts is always shown as it is.
"""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: str, *, quoted: bool = False) -> str:
    r"""``text`` as it may be printed: itself when every character prints (in double
    quotes with ``quoted``), else escaped like ``repr`` (``'a\nb'``, always quoted)."""
    if text.isprintable():
        return f'"{text}"' if quoted else text
    return repr(text)
