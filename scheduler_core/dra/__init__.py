"""Dynamic Resource Allocation (resource.k8s.io): the devices drivers publish in ResourceSlices, the claims
that ask for them, upstream's structured allocator, and the check of a pod's devices against the NUMA nodes
its kubelet pins CPUs and memory on (ENGINE.md §8). It sits below `formats/`, which reads its objects from
a kubectl snapshot, so it reads its own JSON and imports only `model` and `errors`."""
