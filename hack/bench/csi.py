"""ovirt-csi-driver's cost per volume: `python -m hack.bench.csi [--volumes N] [--profile fast|realtime]`.

The driver runs as a process on a unix socket against the simulator; the benchmark calls it as the sidecars do
(CreateVolume, ControllerPublishVolume, ControllerUnpublishVolume, DeleteVolume) for N volumes one after another,
and prints the latency of CreateVolume (which answers once the engine reports the disk `ok`) and of each call,
and the engine requests per volume lifecycle by endpoint, from the simulator's own counters.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from hack.csi_host import GIB, CsiClient, make_vm, running_driver
from hack.ovirtsim.testing import running_simulator

CALLS = ("CreateVolume", "ControllerPublishVolume", "ControllerUnpublishVolume", "DeleteVolume")


def run(n: int, profile: str) -> None:
    with tempfile.TemporaryDirectory() as d, running_simulator(Path(d) / "sim", profile=profile) as sim:
        vm = make_vm(sim)
        with running_driver(Path(d) / "driver", sim, services="controller") as endpoint:
            csi = CsiClient(endpoint)
            pb = csi.pb
            csi.create(f"pvc-warmup-{uuid.uuid4()}")  # first login and connection out of the figures
            sim.control.reset_counts()
            took: dict[str, list[float]] = {c: [] for c in CALLS}
            for _ in range(n):
                t = time.monotonic()
                vol = csi.create(f"pvc-{uuid.uuid4()}", required=GIB, timeout=120)
                took["CreateVolume"].append(time.monotonic() - t)
                for call, req in (
                        ("ControllerPublishVolume", pb.ControllerPublishVolumeRequest(
                            volume_id=vol.volume_id, node_id=vm, volume_capability=csi.mount_cap())),
                        ("ControllerUnpublishVolume", pb.ControllerUnpublishVolumeRequest(
                            volume_id=vol.volume_id, node_id=vm)),
                        ("DeleteVolume", pb.DeleteVolumeRequest(volume_id=vol.volume_id))):
                    t = time.monotonic()
                    getattr(csi.controller, call)(req, timeout=120)
                    took[call].append(time.monotonic() - t)
            counts = Counter({k: v for k, v in sim.control.counts().items() if not k.startswith("POST /sso")})
            csi.close()
    print(f"ovirt-csi-driver, {n} volumes on the {profile} simulator profile")
    for call in CALLS:
        xs = took[call]
        print(f"  {call:26s} median {statistics.median(xs) * 1000:7.1f} ms   max {max(xs) * 1000:7.1f} ms")
    total = sum(counts.values())
    print(f"  oVirt requests per volume lifecycle: {total / n:.1f}")
    for endpoint, count in counts.most_common():
        print(f"    {count / n:5.1f}  {endpoint}")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m hack.bench.csi", description=__doc__.splitlines()[0])
    p.add_argument("--volumes", type=int, default=20)
    p.add_argument("--profile", default="fast")
    args = p.parse_args()
    run(args.volumes, args.profile)


if __name__ == "__main__":
    main()
