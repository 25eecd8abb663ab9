"""One way to say "not a name I know": the closest valid name first, then the valid ones.

    raise ValueError(unknown(mode, MODES, "mode", where="resize"))
    # resize: unknown mode 'bilinar'. Did you mean 'bilinear'? Expected one of: nearest,
    # nearest-exact, bilinear.

The suggestion comes before the list because lists grow (the env ids) and a command
line may shorten a long message. ``unknown`` returns the message, so the caller keeps
its own exception type (``ValueError`` for a bad value, ``TypeError`` for a bad keyword,
``KeyError`` for a lookup). ``ArgumentParser`` is argparse with the same rule for flags
and one-line errors (``UsageError``, which ``fxrl``'s command line prints as one line).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Iterable
from typing import NoReturn

__all__ = ["ArgumentParser", "UsageError", "closest", "unknown"]


def closest(
    name: object,
    valid: Iterable[object],
    cutoff: float = 0.6,
    key: Callable[[str], str] | None = None,
) -> str | None:
    """The valid name most like ``name`` (difflib's ratio >= ``cutoff``), or None.

    ``key`` (optional) normalizes both sides before they are compared ("ALE/Pongg-v5" and
    "pongg"); the name returned is the valid one as given.
    """
    valid = [str(v) for v in valid]
    if key is None:
        found = difflib.get_close_matches(str(name), valid, 1, cutoff)
        return found[0] if found else None
    keyed = {}
    for v in valid:
        keyed.setdefault(key(v), v)
    found = difflib.get_close_matches(key(str(name)), list(keyed), 1, cutoff)
    return keyed[found[0]] if found else None


def unknown(
    name: object,
    valid: Iterable[object],
    what: str,
    *,
    where: str = "",
    cutoff: float = 0.6,
    key: Callable[[str], str] | None = None,
) -> str:
    """The message for ``name``, which is not one of ``valid``.

    Args:
      name: what the user gave.
      valid: the names that would have worked, in the order to list them.
      what: what ``name`` was meant to be ("env id", "mode", "activation").
      where: the function or command that refused it (a ``where: `` prefix), or "".
      cutoff: how alike (difflib's ratio, 0..1) a name must be to be suggested.
      key: normalizes names before they are compared (case, prefixes), or None.
    Returns:
      ``"{where}: unknown {what} {name!r}. Did you mean {close!r}? Expected one of: a, b."``
      (no suggestion when nothing is close enough).
    """
    valid = [str(v) for v in valid]
    guess = closest(name, valid, cutoff, key)
    hint = f" Did you mean {guess!r}?" if guess is not None else ""
    prefix = f"{where}: " if where else ""
    return f"{prefix}unknown {what} {name!r}.{hint} Expected one of: {', '.join(valid)}."


class UsageError(ValueError):
    """A mistake on a command line, said in one line (``fxrl``'s CLI prints it as is)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one ``UsageError`` line naming the closest known flag."""

    def error(self, message: str) -> NoReturn:
        flags = [s for action in self._actions for s in action.option_strings]
        hint = ""
        for word in message.split():
            if word.startswith("--"):
                guess = closest(word.strip(","), flags)
                hint = f" Did you mean {guess}?" if guess is not None else ""
                break
        raise UsageError(f"{message}.{hint} See {self.prog} --help.")
