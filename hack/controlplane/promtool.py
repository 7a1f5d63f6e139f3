"""promtool, Prometheus' own rule checker and rule unit-test runner, built from the Prometheus Go module at a pinned
release (go_tools.py says how): `make test` checks config/monitoring's alerts with it (docs/runbooks/README.md).

Built with the `remove_all_sd` tag: promtool would otherwise link every service-discovery plugin (the clouds' SDKs),
which rule checks never use and which would double its build time.
"""

from __future__ import annotations

import sys

from .go_tools import GoTool, build_tool

# A pinned release, the newest the module proxy listed when it was chosen (Prometheus 3's modules are numbered v0.3xx).
PROMTOOL = GoTool("promtool", "github.com/prometheus/prometheus", "v0.316.0", "cmd/promtool", group="prometheus",
                  tags=("remove_all_sd",))


if __name__ == "__main__":
    print(build_tool(PROMTOOL))
    sys.exit(0)
