"""Kafka's request and response framing above the 4-byte size: headers, bodies, ApiVersions.

A request frame (the bytes after its int32 size) is a request header then the body. Which
header version a request carries follows Kafka's generated ``requestHeaderVersion``: header v2
(client id, then tagged fields) for the flexible versions of an API's request schema, header v1
(no tagged fields) otherwise. A response carries response header v1 (correlation id, tagged
fields) for flexible versions, v0 (correlation id only) otherwise, except ApiVersions whose
response header is always v0 (a client that does not yet know the broker's versions must be
able to read it).

Bodies are decoded and encoded with kio's classes (generated from Kafka's JSON schemas); the
reader and writer of each ``(api_key, version)`` are built once and cached. ApiVersions is
answered here from the handler tables (:func:`api_versions_response`), including Kafka's
answer to an ApiVersions version it does not know: UNSUPPORTED_VERSION in the v0 format with
the ApiVersions range, which is how librdkafka and the Java client negotiate down (KIP-511).

Everything here runs on the event loop thread and holds no state but its caches.
"""

from __future__ import annotations

import datetime
import functools
import io
import re
import struct
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

from kio.index import KioIndexError
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.serial.readers import Reader
from kio.serial.writers import Writer
from kio.static.protocol import RequestPayload, ResponsePayload

from .. import error_codes as codes
from ..errors import InvalidRequestError
from ..schemas import load_request_schema, load_response_schema
from .context import BytesLike
from .request_lengths import check_request, read_uvarint

__all__ = [
    "API_VERSIONS_KEY", "API_VERSIONS_VERSION_MAX", "RequestHeader", "api_versions_response",
    "encode_response", "is_flexible_request", "is_flexible_response", "iter_schema_loads",
    "load_schemas",
    "parse_request_header",
    "read_request_body", "valid_client_software",
]

#: Kafka's ApiVersions API key, and the versions this broker answers (Kafka 4.4's 0..5; v5
#: is in :mod:`seglog.schemas`).
API_VERSIONS_KEY = 18
API_VERSIONS_VERSION_MIN = 0
API_VERSIONS_VERSION_MAX = 5
#: The ApiVersions version whose request first is flexible (header v2).
_API_VERSIONS_FIRST_FLEXIBLE = 3

_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_SIZE_AND_ID = struct.Struct(">ii")  # a response frame's size, its correlation id
#: The smallest request header: key, version, correlation id, client id length.
REQUEST_HEADER_BYTES_MIN = _HEAD.size + _INT16.size

# KIP-511's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN.
_SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class RequestHeader(NamedTuple):
    """A parsed request header: ``api_key``, ``api_version``, ``correlation_id``,
    ``client_id`` (None when the client sent a null one) and ``body_offset``, the position of
    the body in the frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def peek_request_head(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the first 8 bytes of a request frame,
    which every header version shares. Raises :class:`InvalidRequestError` for a frame
    shorter than that."""
    if len(frame) < _HEAD.size:
        raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a header")
    return _HEAD.unpack_from(frame, 0)


# Only kio's "no such schema" is an answer worth caching (None). A failed import (EMFILE,
# ENOMEM...) propagates, and lru_cache keeps no exception: the next call imports again.
@functools.lru_cache(maxsize=None)
def _request_class(api_key: int, api_version: int) -> type[RequestPayload] | None:
    try:
        return load_request_schema(api_key, api_version)
    except KioIndexError:  # UnknownAPIKey / UnknownEntity: not a schema kio knows
        return None


@functools.lru_cache(maxsize=None)
def _response_class(api_key: int, api_version: int) -> type[ResponsePayload] | None:
    try:
        return load_response_schema(api_key, api_version)
    except KioIndexError:
        return None


#: ``(api_key, version)`` advertised with no schema on purpose: Produce v0-v2, advertised
#: and refused as Kafka 4.x does (see seglog.server.apis.data_produce.VERSION_SERVED_MIN).
ADVERTISED_WITHOUT_SCHEMA = frozenset({(0, 0), (0, 1), (0, 2)})


def load_schemas(ranges: Iterable[tuple[int, int, int]]) -> None:
    """Import and cache the request and response classes (and their readers and writers)
    of every ``(api_key, min_version, max_version)`` the broker advertises, so that no
    request imports a schema module afterwards (an import can fail for a passing reason,
    such as running out of file descriptors). RuntimeError naming every advertised version
    kio has no schema for; the import's own error for one that fails."""
    for _ in iter_schema_loads(ranges):
        pass


def iter_schema_loads(ranges: Iterable[tuple[int, int, int]]) -> Iterator[None]:
    """:func:`load_schemas` one advertised version at a time: yields after each, so that an
    event loop can load them between requests (the broker does, once serving: see
    ``Server.start_serving``). Raises as :func:`load_schemas` at the end."""
    missing = []
    for api_key, low, high in ranges:
        for version in range(low, high + 1):
            if (api_key, version) in ADVERTISED_WITHOUT_SCHEMA:
                continue
            request, response = _request_class(api_key, version), _response_class(api_key,
                                                                                  version)
            if request is None or response is None:
                missing.append(f"{api_key} v{version}")
                continue
            _reader(api_key, version)
            _writer(response)
            is_flexible_request(api_key, version)
            is_flexible_response(api_key, version)
            yield None
    if missing:
        raise RuntimeError("no kio schema for advertised API versions: " + ", ".join(missing))


@functools.lru_cache(maxsize=None)
def is_flexible_request(api_key: int, api_version: int) -> bool:
    """Whether a request of this key and version carries request header v2 (Kafka's
    ``requestHeaderVersion``: the flexible versions of the request schema). ApiVersions
    versions above the ones kio knows are flexible (v3 and up are), as Kafka parses them."""
    if api_key == API_VERSIONS_KEY and api_version >= _API_VERSIONS_FIRST_FLEXIBLE:
        return True
    cls = _request_class(api_key, api_version)
    return bool(cls is not None and cls.__flexible__)


@functools.lru_cache(maxsize=None)
def is_flexible_response(api_key: int, api_version: int) -> bool:
    """Whether the response of this key and version carries response header v1; always
    False for ApiVersions (response header v0 at every version)."""
    if api_key == API_VERSIONS_KEY:
        return False
    cls = _response_class(api_key, api_version)
    return bool(cls is not None and cls.__flexible__)


def parse_request_header(frame: bytes | bytearray | memoryview, *,
                         flexible: bool) -> RequestHeader:
    """Parse the request header at the start of ``frame``: v2 when ``flexible`` (the tagged
    fields after the client id are skipped: no request header tag is defined) else v1.
    Raises :class:`InvalidRequestError` for a truncated or malformed header (a client id
    that is not UTF-8 included)."""
    end = len(frame)
    if end < REQUEST_HEADER_BYTES_MIN:
        raise InvalidRequestError(f"request of {end} bytes is shorter than a header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame, 0)
    (length,) = _INT16.unpack_from(frame, _HEAD.size)
    position = REQUEST_HEADER_BYTES_MIN
    if length < 0:
        client_id = None
        if length != -1:
            raise InvalidRequestError(f"client id of negative length {length}")
    else:
        if position + length > end:
            raise InvalidRequestError("request header ends inside the client id")
        try:
            client_id = bytes(frame[position:position + length]).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError("client id is not UTF-8") from None
        position += length
    if flexible:
        if position < end and frame[position] == 0:
            # The usual empty tagged-field section (no request header tag is defined).
            return RequestHeader(api_key, api_version, correlation_id, client_id, position + 1)
        count, position = read_uvarint(frame, position, end, "request header")
        for _ in range(count):
            _tag, position = read_uvarint(frame, position, end, "request header")
            size, position = read_uvarint(frame, position, end, "request header")
            position += size
            if position > end:
                raise InvalidRequestError("request header ends inside a tagged field")
    return RequestHeader(api_key, api_version, correlation_id, client_id, position)


@functools.lru_cache(maxsize=None)
def _reader(api_key: int, api_version: int) -> Reader[RequestPayload]:
    cls = _request_class(api_key, api_version)
    if cls is None:
        raise InvalidRequestError(f"no schema for API key {api_key} version {api_version}")
    return entity_reader(cls)


def read_request_body(api_key: int, api_version: int,
                      frame: bytes | bytearray | memoryview, offset: int) -> Any:
    """Decode the body of a request (from ``offset`` of ``frame``) into kio's request entity
    for ``api_key`` and ``api_version``. Raises :class:`InvalidRequestError` for bytes that do
    not decode. Bytes left over after the body are ignored, as Kafka's parser ignores them
    (``AbstractRequest.parseRequest`` reads the fields and never checks what remains):
    librdkafka 2.16 sends Metadata v13 for all topics with three bytes more than the schema
    has, and the real broker answers it."""
    reader = _reader(api_key, api_version)
    request_class = _request_class(api_key, api_version)
    assert request_class is not None  # _reader raised InvalidRequestError otherwise
    # Lengths first: kio sizes collections from their declared counts (request_lengths).
    check_request(request_class, frame, offset)
    try:
        value, _size = reader(frame, offset)
    except (SerialError, ValueError, TypeError, IndexError, OverflowError, KeyError) as exc:
        # KeyError: kio's reader refuses a tagged field it does not know (Kafka keeps it as
        # an unknown tagged field and goes on); a typed refusal here closes the connection
        # with one log line rather than escaping the dispatch.
        raise InvalidRequestError(f"API key {api_key} v{api_version}: malformed request body "
                                  f"({type(exc).__name__}: {exc})") from None
    return value


@functools.lru_cache(maxsize=None)
def _writer(response_class: type[ResponsePayload]) -> Writer[ResponsePayload]:
    return entity_writer(response_class)


@functools.lru_cache(maxsize=4096)
def _header_bytes(correlation_id: int, flexible: bool) -> bytes:
    return _INT32.pack(correlation_id) + (b"\x00" if flexible else b"")


def encode_body(response: ResponsePayload) -> bytes:
    """kio's encoding of a response entity (no header)."""
    buffer = io.BytesIO()
    _writer(type(response))(buffer, response)
    return buffer.getvalue()


def response_class(api_key: int, api_version: int) -> type[ResponsePayload] | None:
    """kio's response class of ``api_key`` at ``api_version`` (None if kio has none)."""
    return _response_class(api_key, api_version)


def encode_response(correlation_id: int, *, flexible: bool,
                    body_parts: Iterable[BytesLike]) -> list[BytesLike]:
    """The parts of a whole response frame: the int32 size, the response header (v1 when
    ``flexible``, else v0) and ``body_parts`` (bytes-like, written in order)."""
    parts = list(body_parts)
    size = 0
    for part in parts:
        # len() of bytes/bytearray is their size; a view's may count items, not bytes.
        size += len(part) if type(part) is bytes or type(part) is bytearray \
            else memoryview(part).nbytes
    if flexible:
        return [_SIZE_AND_ID.pack(size + 5, correlation_id) + b"\x00", *parts]
    return [_SIZE_AND_ID.pack(size + 4, correlation_id), *parts]


def valid_client_software(name: str, version: str) -> bool:
    """KIP-511's rule for ApiVersions v3+'s ``client_software_name`` and
    ``client_software_version``: ASCII letters, digits, ``-`` and ``.``, starting and ending
    with a letter or digit."""
    return bool(_SOFTWARE_NAME_VERSION.fullmatch(name)
                and _SOFTWARE_NAME_VERSION.fullmatch(version))


def api_versions_response(api_version: int, ranges: Iterable[tuple[int, int, int]], *,
                          error_code: int = codes.NONE,
                          supported_features: Mapping[str, tuple[int, int]] | None = None,
                          finalized_features: Mapping[str, tuple[int, int]] | None = None,
                          finalized_features_epoch: int = -1) -> bytes:
    """The encoded body of an ApiVersions response at ``api_version`` listing ``ranges``
    (``(api_key, min_version, max_version)``, sorted here by key) with ``error_code``.

    ``api_version`` outside 0..5 is answered in the v0 format (Kafka's rule for an
    ApiVersions version it does not know). v3+ carry the features (KIP-584):
    ``supported_features`` ``{name: (min, max)}``, ``finalized_features`` ``{name: (min
    level, max level)}`` and their epoch (-1: unknown, and clients ignore the finalized
    list); v3 omits supported features whose minimum is 0, as Kafka does (KAFKA-17011 made
    v4 the first version that can carry them).
    """
    from kio.schema.errors import ErrorCode  # kio's enum; imported here once, then cached
    from kio.static.primitive import i16, i64

    version = api_version if API_VERSIONS_VERSION_MIN <= api_version <= API_VERSIONS_VERSION_MAX \
        else 0
    cls = _response_class(API_VERSIONS_KEY, version)
    assert cls is not None, version  # kio has ApiVersions 0..4, seglog.schemas v5
    module = __import__(cls.__module__, fromlist=["ApiVersion"])
    keys = tuple(module.ApiVersion(api_key=i16(k), min_version=i16(lo), max_version=i16(hi))
                 for k, lo, hi in sorted(ranges))
    fields: dict[str, Any] = {"error_code": ErrorCode(error_code), "api_keys": keys}
    if version >= 1:
        fields["throttle_time"] = datetime.timedelta(0)
    if version >= 3 and error_code == codes.NONE:
        fields["supported_features"] = tuple(
            module.SupportedFeatureKey(name=name, min_version=i16(low), max_version=i16(high))
            for name, (low, high) in sorted((supported_features or {}).items())
            if version >= 4 or low >= 1)
        fields["finalized_features_epoch"] = i64(finalized_features_epoch)
        fields["finalized_features"] = tuple(
            module.FinalizedFeatureKey(name=name, max_version_level=i16(high),
                                       min_version_level=i16(low))
            for name, (low, high) in sorted((finalized_features or {}).items()))
    return encode_body(cls(**fields))
