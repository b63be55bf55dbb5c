"""Tests of the rules, ``sensitivities/``: one test file per source module,
``sensitivities/<family>.py`` tested in ``tests/sensitivities/test_<family>.py`` (the
registry, the counterparts and the pushforwards included), so that a change to a module
has one obvious test file. Tests that exercise the whole library rather than one module
live in ``tests/``; shared helpers (``cases.py``) stay beside the tests that use them."""
