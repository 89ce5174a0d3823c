"""SaslHandshake and SaslAuthenticate on a PLAINTEXT listener: ILLEGAL_SASL_STATE, as Kafka
answers them.

A Kafka broker advertises both APIs on every listener and, on one without SASL, answers them
with ILLEGAL_SASL_STATE (34) (``KafkaApis.handleSaslHandshakeRequest`` and
``handleSaslAuthenticateRequest``: the channel is already "authenticated" as ANONYMOUS). A
client configured for SASL against this broker so gets Kafka's error, not a dropped connection.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v0.response import (
    SaslAuthenticateResponse as AuthenticateResponseV0,
)
from kio.schema.sasl_authenticate.v1.response import (
    SaslAuthenticateResponse as AuthenticateResponseV1,
)
from kio.schema.sasl_authenticate.v2.response import (
    SaslAuthenticateResponse as AuthenticateResponseV2,
)
from kio.schema.sasl_handshake.v0.response import SaslHandshakeResponse as HandshakeResponseV0
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse as HandshakeResponseV1
from kio.static.primitive import i64Timedelta

from ... import error_codes as codes
from ..context import RequestContext
from ..registry import ApiHandler

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
#: Kafka's message with ILLEGAL_SASL_STATE on a SaslAuthenticate (KafkaApis).
AUTHENTICATE_MESSAGE = "SaslAuthenticate request received after successful authentication"

_ILLEGAL_SASL_STATE = ErrorCode(codes.ILLEGAL_SASL_STATE)

#: The one SaslHandshake answer of each version served (kio's entities are immutable).
_HANDSHAKE_RESPONSES: dict[int, HandshakeResponseV0 | HandshakeResponseV1] = {
    0: HandshakeResponseV0(error_code=_ILLEGAL_SASL_STATE, mechanisms=()),
    1: HandshakeResponseV1(error_code=_ILLEGAL_SASL_STATE, mechanisms=()),
}
#: The one SaslAuthenticate answer of each version served.
_AUTHENTICATE_RESPONSES: dict[
    int, AuthenticateResponseV0 | AuthenticateResponseV1 | AuthenticateResponseV2] = {
    0: AuthenticateResponseV0(error_code=_ILLEGAL_SASL_STATE,
                              error_message=AUTHENTICATE_MESSAGE, auth_bytes=b""),
    1: AuthenticateResponseV1(error_code=_ILLEGAL_SASL_STATE,
                              error_message=AUTHENTICATE_MESSAGE, auth_bytes=b"",
                              session_lifetime=i64Timedelta.parse(datetime.timedelta(0))),
    2: AuthenticateResponseV2(error_code=_ILLEGAL_SASL_STATE,
                              error_message=AUTHENTICATE_MESSAGE, auth_bytes=b"",
                              session_lifetime=i64Timedelta.parse(datetime.timedelta(0))),
}


async def handle_sasl_handshake(ctx: RequestContext, request: Any
                                ) -> HandshakeResponseV0 | HandshakeResponseV1:
    """SaslHandshake v0-1: ILLEGAL_SASL_STATE with no mechanisms."""
    return _HANDSHAKE_RESPONSES[ctx.api_version]


async def handle_sasl_authenticate(ctx: RequestContext, request: Any
                                   ) -> (AuthenticateResponseV0 | AuthenticateResponseV1
                                         | AuthenticateResponseV2):
    """SaslAuthenticate v0-2: ILLEGAL_SASL_STATE with Kafka's message."""
    return _AUTHENTICATE_RESPONSES[ctx.api_version]


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(SASL_HANDSHAKE_KEY, 0, 1, handle_sasl_handshake),
    ApiHandler(SASL_AUTHENTICATE_KEY, 0, 2, handle_sasl_authenticate),
)
