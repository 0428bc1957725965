"""The reward-hacking battery: tasks whose oracle solution attacks the grader (issue 24)."""
