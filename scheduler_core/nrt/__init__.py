"""scheduler-plugins' NodeResourceTopologyMatch plugin (ENGINE.md §7): a node's NodeResourceTopology
zones (`zones`), the Filter (`filter`), the Score and its strategies (`score`) and the reserve cache
that keeps assumed pods within a session (`cache`). Like `volcano/`, a model of one program that
knows nothing of the kubelet's managers: it reads only what the NRT object publishes."""
