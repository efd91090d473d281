"""Containers that a kernel called from Python unboxes as one object.

A kernel called from Python types and unboxes each argument: a tuple of tuples of
arrays (a model's ModelArrays, a block's scratch, a phase's program) costs Numba's
dispatcher microseconds on every call.  What does not change between calls is
therefore passed *held*: :func:`held` puts it in a :class:`Held`, a Numba structure
of one field ``item`` (typed from Python by a lookup, unboxed with one reference
count); a kernel reads ``holder.item``.  It replaces the typed List of one item used
before, whose methods (new list, append, pop, getitem: their code grows with the
item's reference counting, one increment per array) Numba compiled again for every
item type, about 5.5 s each, seven item types in the first ur5 solve.  The
structure's constructor :func:`_held` compiles once per item type, is cached, and
holds only one reference.  Measured on the first FDDP solve of the ur5 reaching task
(30 knots, an empty cache, CPU time, load 11-13): the List methods 46.3 s before
(getitem 20.3 over 14 specializations, pop 8.7, the list's making 8.0 + 1.3, append
4.7 + 3.4), the holders 8.1 s now (:func:`_held` 5.0 over six item types, its
constructor 3.2); the solve 257.6 s -> 224.9 s.  Passed to a kernel from Python, a
Held costs 0.82 us per call where the typed List cost 1.5-1.9 us (an item holding
ur5's ModelArrays and ten arrays; thread CPU time, interleaved, load 16).

A genuine list (the phases of a horizon, the blocks of a constrained solver) is a
typed List (:func:`typed_list`) of items of one type; a list of held items
(``[held(e) for e in entries]``) keeps its methods small: their item is one
reference.
"""
from numba.core import types
from numba.experimental import structref
from numba.typed import List

from ..dynamics.config import kernel


@structref.register
class HeldType(types.StructRef):
    """Numba type of :class:`Held`: one field ``item``."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Held(structref.StructRefProxy):
    """One item in a Numba structure (read it in compiled code as ``holder.item``; from
    Python it is not read: the proxy's getter compiles in every process)."""


structref.define_proxy(Held, HeldType, ["item"])


@kernel
def _held(item):
    return Held(item)


def held(item):
    """A :class:`Held` holding ``item`` (the same arrays, no copy)."""
    return _held(item)


@kernel
def _list_of(first):
    """A typed List holding ``first`` (compiled here and cached: typed Lists made from
    Python compile their methods in every process)."""
    items = List()
    items.append(first)
    return items


@kernel
def _push(items, item):
    items.append(item)


def typed_list(items):
    """A typed List of ``items`` (a non-empty sequence of one type)."""
    typed = _list_of(items[0])
    for item in items[1:]:
        _push(typed, item)
    return typed
