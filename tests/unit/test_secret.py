"""``config.Secret``: never shows itself; resolves from exactly one of literal, env, file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from replicator.config import Secret, SourceConfig
from replicator.errors import ConfigError

VALUE = "Tr0ub4dor&3-not-for-logs"


def test_repr_str_and_format_hide_the_value() -> None:
    secret = Secret(VALUE)
    for text in (repr(secret), str(secret), f"{secret}", f"{secret!r}", format(secret)):
        assert VALUE not in text
        assert "****" in text
    assert repr(Secret("")) == "Secret('')"


def test_config_repr_and_logs_hide_the_value(caplog: pytest.LogCaptureFixture) -> None:
    cfg = SourceConfig(password=Secret(VALUE))
    assert VALUE not in repr(cfg)
    with caplog.at_level(logging.INFO):
        logging.getLogger("test").info("config %s %r", cfg, cfg.password)
    assert VALUE not in caplog.text


def test_reveal_equality_and_truth() -> None:
    assert Secret(VALUE).reveal() == VALUE
    assert Secret(VALUE) == Secret(VALUE) and Secret(VALUE) != Secret("other")
    assert Secret(VALUE) != VALUE  # never equal to the bare string
    assert hash(Secret(VALUE)) == hash(Secret(VALUE))
    assert Secret(VALUE) and not Secret("")


def test_resolve_literal() -> None:
    assert Secret.resolve(value=VALUE).reveal() == VALUE
    assert Secret.resolve().reveal() == ""


def test_resolve_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLICATOR_TEST_SECRET", VALUE)
    assert Secret.resolve(env="REPLICATOR_TEST_SECRET").reveal() == VALUE


def test_resolve_missing_env_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLICATOR_TEST_SECRET", raising=False)
    with pytest.raises(ConfigError) as error:
        Secret.resolve(env="REPLICATOR_TEST_SECRET")
    assert "REPLICATOR_TEST_SECRET is not set" in str(error.value)
    assert error.value.exit_code == 2


def test_resolve_file_strips_only_the_line_ending(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text(f" {VALUE} \r\n")
    assert Secret.resolve(file=path).reveal() == f" {VALUE} "
    assert Secret.resolve(file=str(path)).reveal() == f" {VALUE} "


def test_resolve_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        Secret.resolve(file=tmp_path / "missing")
    assert "cannot read" in str(error.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"value": VALUE, "env": "X"},
        {"value": VALUE, "file": "/x"},
        {"env": "X", "file": "/x"},
        {"value": VALUE, "env": "X", "file": "/x"},
    ],
)
def test_resolve_conflicts_are_config_errors(kwargs: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as error:
        Secret.resolve(**kwargs)  # type: ignore[arg-type]
    assert "give only one of" in str(error.value)
    assert VALUE not in str(error.value)


def test_empty_settings_do_not_conflict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLICATOR_TEST_SECRET", VALUE)
    assert Secret.resolve(value="", env="REPLICATOR_TEST_SECRET", file="").reveal() == VALUE
