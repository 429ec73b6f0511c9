"""The simulated Slurm cluster of the tests and CI: its facts and config files (bin/simslurm, config/simulated.py)."""
