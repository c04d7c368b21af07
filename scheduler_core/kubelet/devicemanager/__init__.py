"""The Device Manager (ENGINE.md §2.9): device hints, `filter_by_affinity` and allocation."""
