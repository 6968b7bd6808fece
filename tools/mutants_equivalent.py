"""Equivalent mutants, reviewed by hand: each changes the code but no run can tell it from the original.

``tools/mutants.py`` does not run these, and leaves them out of the score. Keys are mutant ids as
``python tools/mutants.py --list`` prints them; the value says why the change cannot be seen (a
performance threshold, a value nothing reads, a branch no state reaches). ``tests/test_mutants.py``
fails when an id here no longer names a mutant, so the list cannot go stale silently.
"""

from __future__ import annotations

EQUIVALENT: dict[str, str] = {}
