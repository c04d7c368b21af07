"""`numaweb-agent` / `python -m scheduler_core.agent`: the node agent's command line (see the package)."""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

from . import Options, default_node_name, run


def parse(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(prog="numaweb-agent", description=(
        "Report this node's topology, devices and kubelet state to numaweb (read-only on the node)."))
    parser.add_argument("--server", required=True, help="numaweb's base URL, e.g. https://numaweb.example.org")
    parser.add_argument("--token", default=os.environ.get("NUMAWEB_AGENT_TOKEN"),
                        help="an agent token (default: the NUMAWEB_AGENT_TOKEN environment variable)")
    parser.add_argument("--cluster", required=True, help="the cluster's name in numaweb")
    parser.add_argument("--node-name", default=default_node_name(),
                        help="this node's name (default: NODE_NAME, else the host name)")
    parser.add_argument("--sysfs", type=pathlib.Path, default=pathlib.Path("/sys"))
    parser.add_argument("--proc", type=pathlib.Path, default=pathlib.Path("/proc"))
    parser.add_argument("--kubelet-root", type=pathlib.Path, default=pathlib.Path("/var/lib/kubelet"))
    parser.add_argument("--kubelet-config", type=pathlib.Path, default=pathlib.Path("/var/lib/kubelet/config.yaml"))
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between reports (default 60)")
    parser.add_argument("--once", action="store_true", help="send one report and exit")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("--token (or NUMAWEB_AGENT_TOKEN) is required")
    if not args.node_name:
        parser.error("--node-name: empty")
    if not args.interval > 0:
        parser.error(f"--interval: {args.interval} is not a positive number of seconds")
    if not args.sysfs.is_dir():
        parser.error(f"--sysfs: {args.sysfs} is not a folder")
    return Options(server=args.server, token=args.token, cluster=args.cluster, node_name=args.node_name,
                   sysfs=args.sysfs, proc=args.proc, kubelet_root=args.kubelet_root,
                   kubelet_config=args.kubelet_config, interval=args.interval, once=args.once)


def main(argv: list[str] | None = None) -> int:
    try:
        return run(parse(argv))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
