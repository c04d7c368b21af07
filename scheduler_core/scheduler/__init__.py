"""Sessions (ENGINE.md §4): the cluster, the session loop, the profiles, explanations and comparisons."""
