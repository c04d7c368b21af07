"""Koordinator's NodeNUMAResource plugin (koordinator-sh/koordinator `pkg/scheduler/plugins/nodenumaresource/`):
its CPU accumulator (`cpu_accumulator`), its scheduler-side topology manager merge (`hints`), its
resource manager (`allocation`) and the plugin's extension points (`plugin`)."""
