"""Koordinator's NodeNUMAResource plugin (koordinator-sh/koordinator `pkg/scheduler/plugins/nodenumaresource/`):
so far its CPU accumulator (`cpu_accumulator`), the choice of CPUs under its bind and exclusive policies."""
