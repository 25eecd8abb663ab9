"""fxrl._class_patch.CountedPatch, the scoped class patching behind fxrl's inductor fixes:
counted nesting, threads, and the class's own or inherited attributes back after."""

import threading

from fxrl._class_patch import CountedPatch


class Base:
    def inherited(self) -> str:
        return "base"


class Child(Base):
    def own(self) -> str:
        return "own"


def test_patches_hold_while_any_block_is_open_and_the_class_gets_its_own_back():
    def own(self):
        return "patched " + patch.saved["own"](self)

    def inherited(self):
        return "patched " + patch.saved["inherited"](self)

    patch = CountedPatch(lambda: Child, {"own": own, "inherited": inherited})
    original_own = Child.__dict__["own"]
    with patch.applied():
        with patch.applied():  # nested: counted
            assert Child().own() == "patched own" and Child().inherited() == "patched base"
        assert patch.depth == 1 and Child().own() == "patched own"
    assert patch.depth == 0
    assert Child.__dict__["own"] is original_own
    assert "inherited" not in Child.__dict__  # removed again, not copied onto the class
    assert Child().inherited() == "base" and Base().inherited() == "base"


def test_blocks_in_two_threads_are_counted_together():
    patch = CountedPatch(lambda: Child, {"own": lambda self: "patched"})
    inside, release = threading.Event(), threading.Event()

    def other():
        with patch.applied():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    with patch.applied():
        assert patch.depth == 2
    assert Child().own() == "patched"  # the other thread's block is still open
    release.set()
    t.join(5)
    assert patch.depth == 0 and Child().own() == "own"


def test_a_block_applied_with_false_changes_nothing_and_counts_nothing():
    patch = CountedPatch(lambda: Child, {"own": lambda self: "patched"})
    with patch.applied(False):
        assert Child().own() == "own" and patch.depth == 0 and not patch.saved
