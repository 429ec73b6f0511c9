"""Performance history: samples read from perf logs and the results database, selections, the comparison rule and its plots."""
