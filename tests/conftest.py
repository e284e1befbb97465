"""Fixtures shared by the tests: the scope cache of the session, the width of piped output, and
the tables the tests that declare into the model's tables at run time restore (the recipes of
docs/CHANGING.md made in a fixture)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _scope_cache_of_this_session(tmp_path_factory):
    """``FAILCLOSED_CACHE`` (the scope cache, default ~/.cache/failclosed) is a directory of
    this session's, inherited by the commands the tests start: a test never reads results a
    user's earlier run cached, never writes into the user's cache, and two sessions (or two
    pytest-xdist workers, each with its own temporary root) never share one. A test that sets
    or removes the variable itself (monkeypatch) still does."""
    mp = pytest.MonkeyPatch()
    mp.setenv("FAILCLOSED_CACHE", str(tmp_path_factory.mktemp("failclosed-cache")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _piped_width(monkeypatch):
    """Every test starts without ``COLUMNS``: the command line's tables and wrapped lines are
    then those of piped output (100 columns, cli/checking.table_width), whatever the shell
    or the runner (an xdist worker) exported; a test about the width sets it itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def restore_tables():
    """Every table a change declares into (the steps, the actors, the fault kinds, the other
    transitions: ``model.steps.extended``; the store statements, the properties) and the
    names it declares at run time (model/vocab.py, spec/vocab.py), restored afterwards."""
    from failclosed.model import steps, store, vocab
    from failclosed.spec import properties

    tables = (store.STATEMENTS, properties.SAFETY, properties.LIVENESS)
    saved = [dict(t) for t in tables]
    names_before = vocab.extensions()
    with steps.extended():
        yield
    for table, old in zip(tables, saved, strict=True):
        table.clear()
        table.update(old)
    vocab.restore_extensions(names_before)
