"""Run one flow case (written by ``bench_flows.py --vs-simgrid``) in SimGrid; print JSON results.

Runs under the system ``/usr/bin/python3`` with Debian's ``python3-simgrid`` (3.32), which the
project's virtualenv cannot import. The platform is one full-routing zone: a host per route
endpoint, every link with the case's bandwidth and latency 0, and every route given explicitly as
its list of links (a link listed twice is crossed twice and, in SimGrid's max-min system, consumes
twice the flow's rate). The network model is CM02 -- plain max-min sharing -- with TCP-gamma 0 (no
window bound), no cross-traffic, bandwidth and latency factors 1 (the issue's settings).

One actor starts every flow at time 0 with ``Comm.sendto_async`` between its route's hosts, waits
for all of them and reads each one's finish time. Only ``Engine.run`` is timed.

Input (JSON): ``{"links": [[name, bytes_per_s], ...], "routes": [[src, dst, [link, ...]], ...],
"flows": [[route, bytes], ...]}`` (links and routes by index). Output (JSON on stdout):
``{"wall": seconds, "finish": [seconds per flow]}``.

Usage: ``/usr/bin/python3 benchmarks/simgrid_flows.py CASE.json``.
"""

from __future__ import annotations

import json
import sys
import time

import simgrid  # type: ignore[import-not-found]

CONFIG = [
    "--cfg=network/model:CM02",
    "--cfg=network/TCP-gamma:0",
    "--cfg=network/crosstraffic:0",
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/latency-factor:1",
    "--log=root.thres:critical",
]


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        case = json.load(f)
    engine = simgrid.Engine([sys.argv[0], *CONFIG])
    zone = simgrid.NetZone.create_full_zone("bench")
    links = [zone.create_link(name, float(bw)).set_latency(0).seal() for name, bw in case["links"]]
    hosts: dict[str, simgrid.Host] = {}

    def host(name: str) -> simgrid.Host:
        if name not in hosts:
            hosts[name] = zone.create_host(name, 1e9).seal()
        return hosts[name]

    ends: list[tuple[simgrid.Host, simgrid.Host]] = []
    for src, dst, route in case["routes"]:
        a, b = host(src), host(dst)
        hops = [simgrid.LinkInRoute(links[i]) for i in route]
        zone.add_route(a.netpoint, b.netpoint, None, None, hops, False)
        ends.append((a, b))
    zone.seal()
    flows = [(ends[r], int(size)) for r, size in case["flows"]]
    finish: list[float] = []

    def driver() -> None:
        comms = [simgrid.Comm.sendto_async(a, b, size) for (a, b), size in flows]
        simgrid.Comm.wait_all(comms)
        finish.extend(c.finish_time for c in comms)

    simgrid.Actor.create("driver", next(iter(hosts.values())), driver)
    start = time.perf_counter()
    engine.run()
    wall = time.perf_counter() - start
    json.dump({"wall": wall, "finish": finish}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
