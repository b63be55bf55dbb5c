"""The engine: tapes and their records, how a call becomes a Branch, the reverse pass,
``Node``'s operator surface, in-place writes and views, checks and errors.

It imports the rules' public names (``sensitivities``) and its own modules only: no
transform and no tool, not even inside a function. The layers above plug in through the
hooks it documents (``Tape.add`` and ``Tape.plain``, ``observing``,
``records.PICTURES``, ``conversions.SCIPY_COUNTERPARTS``); see ``tape/__init__.py``.
"""
