"""How a wrapper gets a result into the memo: read it, else compute it, then read it again."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from landscape.store.cache import NotCached

T = TypeVar("T")


def stored_else_computed(read: Callable[[], T], compute: Callable[[], object]) -> T:
    """The app's one way to a stored result: ``read()`` (memoised in ``st.cache_data``, from the
    disk cache; :class:`NotCached` when it is not there), else ``compute()`` (which stores it on
    disk, under the page's progress: outside the memo, which must not draw on the page), then
    ``read()`` again, so that the memo holds it."""
    try:
        return read()
    except NotCached:
        compute()
        return read()
