"""SSO tokens: the token endpoint, logout, and the Bearer check on every API call (docs/compatibility.md#simulator).

A token unknown to the engine (expired, revoked, or issued before a restart) is answered with 401, which the SDK
handles by logging in again and replaying the request once (`Connection.__wait`).
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass


@dataclass
class JsonReply:
    status: int
    body: dict

    def encode(self) -> bytes:
        return json.dumps(self.body).encode()


class TokenStore:
    def __init__(self, username: str, password: str, ttl: float) -> None:
        self._username = username
        self._password = password
        self.ttl = ttl
        self._tokens: dict[str, float] = {}  # token -> expiry (epoch seconds)
        self._lock = threading.Lock()

    def _credentials_ok(self, username: str, password: str) -> bool:
        return secrets.compare_digest(username, self._username) and secrets.compare_digest(password, self._password)

    def issue(self, form_body: bytes) -> JsonReply:
        """`POST /ovirt-engine/sso/oauth/token` with `grant_type=password&scope=ovirt-app-api&username&password`."""
        form = urllib.parse.parse_qs(form_body.decode("utf-8", "replace"))
        username = form.get("username", [""])[0]
        password = form.get("password", [""])[0]
        grant = form.get("grant_type", [""])[0]
        if grant != "password":
            return JsonReply(400, {"error_code": "invalid_grant", "error": f"Unsupported grant type '{grant}'."})
        if not self._credentials_ok(username, password):
            # The engine's failure shape for scope=ovirt-app-api (`SsoService.sendJsonDataWithMessage`).
            return JsonReply(400, {"error_code": "access_denied",
                                   "error": f"Cannot authenticate user '{username}': "
                                            "The username or password is incorrect."})
        token = secrets.token_urlsafe(32)
        expiry = time.time() + self.ttl
        with self._lock:
            self._tokens[token] = expiry
        return JsonReply(200, {"access_token": token, "scope": "ovirt-app-api", "token_type": "bearer",
                               "exp": str(int(expiry * 1000))})

    def revoke(self, form_body: bytes) -> JsonReply:
        """`POST /ovirt-engine/services/sso-logout` with `scope=ovirt-app-api&token=...`."""
        form = urllib.parse.parse_qs(form_body.decode("utf-8", "replace"))
        token = form.get("token", [""])[0]
        with self._lock:
            self._tokens.pop(token, None)
        return JsonReply(200, {})

    def check(self, authorization: str | None) -> bool:
        """Bearer tokens, and (deprecated, still accepted by the engine) Basic credentials."""
        if not authorization:
            return False
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer":
            with self._lock:
                expiry = self._tokens.get(value.strip())
                if expiry is None:
                    return False
                if expiry < time.time():
                    del self._tokens[value.strip()]
                    return False
                return True
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(value.strip()).decode().partition(":")
            except ValueError:
                return False
            return self._credentials_ok(user, password)
        return False

    def expire_all(self) -> int:
        with self._lock:
            count = len(self._tokens)
            self._tokens.clear()
            return count
