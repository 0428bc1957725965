"""The board: leaderboards, breakdowns, run comparisons and their statistics, from episode rows.

``arrow_board`` computes them on Arrow tables; ``stats`` holds the
statistics; ``compare`` compares two runs; ``cells`` and ``render`` turn a
table into terminal, Markdown, CSV or JSON text.
"""
