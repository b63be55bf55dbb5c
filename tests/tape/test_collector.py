"""gc_paused: the collector is off inside a pass, counted for nesting, and back as it was."""

import gc

from tape.collector import gc_paused


def test_gc_pause_is_counted_and_restores_the_collector_state():
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a collector the user turned off stays off
    finally:
        gc.enable()
