"""What a real node costs here: `python -m hack.bench.real_nodes [--sample-s 30]`.

On a control plane of its own, one real node (hack/controlplane/nodes.py) with the pause and product images: the
product image's size (docker archive, and unpacked in containerd), the time to import it, the node's time to Ready,
a pod's start (the pause image, and the product image, whose first container unpacks it), kube-proxy's time to
serve the `kubernetes` Service (hack/controlplane/proxy.py), then, with those two pods running, the CPU (per cent of
one core over --sample-s seconds) and RSS of the kubelet, containerd, the shims and kube-proxy. A warm `make images`
(nothing to build) is timed too; a cold image build is `make images` on an empty cache (docs/images.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from hack import images
from hack.bench.procstat import cpu_seconds, rss_mib
from hack.controlplane.build import Binaries, ensure_binaries
from hack.controlplane.cluster import LocalControlPlane
from hack.controlplane.nodes import PAUSE_IMAGE, RealNode
from hack.controlplane.proxy import KubeProxy
from hack.images import product


def _shims(node: RealNode) -> list[int]:
    address = str(node.containerd_socket)
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if "shim" in argv[0] and address in argv:
                out.append(int(proc.name))
    return out


def _pod(name: str, image: str, command: list[str] | None = None) -> str:
    container = {"name": "main", "image": image, "imagePullPolicy": "Never",
                 **({"command": command} if command else {})}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                       "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}})


def run(sample_s: float) -> None:
    t = time.monotonic()
    pause, archive = images.archive("pause"), images.archive(product.NAME)
    warm_images = time.monotonic() - t
    kubectl = str(ensure_binaries(Binaries()).path("kubectl"))
    with tempfile.TemporaryDirectory(prefix="omc-bench-nodes-") as d, LocalControlPlane(Path(d) / "plane") as plane:
        def k(*args: str, stdin: str | None = None) -> str:
            return subprocess.run([kubectl, f"--kubeconfig={plane.kubeconfig('admin')}", *args], input=stdin,
                                  capture_output=True, text=True, check=True).stdout

        node = RealNode(plane, "bench-node")
        try:
            node.start(images=(pause,))
            t = time.monotonic()
            node.import_image(archive)
            import_s = time.monotonic() - t
            ready_s = node.wait_ready()
            pod_s = {}
            for name, image, command in (("pause", PAUSE_IMAGE, None), ("product", product.TAG, ["sleep", "infinity"])):
                t = time.monotonic()
                k("apply", "-f", "-", stdin=_pod(name, image, command))
                k("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=300s")
                pod_s[name] = time.monotonic() - t
            t = time.monotonic()
            with KubeProxy(plane) as proxy:
                proxy_s = time.monotonic() - t
                unpacked = subprocess.run(["du", "-sm", str(node.dir / "containerd" / "root")], capture_output=True,
                                          text=True).stdout.split()[0]
                procs = {"kubelet": [node.pids["kubelet"]], "containerd": [node.pids["containerd"]],
                         "shims": _shims(node), "kube-proxy": [proxy.pid]}
                before = {n: sum(cpu_seconds(p) for p in ps) for n, ps in procs.items()}
                time.sleep(sample_s)
                cpu = {n: (sum(cpu_seconds(p) for p in ps) - before[n]) / sample_s * 100 for n, ps in procs.items()}
                rss = {n: sum(rss_mib(p) for p in ps) for n, ps in procs.items()}
        finally:
            node.stop()
    print(f"real node figures (load average {os.getloadavg()[0]:.1f})")
    # Both waits below include another process's turn: an image build it runs (one at a time per image), the
    # machine's one kube-proxy (proxy.py's lock).
    print(f"  images ready (keys, or waiting for a build) {warm_images:6.1f} s")
    print(f"  product image: archive {archive.stat().st_size / 2**20:.0f} MiB, containerd's root with both images "
          f"{unpacked} MiB, import {import_s:.1f} s")
    print(f"  node Ready after its kubelet starts {ready_s:6.1f} s")
    for name, s in pod_s.items():
        print(f"  {name} pod Ready after its creation {s:6.1f} s")
    print(f"  kube-proxy serving the kubernetes Service (with its lock) {proxy_s:.1f} s")
    print(f"  with two pods, over {sample_s:.0f} s:")
    for name in procs:
        print(f"    {name:11s} {cpu[name]:5.1f} % of one core  {rss[name]:6.1f} MiB RSS "
              f"({len(procs[name])} process(es))")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m hack.bench.real_nodes", description=__doc__.splitlines()[0])
    p.add_argument("--sample-s", type=float, default=30.0, help="how long CPU use is sampled")
    run(p.parse_args().sample_s)


if __name__ == "__main__":
    main()
