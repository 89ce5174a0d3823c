"""SaslHandshake and SaslAuthenticate on a PLAINTEXT listener: ILLEGAL_SASL_STATE, as Kafka
answers them.

A Kafka broker advertises both APIs on every listener and, on one without SASL, answers them
with ILLEGAL_SASL_STATE (34) (``KafkaApis.handleSaslHandshakeRequest`` and
``handleSaslAuthenticateRequest``: the channel is already "authenticated" as ANONYMOUS). A
client configured for SASL against this broker so gets Kafka's error, not a dropped connection.
"""

from __future__ import annotations

import datetime
import functools

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from ... import error_codes as codes
from ..registry import ApiHandler

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
#: Kafka's message with ILLEGAL_SASL_STATE on a SaslAuthenticate (KafkaApis).
AUTHENTICATE_MESSAGE = "SaslAuthenticate request received after successful authentication"


@functools.lru_cache(maxsize=None)
def _handshake_response(version: int):
    return load_response_schema(SASL_HANDSHAKE_KEY, version)(
        error_code=ErrorCode(codes.ILLEGAL_SASL_STATE), mechanisms=())


@functools.lru_cache(maxsize=None)
def _authenticate_response(version: int):
    fields = {"error_code": ErrorCode(codes.ILLEGAL_SASL_STATE),
              "error_message": AUTHENTICATE_MESSAGE, "auth_bytes": b""}
    if version >= 1:
        fields["session_lifetime"] = datetime.timedelta(0)
    return load_response_schema(SASL_AUTHENTICATE_KEY, version)(**fields)


async def handle_sasl_handshake(ctx, request):
    """SaslHandshake v0-1: ILLEGAL_SASL_STATE with no mechanisms."""
    return _handshake_response(ctx.api_version)


async def handle_sasl_authenticate(ctx, request):
    """SaslAuthenticate v0-2: ILLEGAL_SASL_STATE with Kafka's message."""
    return _authenticate_response(ctx.api_version)


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(SASL_HANDSHAKE_KEY, 0, 1, handle_sasl_handshake),
    ApiHandler(SASL_AUTHENTICATE_KEY, 0, 2, handle_sasl_authenticate),
)
