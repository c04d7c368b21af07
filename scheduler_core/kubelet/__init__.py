"""The kubelet (ENGINE.md §2), laid out like its `pkg/kubelet/cm/`: `topologymanager/` (hints, policies,
the merge), `cpumanager/`, `memorymanager/`, `devicemanager/` (the hint providers), the admission of a
pod on a node and the check of a node's real checkpoint files against the model."""
