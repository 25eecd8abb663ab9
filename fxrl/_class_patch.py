"""Class attributes replaced for the length of a ``with`` block, as fxrl's inductor fixes
(``fxrl._codegen_patch``, ``fxrl._cpp_wrapper_patch``) need them: nested and concurrent
blocks are counted (a compile in one thread inside one in another), the replacements go
in when the first block opens and the class's own attributes come back when the last
one closes (an inherited attribute is removed again rather than copied onto the class)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

_INHERITED = object()  # the class did not define the attribute itself


class CountedPatch:
    """``with patch.applied(): ...`` sets ``patches`` on ``owner()`` (imported lazily, at
    the first block); ``patch.applied(False)`` changes nothing (a fix whose torch is not
    this one). ``saved[name]`` is what the class resolved ``name`` to before: what a
    replacement calls to run the original."""

    def __init__(self, owner: Callable[[], type], patches: dict[str, Any]) -> None:
        self.owner, self.patches = owner, patches
        self.saved: dict[str, Any] = {}
        self.depth = 0
        self._own: dict[str, Any] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def applied(self, when: bool = True) -> Iterator[None]:
        if not when:
            yield
            return
        cls = self.owner()
        with self._lock:
            if self.depth == 0:
                for name, replacement in self.patches.items():
                    self._own[name] = cls.__dict__.get(name, _INHERITED)
                    self.saved[name] = getattr(cls, name)
                    setattr(cls, name, replacement)
            self.depth += 1
        try:
            yield
        finally:
            with self._lock:
                self.depth -= 1
                if self.depth == 0:
                    for name in self.patches:
                        if self._own[name] is _INHERITED:
                            delattr(cls, name)
                        else:
                            setattr(cls, name, self._own[name])
