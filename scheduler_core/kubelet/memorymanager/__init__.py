"""The Memory Manager's static policy (ENGINE.md §2.8): the machine state, hints and allocation."""
