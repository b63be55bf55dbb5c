"""uninterrupted: a Ctrl-C inside the section is raised when it ends, not before."""

import _thread
import threading

import pytest

from tape.core.interrupts import uninterrupted


def test_an_interrupt_inside_is_raised_at_the_end():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            _thread.interrupt_main()  # as a Ctrl-C: the handler runs at the next bytecode
            for i in range(1000):
                steps.append(i)  # still running: the interrupt is held back
    assert len(steps) == 1000


def test_nested_sections_raise_once_at_the_outermost_end():
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            with uninterrupted():
                _thread.interrupt_main()
                sum(range(1000))
            reached.append("inner ended")  # not raised at the inner end
            sum(range(1000))
    assert reached == ["inner ended"]


def test_no_interrupt_no_effect_and_other_threads_pass_through():
    with uninterrupted():
        pass
    done = []
    worker = threading.Thread(target=lambda: done.append(uninterrupted().__enter__()))
    worker.start()
    worker.join()
    assert done == [None]
