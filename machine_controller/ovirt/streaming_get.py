"""A GET whose answer is given to a reader piece by piece as it arrives, instead of kept whole.

The SDK collects an answer's body in a buffer and hands over a copy of it: a cluster's VM list of a thousand VMs
is megabytes of XML, so each list would be held twice, whole, at once, and set the controller's peak memory
(docs/benchmarks.md#figures-behind-the-codes-choices). Here the request is the SDK's own (its authentication, TLS and
headers: `Connection.send`), and only where curl delivers the body goes is changed: to the reader while the answer
is a 200, kept for the SDK's fault otherwise. The SDK's request context is not a public interface (a tuple of the
curl handle, the body and header buffers and the request, in 4.6), so its shape is checked and a change stops the
call with a clear error instead of a wrong list; test/unit/ovirt/test_streamed_list.py reads real answers with it.
"""

from __future__ import annotations

import io
from typing import Callable, Generic, Protocol, TypeVar

import ovirtsdk4 as sdk
import pycurl
from ovirtsdk4 import http as sdk_http
from ovirtsdk4.version import VERSION as SDK_VERSION

T = TypeVar("T", covariant=True)
_PIECE = 64 * 1024  # how much of a body that came whole is given to the reader at a time


class Reader(Protocol[T]):
    def feed(self, piece: bytes) -> None: ...

    def close(self) -> T: ...


class _Sink(Generic[T]):
    """What curl calls with the answer's header lines and body pieces."""

    def __init__(self, reader: Reader[T], headers: io.BytesIO):
        self.reader = reader
        self._headers = headers
        self.code = 0
        self.fed = False
        self.kept: list[bytes] = []
        self.error: BaseException | None = None

    def header(self, line: bytes) -> None:
        self._headers.write(line)  # the SDK reads the reason and headers from it
        if line.startswith(b"HTTP/"):  # a status line: the last one is the answer's (after a 100 Continue)
            fields = line.split()
            self.code = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0  # 0: kept, not read

    def body(self, piece: bytes) -> int | None:
        if self.code != 200:
            self.kept.append(piece)
            return None
        self.fed = True
        try:
            self.reader.feed(piece)
        except BaseException as e:  # noqa: BLE001 - curl cannot carry it: kept, the transfer stopped, raised after
            self.error = e
            return 0
        return None


def get_streamed(conn: sdk.Connection, path: str, query: dict[str, str], reader: Reader[T],
                 check_fault: Callable[[sdk_http.Response], None]) -> T:
    """`reader.close()` after the answer of `GET path?query` was fed to it; an answer other than 200 goes to
    `check_fault(response)` (a service's `_check_fault`, which raises the SDK's error for it)."""
    context = conn.send(sdk_http.Request(method="GET", path=path, query=query))
    if not (isinstance(context, tuple) and len(context) == 4 and isinstance(context[0], pycurl.Curl)
            and isinstance(context[2], io.BytesIO)):
        raise TypeError(f"ovirt-engine-sdk-python {SDK_VERSION}'s request context is not (curl handle, body, "
                        "headers, request): machine_controller/ovirt/streaming_get.py needs a change for it")
    curl, headers = context[0], context[2]
    sink = _Sink(reader, headers)
    curl.setopt(pycurl.HEADERFUNCTION, sink.header)
    curl.setopt(pycurl.WRITEFUNCTION, sink.body)
    try:
        response = conn.wait(context)
    except sdk.Error:
        if sink.error is not None:
            raise sink.error from None
        raise
    if response.code != 200:
        response.body = response.body or b"".join(sink.kept)
        check_fault(response)
        raise sdk.Error(f"GET {path} answered {response.code}")  # check_fault raises for every non-2xx answer
    if not sink.fed:
        # The SDK sent the request again after renewing its token (a 401): that answer came whole.
        body = response.body or b""
        for start in range(0, len(body), _PIECE):
            reader.feed(body[start:start + _PIECE])
    return reader.close()
