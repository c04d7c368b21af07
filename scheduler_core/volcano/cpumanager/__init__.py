"""Volcano's CPU provider (`numaaware/provider/cpumanager`, ENGINE.md §3.5): its own CPU selection."""
