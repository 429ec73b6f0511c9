"""Performance history: samples from perf logs and the results database, their comparison, plots, scaling."""
