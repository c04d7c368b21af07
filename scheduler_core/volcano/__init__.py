"""Volcano's `numa-aware` plugin (ENGINE.md §3), laid out like `pkg/scheduler/plugins/numaaware/`: the
plugin, its policy merge, the CPU provider with Volcano's own `takeByTopology`, the scheduler cache and
the webhook's rules."""
