"""Settings are validated on construction, with messages that name the problem."""

import pytest

from nissa_server.settings import Settings, is_loopback

pytestmark = pytest.mark.single_backend


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_token(tmp_path, host):
    assert is_loopback(host)
    Settings(db_path=tmp_path / "n.db", host=host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "example.org"])
def test_other_addresses_need_a_token(tmp_path, host):
    with pytest.raises(ValueError, match="refusing to listen"):
        Settings(db_path=tmp_path / "n.db", host=host)
    Settings(db_path=tmp_path / "n.db", host=host, token="t")


@pytest.mark.parametrize("change, message", [
    ({"port": 70000}, "port"), ({"token": " "}, "token"), ({"token": "tökén"}, "ASCII"),
    ({"token": "two words"}, "ASCII"), ({"read_auth": True}, "read_auth"),
    ({"lost_after_s": 0}, "lost_after_s"), ({"max_open_commands": 0}, "max_open_commands"),
    ({"max_frame_bytes": 0}, "max_frame_bytes"), ({"watcher_max_pending_bytes": 0}, "watcher_max_pending_bytes"),
    ({"open": True, "token": "t"}, "--open"), ({"max_page_bytes": 0}, "max_page_bytes"),
    ({"max_run_artifacts": 0}, "max_run_artifacts"),
])
def test_invalid_values(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        Settings(db_path=tmp_path / "n.db", **change)


def test_frozen(tmp_path):
    settings = Settings(db_path=tmp_path / "n.db")
    with pytest.raises(AttributeError):
        settings.port = 1  # type: ignore[misc]
