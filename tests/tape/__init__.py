"""Tests of the engine, ``tape/``: one test file per source module, ``tape/<module>.py``
tested in ``tests/tape/test_<module>.py``, so that a change to a module has one obvious
test file (``test_errors.py`` holds the rows of docs/errors.md, whatever module raises
them). Tests that exercise the whole library rather than one module (fuzzing, higher
order, huge tapes, threads, the rules' fast paths, Dask, CuPy, the docs) live in
``tests/``; shared helpers (``sweeps.py``) stay beside the tests that use them."""
