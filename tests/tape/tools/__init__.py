"""Tests of tape/tools/: tape/tools/<module>.py in test_<module>.py."""
