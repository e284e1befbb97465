"""Fixtures shared by the tests that declare into the model's tables at run time (the recipes
of docs/CHANGING.md made in a fixture)."""

from __future__ import annotations

import pytest


@pytest.fixture
def restore_tables():
    """Every table a change declares into (the steps, the fault kinds, the other transitions,
    the store statements, the properties) and the names it declares at run time
    (model/vocab.py, spec/vocab.py), restored afterwards."""
    from failclosed.model import steps, store, vocab
    from failclosed.spec import properties

    tables = (steps.ACTIONS, steps.REAPER_ACTIONS, steps.FAULTS, steps.OTHER_TRANSITIONS,
              store.STATEMENTS, properties.SAFETY, properties.LIVENESS)
    saved = [dict(t) for t in tables]
    names_before = vocab.extensions()
    yield
    for table, old in zip(tables, saved, strict=True):
        table.clear()
        table.update(old)
    vocab.restore_extensions(names_before)
