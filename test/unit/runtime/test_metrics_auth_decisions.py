"""MetricsAuth's decisions and its cache (docs/architecture.md#protected-metrics), against a recording stand-in for
the API server's two review endpoints; the real API server is in test/e2e/test_metrics_auth.py."""

from __future__ import annotations

from machine_controller.runtime.metrics_auth import (
    ALLOW_TTL_S,
    AUTHN_TTL_S,
    DENY_TTL_S,
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    MetricsAuth,
)


class Reviews:
    """Answers TokenReviews from `users` (token -> user) and SubjectAccessReviews from `allowed` (user names)."""

    def __init__(self, users: dict[str, dict], allowed: set[str]):
        self.users, self.allowed, self.calls, self.fail = users, allowed, [], False

    def request(self, method: str, path: str, query=None, body=None, content_type: str = "application/json"):
        self.calls.append(path)
        if self.fail:
            raise ConnectionError("API server unreachable")
        if path == TOKEN_REVIEWS:
            user = self.users.get(body["spec"]["token"])
            return {"status": {"authenticated": True, "user": user} if user else {"authenticated": False}}
        assert path == SUBJECT_ACCESS_REVIEWS and body["spec"]["nonResourceAttributes"] == {"path": "/metrics",
                                                                                              "verb": "get"}
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _auth(allowed: set[str] = frozenset({"prometheus"})) -> tuple[MetricsAuth, Reviews, Clock]:
    reviews = Reviews({"good": {"username": "prometheus", "groups": ["system:serviceaccounts"]},
                       "other": {"username": "someone"}}, set(allowed))
    clock = Clock()
    return MetricsAuth(reviews, clock=clock), reviews, clock  # type: ignore[arg-type]


def test_statuses_by_token():
    auth, _, _ = _auth()
    assert auth.check("Bearer good", "GET", "/metrics").status == 200
    assert auth.check("Bearer other", "GET", "/metrics").status == 403
    assert auth.check("Bearer unknown", "GET", "/metrics").status == 401
    assert auth.check(None, "GET", "/metrics").status == 401
    assert auth.check("Basic Z29vZA==", "GET", "/metrics").status == 401


def test_answers_are_cached_for_their_ttl_and_failures_never():
    auth, reviews, clock = _auth()
    for _ in range(3):
        assert auth.check("Bearer good", "GET", "/metrics").status == 200
    assert len(reviews.calls) == 2  # one TokenReview, one SubjectAccessReview

    clock.now += AUTHN_TTL_S + 1  # the token is reviewed again, the allowed decision still cached
    assert auth.check("Bearer good", "GET", "/metrics").status == 200
    assert reviews.calls[2:] == [TOKEN_REVIEWS]
    clock.now += ALLOW_TTL_S
    reviews.calls.clear()
    assert auth.check("Bearer good", "GET", "/metrics").status == 200
    assert reviews.calls == [TOKEN_REVIEWS, SUBJECT_ACCESS_REVIEWS]

    reviews.calls.clear()
    assert auth.check("Bearer other", "GET", "/metrics").status == 403
    reviews.allowed.add("someone")  # granted since: a denial is kept only DENY_TTL_S
    assert auth.check("Bearer other", "GET", "/metrics").status == 403
    clock.now += DENY_TTL_S + 1
    assert auth.check("Bearer other", "GET", "/metrics").status == 200

    reviews.fail = True
    assert auth.check("Bearer new", "GET", "/metrics").status == 500
    reviews.fail, reviews.users["new"] = False, {"username": "prometheus"}
    assert auth.check("Bearer new", "GET", "/metrics").status == 200  # the failure was not remembered
