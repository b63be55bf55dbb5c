"""Ctrl-C at any point of a call leaves no state behind (a bounded storm; the long one is
scripts/interrupt_storm.py)."""

from tests.interrupt_storm import left_behind, storm


def test_interrupts_at_random_points_leave_nothing_behind():
    interrupted = storm(250, seed=1)
    assert sum(interrupted.values()) > 100  # most calls were cut somewhere
    assert all(interrupted.values())  # every kind of call was
    assert not left_behind()
