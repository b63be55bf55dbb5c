"""Tests of tape/transforms/: tape/transforms/<module>.py in test_<module>.py."""
