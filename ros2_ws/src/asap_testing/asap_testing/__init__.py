"""Test support shared by the asap packages' tests; depends on nothing of asap (package.xml)."""
