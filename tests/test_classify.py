"""classify(error) of RUNTIME 13, branch by branch, and the spelling configurations use."""

from __future__ import annotations

import pytest
from failclosed.model.classify import (
    BadError,
    CircuitOpen,
    FallbackExhausted,
    OtherError,
    ProviderConfigurationError,
    ProviderConnectionError,
    ResponseError,
    TransportError,
    classify,
    mix_entry,
    parse_error,
    retryable,
    spell,
    trips_circuit,
)
from failclosed.model.policy import parse_policy
from failclosed.model.rules import classify as classify_kind
from failclosed.model.state import FAILURE_CLASSES


# -- rule by rule ------------------------------------------------------------------------------
def test_rule1_circuit_open():
    assert classify(CircuitOpen()) == "circuitOpen"


def test_rule2_a_chain_is_its_last_attempt_recursively_and_empty_is_unknown():
    assert classify(FallbackExhausted((ResponseError(401), ResponseError(503)))) == "serverError"
    assert classify(FallbackExhausted((ResponseError(503), ResponseError(401)))) == "auth"
    # the last attempt of a nested chain is the chain's last attempt
    inner = FallbackExhausted((TransportError("timeout"), CircuitOpen()))
    assert classify(FallbackExhausted((ResponseError(500), inner))) == "circuitOpen"
    assert classify(FallbackExhausted(())) == "unknown"
    assert classify(FallbackExhausted((ResponseError(503), FallbackExhausted(())))) == "unknown"


@pytest.mark.parametrize("err", [ProviderConnectionError(), TransportError("timeout"),
                                 TransportError("connection_reset"), TransportError("dns_failure")])
def test_rule3_connection_and_transport_errors(err):
    assert classify(err) == "connection"


def test_rule4_provider_configuration():
    assert classify(ProviderConfigurationError("missing_api_key")) == "configuration"


@pytest.mark.parametrize(("status", "cls"), [
    (401, "auth"), (403, "auth"), (429, "rateLimit"), (500, "serverError"), (503, "serverError"),
    (599, "serverError"), (400, "clientError"), (404, "clientError"), (422, "clientError"),
    (499, "clientError"), (200, "unknown"), (302, "unknown"), (600, "unknown"), (0, "unknown"),
])
def test_rule5_a_response_error_by_its_status(status, cls):
    assert classify(ResponseError(status)) == cls


def test_rule5_the_auth_and_rate_limit_subtypes_are_classified_by_status_too():
    assert classify(ResponseError(401, "auth")) == "auth"
    assert classify(ResponseError(429, "rateLimit")) == "rateLimit"
    # the subtype does not decide: an auth error carrying 500 is a server error
    assert classify(ResponseError(500, "auth")) == "serverError"
    assert classify(ResponseError(400, "rateLimit")) == "clientError"


@pytest.mark.parametrize("kind", ["AuditPersistenceFailed", "WriteWithoutDurableExecution",
                                  "ObserverError", "invalid_response", "SomethingElse"])
def test_rule6_everything_else_is_unknown(kind):
    assert classify(OtherError(kind)) == "unknown"


def test_the_class_table_retryable_and_trips_circuit():
    table = {  # RUNTIME 13: class -> (retryable, trips circuit)
        "connection": (True, True), "rateLimit": (True, True), "serverError": (True, True),
        "circuitOpen": (True, False), "auth": (False, False), "configuration": (False, False),
        "clientError": (False, False), "unknown": (False, False),
    }
    assert set(table) == set(FAILURE_CLASSES)
    for cls, (r, t) in table.items():
        assert (retryable(cls), trips_circuit(cls)) == (r, t), cls


def test_the_models_error_kinds_classify_as_section_13_says():
    cur = parse_policy("current")
    assert classify_kind("ProviderError", "rateLimit", cur) == "rateLimit"
    for kind in ("AuditPersistenceFailed", "ObserverError", "WriteWithoutDurableExecution"):
        assert classify_kind(kind, "", cur) == "unknown"
    # the counterfactual switch: an audit failure made to look transient
    assert classify_kind("AuditPersistenceFailed", "", cur.with_(audit_fail_unknown=False)) == "serverError"


# -- spelling ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "cls"), [
    ("circuit_open", "circuitOpen"), ("timeout", "connection"), ("connection_reset", "connection"),
    ("provider_connection", "connection"), ("missing_api_key", "configuration"),
    ("http_503", "serverError"), ("http_429", "rateLimit"), ("auth_401", "auth"),
    ("rate_limit_429", "rateLimit"), ("http_404", "clientError"), ("http_302", "unknown"),
    ("fallback(http_503, http_401)", "auth"), ("fallback(http_401, fallback(timeout, http_502))", "serverError"),
    ("fallback()", "unknown"), ("AuditPersistenceFailed", "unknown"),
])
def test_parse_then_classify(text, cls):
    err = parse_error(text)
    assert classify(err) == cls
    assert parse_error(spell(err)) == err


@pytest.mark.parametrize("text", ["http503", "htp_503", "fallback(http_503", "fallback(http_503,,timeout)",
                                  "teapot", "http_5030"])
def test_a_misspelled_error_is_refused_with_a_hint(text):
    with pytest.raises(BadError) as e:
        parse_error(text)
    assert "\n" not in str(e.value)


def test_mix_entries_of_both_forms():
    assert mix_entry("serverError") == ("serverError", None)
    assert mix_entry("http_503") == ("serverError", "http_503")
    assert mix_entry(" fallback(http_429 , circuit_open) ") == ("circuitOpen", "fallback(http_429, circuit_open)")
