"""KAI-Scheduler's `numa` plugin (ENGINE.md §4.2, `kai` profile): the node's NUMA zones as its
NodeResourceTopology publishes them (`zones`), a pod's alignment units (`requests`), the per-policy
evaluators (`evaluator`) and the plugin's in-cycle zone ledger, filter and score (`plugin`)."""
