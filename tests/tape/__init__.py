"""Tests of tape/, mirroring its folders: one test file per source module,
``tape/<layer>/<module>.py`` tested in ``tests/tape/<layer>/test_<module>.py`` (layers
``core``, ``transforms``, ``tools``), so that a change to a module has one obvious test
file (``core/test_errors.py`` holds the rows of docs/errors.md, whatever module raises
them). ``test_layers.py`` holds the package to its layering rules. Tests that exercise
the whole library rather than one module (fuzzing, higher order, huge tapes, threads, the
rules' fast paths, Dask, CuPy, the docs) live in ``tests/``; shared helpers
(``sweeps.py``) stay beside the tests that use them."""
