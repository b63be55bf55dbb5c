"""Tests of tape/core/: tape/core/<module>.py in test_<module>.py."""
