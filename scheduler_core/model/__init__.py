"""The data model (ENGINE.md §1): CPU sets and NUMA masks, quantities, machine topologies, pods and
jobs, kubelet settings and nodes. Data only: nothing here calls a manager or a scheduler."""
