"""The CPU Manager's static policy (ENGINE.md §2.6–§2.7): reserved CPUs, hints, `take_by_topology`
(packed, spread, uncore cache, distributed) and the manager that allocates with them."""
