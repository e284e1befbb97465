"""Failure classification as the runtime does it (RUNTIME 13), from concrete errors.

The model's transitions carry a failure *class* (``provider_call[fault=serverError]``): the
provider, its circuit breaker, fallback chains and timeouts are outside the model and reach
it only through the classified error (RUNTIME 17). This module is the other half: the
concrete errors a runtime meets, and the pure ``classify(error)`` that maps each one to its
class, rule by rule as section 13 states them. The simulator draws concrete errors from a
workload's failure mix and fires the class ``classify`` gives.

A concrete error is a value of one of the classes below. ``parse_error(text)`` reads the
spelling a configuration uses::

    circuit_open                                  CircuitOpen
    timeout, connect_timeout, read_timeout,       TransportError (a transport/network error)
    connection_reset, connection_refused,
    dns_failure, tls_error
    provider_connection                           ProviderConnectionError
    provider_configuration, missing_api_key,      ProviderConfigurationError
    unknown_model
    http_<S>  (http_503, http_429, http_401)      ResponseError(S)
    auth_<S>, rate_limit_<S>                      ResponseError(S) of the auth / rate-limit
                                                  subtype (classified by S all the same)
    fallback(e1, e2, ...)                         FallbackExhausted: the attempts in order,
                                                  nested chains allowed; fallback() is empty
    AuditPersistenceFailed, ObserverError,        OtherError: a runtime error that reaches the
    WriteWithoutDurableExecution,                 generic arm, or anything else a provider
    invalid_response, runtime_error               client raises
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .state import FAILURE_CLASSES, RETRYABLE_CLASSES

CONNECTION = "connection"
RATE_LIMIT = "rateLimit"
SERVER_ERROR = "serverError"
CIRCUIT_OPEN = "circuitOpen"
AUTH = "auth"
CONFIGURATION = "configuration"
CLIENT_ERROR = "clientError"
UNKNOWN = "unknown"

# The table of RUNTIME 13: which classes trip the provider circuit breaker.
TRIPS_CIRCUIT_CLASSES = frozenset({CONNECTION, RATE_LIMIT, SERVER_ERROR})


# -- concrete errors -----------------------------------------------------------------------
@dataclass(frozen=True)
class CircuitOpen:
    """The provider's circuit breaker is open: the call was not attempted."""


@dataclass(frozen=True)
class TransportError:
    """A transport or network error below the provider client (timeout, reset, DNS, TLS)."""

    kind: str = "timeout"


@dataclass(frozen=True)
class ProviderConnectionError:
    """The provider client's own connection error."""


@dataclass(frozen=True)
class ProviderConfigurationError:
    """The provider is misconfigured (no key, an unknown model): no call can succeed."""

    detail: str = ""


@dataclass(frozen=True)
class ResponseError:
    """The provider answered with HTTP status ``status``. ``subtype`` is the exception the
    client raised for it ("" = the generic response error, "auth", "rateLimit"); section 13
    classifies the subtypes by their status like any other response error."""

    status: int
    subtype: str = ""


@dataclass(frozen=True)
class FallbackExhausted:
    """Every provider of a fallback chain failed; ``attempts`` in the order they were tried."""

    attempts: tuple = ()


@dataclass(frozen=True)
class OtherError:
    """Any other error that reaches the ladder's generic arm (``kind`` names it)."""

    kind: str


Error = (
    CircuitOpen | TransportError | ProviderConnectionError | ProviderConfigurationError
    | ResponseError | FallbackExhausted | OtherError
)


# -- section 13 ----------------------------------------------------------------------------
def classify(error: Error) -> str:
    """The failure class of ``error``: the first rule of RUNTIME 13 that matches."""
    if isinstance(error, CircuitOpen):  # rule 1
        return CIRCUIT_OPEN
    if isinstance(error, FallbackExhausted):  # rule 2: the last attempt decides, recursively
        if not error.attempts:
            return UNKNOWN
        return classify(error.attempts[-1])
    if isinstance(error, ProviderConnectionError | TransportError):  # rule 3
        return CONNECTION
    if isinstance(error, ProviderConfigurationError):  # rule 4
        return CONFIGURATION
    if isinstance(error, ResponseError):  # rule 5: by the status, whatever the subtype
        s = error.status
        if s in (401, 403):
            return AUTH
        if s == 429:
            return RATE_LIMIT
        if 500 <= s <= 599:
            return SERVER_ERROR
        if 400 <= s <= 499:
            return CLIENT_ERROR
        return UNKNOWN
    return UNKNOWN  # rule 6: everything else


def retryable(cls: str) -> bool:
    """Section 13's ``retryable`` column."""
    return cls in RETRYABLE_CLASSES


def trips_circuit(cls: str) -> bool:
    """Section 13's ``trips circuit`` column (the breaker itself is outside the model)."""
    return cls in TRIPS_CIRCUIT_CLASSES


# -- the spelling configurations use -------------------------------------------------------
TRANSPORT_KINDS = (
    "timeout", "connect_timeout", "read_timeout", "connection_reset", "connection_refused",
    "dns_failure", "tls_error",
)
CONFIGURATION_KINDS = ("provider_configuration", "missing_api_key", "unknown_model")
OTHER_KINDS = (
    "AuditPersistenceFailed", "ObserverError", "WriteWithoutDurableExecution",
    "invalid_response", "runtime_error",
)
_WORDS = ("circuit_open", "provider_connection", *TRANSPORT_KINDS, *CONFIGURATION_KINDS, *OTHER_KINDS)
_STATUS = re.compile(r"(http|auth|rate_limit)_(\d{3})\Z")
_SUBTYPE = {"http": "", "auth": "auth", "rate_limit": "rateLimit"}


class BadError(ValueError):
    """An error spelling ``parse_error`` cannot read; the message says what to write."""


def parse_error(text: object) -> Error:
    """The concrete error a configuration spells as ``text`` (see the module docstring)."""
    if not isinstance(text, str):
        raise BadError(f"expected an error name such as \"http_503\", got {text!r}")
    s = text.strip()
    if s.startswith("fallback(") and s.endswith(")"):
        return FallbackExhausted(tuple(parse_error(x) for x in _split_args(s[len("fallback("):-1])))
    if s == "circuit_open":
        return CircuitOpen()
    if s == "provider_connection":
        return ProviderConnectionError()
    if s in TRANSPORT_KINDS:
        return TransportError(s)
    if s in CONFIGURATION_KINDS:
        return ProviderConfigurationError(s)
    if s in OTHER_KINDS:
        return OtherError(s)
    m = _STATUS.match(s)
    if m:
        return ResponseError(int(m.group(2)), _SUBTYPE[m.group(1)])
    near = difflib.get_close_matches(s, [*_WORDS, "http_503", "fallback(http_503, timeout)"], n=1)
    hint = f"did you mean {near[0]!r}?" if near else (
        "use http_<status>, auth_<status>, rate_limit_<status>, circuit_open, "
        f"{', '.join(TRANSPORT_KINDS[:3])}, ..., provider_configuration or fallback(e1, e2)")
    raise BadError(f"{text!r} is not an error this model knows; {hint}")


def _split_args(s: str) -> list[str]:
    """Split ``a, fallback(b, c), d`` at its top-level commas; ``""`` is the empty chain."""
    if not s.strip():
        return []
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise BadError(f"unbalanced parentheses in fallback({s})")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise BadError(f"unbalanced parentheses in fallback({s})")
    out.append(cur)
    if any(not x.strip() for x in out):
        raise BadError(f"an empty attempt in fallback({s}); name every attempt's error")
    return out


def spell(error: Error) -> str:
    """The configuration spelling of ``error`` (``parse_error(spell(e)) == e``)."""
    if isinstance(error, CircuitOpen):
        return "circuit_open"
    if isinstance(error, ProviderConnectionError):
        return "provider_connection"
    if isinstance(error, TransportError):
        return error.kind
    if isinstance(error, ProviderConfigurationError):
        return error.detail or "provider_configuration"
    if isinstance(error, ResponseError):
        prefix = {"": "http", "auth": "auth", "rateLimit": "rate_limit"}[error.subtype]
        return f"{prefix}_{error.status}"
    if isinstance(error, FallbackExhausted):
        return "fallback(" + ", ".join(spell(a) for a in error.attempts) + ")"
    return error.kind


def mix_entry(name: str) -> tuple[str, str | None]:
    """A failure-mix key: ``(class, None)`` for the per-class form (``serverError``), or
    ``(classify(error), spelling)`` for a concrete error (``http_503``). Raises ``BadError``."""
    if name in FAILURE_CLASSES:
        return name, None
    err = parse_error(name)
    return classify(err), spell(err)
