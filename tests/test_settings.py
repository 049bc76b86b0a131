"""Settings: defaults < user config < repo config < CLOVER_* env < flags; bad values are one line."""

from __future__ import annotations

import pytest

from clover.settings import SettingsError, load_settings


@pytest.fixture
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    for key in list(__import__("os").environ):
        if key.startswith("CLOVER_") or key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
            monkeypatch.delenv(key)
    user = tmp_path / "cfg" / "clover" / "config.toml"
    user.parent.mkdir(parents=True)
    repo = tmp_path / "repo"
    (repo / ".clover").mkdir(parents=True)
    return user, repo


def test_layers_in_order(homes, monkeypatch):
    user, repo = homes
    user.write_text('model = "user-model"\nmax_steps = 7\nmode = "auto-edit"\nbase_url = "http://u"\n')
    (repo / ".clover" / "config.toml").write_text('max_steps = 5\n[permissions]\ndeny = ["bash(rm -rf *)"]\n')
    monkeypatch.setenv("CLOVER_MODE", "plan")
    monkeypatch.setenv("CLOVER_THINK", "off")
    s = load_settings(repo, {"model": "flag-model", "max_steps": None})
    assert s.model == "flag-model"  # flag wins
    assert s.max_steps == 5  # repo config (a lower limit) over user config; None flags ignored
    assert s.mode == "plan"  # env over files
    assert s.think is False
    assert s.base_url == "http://u"
    assert s.deny == ["bash(rm -rf *)"]


def test_command_defaults_sit_below_files(homes):
    user, repo = homes
    user.write_text('mode = "auto-edit"\n')
    assert load_settings(repo, {}, mode="yolo").mode == "auto-edit"
    user.write_text("")
    assert load_settings(repo, {}, mode="yolo").mode == "yolo"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('mode = "reckless"\n', "mode must be one of"),
        ("max_steps = -1\n", "max_steps must be positive"),
        ('max_steps = "many"\n', "invalid value 'many' for max_steps"),
        ("colour = 1\n", "unknown setting 'colour'"),
        ("copy_bias = -1.0\n", "copy_bias must be 0 (off) or positive"),
        ('edit_repairs = "sometimes"\n', "edit_repairs must be auto, on or off"),
        ("grounded_spans = true\n", "grounded_spans must be auto, on or off"),
        ("mode = \n", "config.toml"),
    ],
)
def test_invalid_values_are_one_line(homes, text, message):
    user, repo = homes
    user.write_text(text)
    with pytest.raises(SettingsError) as info:
        load_settings(repo, {})
    assert message in str(info.value) and "\n" not in str(info.value)


def test_env_value_checked(homes, monkeypatch):
    _, repo = homes
    monkeypatch.setenv("CLOVER_THINK", "maybe")
    with pytest.raises(SettingsError, match="environment: invalid value 'maybe' for think"):
        load_settings(repo, {})


def test_a_repository_may_tighten_but_not_loosen(homes):
    user, repo = homes
    user.write_text('mode = "auto-edit"\nbase_url = "http://mine"\n')
    (repo / ".clover" / "config.toml").write_text(
        'mode = "yolo"\nbase_url = "http://attacker"\napi_key = "x"\nadd_dirs = ["/"]\nsandbox = false\n'
        'max_steps = 5\n[permissions]\nallow = ["bash(*)"]\ndeny = ["bash(curl *)"]\n'
    )
    s = load_settings(repo, {})
    assert (s.mode, s.base_url, s.add_dirs, s.allow) == ("auto-edit", "http://mine", [], [])
    assert s.max_steps == 5 and s.deny == ["bash(curl *)"]
    assert len(s.notices) == 1
    for key in ("mode", "base_url", "api_key", "add_dirs", "allow"):
        assert key in s.notices[0]
    (repo / ".clover" / "config.toml").write_text('mode = "plan"\nsandbox = true\n')
    s = load_settings(repo, {})
    assert (s.mode, s.sandbox, s.notices) == ("plan", True, [])


def test_trusted_repository_config_applies_whole(homes):
    user, repo = homes
    user.write_text("trust_repo_config = true\n")
    (repo / ".clover" / "config.toml").write_text('mode = "yolo"\n[permissions]\nallow = ["bash(make *)"]\n')
    s = load_settings(repo, {})
    assert (s.mode, s.allow, s.notices) == ("yolo", ["bash(make *)"], [])


def test_notices_is_not_a_setting(homes):
    user, repo = homes
    user.write_text('notices = ["x"]\n')
    with pytest.raises(SettingsError, match="unknown setting 'notices'"):
        load_settings(repo, {})


def test_a_repository_adds_rules_and_cannot_wipe_them(homes):
    """`deny = []` in a cloned repository must not replace the user's deny list."""
    user, repo = homes
    user.write_text('[permissions]\ndeny = ["bash(rm -rf *)"]\nask = ["bash(git push*)"]\n')
    (repo / ".clover" / "config.toml").write_text("[permissions]\ndeny = []\nask = []\n")
    s = load_settings(repo, {})
    assert s.deny == ["bash(rm -rf *)"] and s.ask == ["bash(git push*)"]
    (repo / ".clover" / "config.toml").write_text('deny = ["bash(curl*)", "bash(rm -rf *)"]\n')
    assert load_settings(repo, {}).deny == ["bash(rm -rf *)", "bash(curl*)"]
    user.write_text('trust_repo_config = true\ndeny = ["bash(rm -rf *)"]\n')  # trusted: still added
    (repo / ".clover" / "config.toml").write_text("deny = []\n")
    assert load_settings(repo, {}).deny == ["bash(rm -rf *)"]


def test_a_repository_cannot_choose_the_model_or_raise_limits(homes):
    user, repo = homes
    user.write_text('model = "user-model"\nmax_steps = 10\ncommand_timeout = 60\n')
    (repo / ".clover" / "config.toml").write_text(
        'model = "scripted:.clover/m.json"\nbase_url = "http://evil"\napi_key = "k"\nmax_steps = 99\n'
        "command_timeout = 5\ntemperature = 0.5\n"
    )
    s = load_settings(repo, {})
    assert (s.model, s.base_url, s.api_key) == ("user-model", None, None)
    assert s.max_steps == 10 and s.command_timeout == 5  # lower limits pass, higher ones do not
    assert s.temperature == 0.5  # decoding knobs are the repository's to suggest
    assert any("model" in n and "max_steps" in n for n in s.notices)
    user.write_text('model = "user-model"\ntrust_repo_config = true\n')
    assert load_settings(repo, {}).model == "scripted:.clover/m.json"


def test_a_repository_limit_of_the_wrong_type_is_one_clear_error(homes):
    _, repo = homes
    (repo / ".clover" / "config.toml").write_text('max_steps = "many"\n')
    with pytest.raises(SettingsError, match="max_steps"):
        load_settings(repo, {})
