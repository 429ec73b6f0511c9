"""Reading and judging a job's output: the ranks' facts and lines, and the sanity rules over them."""
