"""The controller's Kubernetes API writes, counted by the API server itself: its audit log, restricted by policy to
write verbs at the Metadata level (no bodies), read back per phase of the benchmark and filtered by the
controller's user agent (app.COMPONENT). The API server records every write, whichever client library or path
sent it, events included, so nothing the controller does escapes the count, and the controller is not changed.

    audit = AuditLog(work / "audit")
    with LocalControlPlane(..., apiserver_args=audit.apiserver_args()) as plane:
        mark = audit.mark()
        ...                                      # the phase
        writes = audit.writes_since(mark, "ovirt-machine-controller")   # {"patch machines/status 200": 2000, ...}
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

# Writes only, without their bodies: the log stays small (about 600 bytes a write) and cheap for the API server.
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
"""


class AuditLog:
    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.policy = directory / "policy.yaml"
        self.policy.write_text(POLICY)
        self.path = directory / "audit.log"

    def apiserver_args(self) -> tuple[str, ...]:
        # The log backend in batch mode: the API server answers without waiting for the line to be written.
        return (f"--audit-policy-file={self.policy}", f"--audit-log-path={self.path}", "--audit-log-mode=batch",
                "--audit-log-maxsize=0", "--audit-log-format=json")

    def mark(self) -> int:
        """Where the log ends now: the start of a phase."""
        return self.path.stat().st_size if self.path.exists() else 0

    def writes_since(self, mark: int, user_agent: str, settle_s: float = 2.0) -> Counter[str]:
        """The writes `user_agent` made since `mark`, as `verb resource[/subresource] code` -> count. The batch
        backend flushes about every second: the last writes of a phase are waited for."""
        time.sleep(settle_s)
        counts: Counter[str] = Counter()
        with open(self.path, "rb") as f:
            f.seek(mark)
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line the backend is still writing
                if not str(event.get("userAgent", "")).startswith(user_agent):
                    continue
                ref = event.get("objectRef") or {}
                resource = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
                code = (event.get("responseStatus") or {}).get("code", "?")
                counts[f"{event.get('verb')} {resource} {code}"] += 1
        return counts
