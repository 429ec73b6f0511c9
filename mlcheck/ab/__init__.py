"""Two images compared in one job: the rounds of steps (rounds.py) and the paired verdict (rule.py)."""
