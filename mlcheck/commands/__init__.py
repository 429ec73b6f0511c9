"""The commands over stored results: mlcheck-report, mlcheck-baseline and their shared plumbing."""
