"""Test-bed code that only tests import (pytest puts test/support on the path, pyproject.toml): reading back the
shipped monitoring config, and running machine-api-operator's own controllers beside this one. What the demo or
the benchmarks also use stays in hack/ (docs/architecture.md#the-test-bed)."""
