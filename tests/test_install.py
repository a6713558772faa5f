"""`ccm install claude-code` / `ccm uninstall claude-code`, and the plugin folder."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from ccm import __version__
from ccm import install as ccm_install
from ccm.install import (
    EVENTS,
    add_hooks,
    ccm_executable,
    hook_group,
    install,
    is_ccm_hook,
    remove_hooks,
    uninstall,
)

CCM = "/opt/ccm venv/bin/ccm"  # a space, to see it quoted
PLUGIN = Path(__file__).parent.parent / "integrations" / "claude-code"
SETTINGS = Path("/nowhere/settings.json")  # only named in error messages

ORIGINAL_SETTINGS = """{
    "model": "opus",
    "permissions": {"allow": ["Bash(make test)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send 'done ✓'"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}]
    },
    "statusLine": {"type": "command", "command": "status"}
}
"""
ORIGINAL_CLAUDE_JSON = """{"numStartups": 12, "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": [], "env": {}}}, "projects": {}}"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of its own, and a fixed ccm executable to write into the settings."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(ccm_install, "ccm_executable", lambda: CCM)
    return home


def run(group: Any, *args: str, root: str | None = None) -> Result:
    return CliRunner().invoke(group, ["claude-code", *args], obj={"root": root})


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def ccm_hooks(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [
        hook
        for group in settings["hooks"].get(event, [])
        for hook in group["hooks"]
        if is_ccm_hook(hook, event)
    ]


# -- install --------------------------------------------------------------------------------


def test_fresh_install_creates_both_files(home: Path) -> None:
    result = run(install)

    assert result.exit_code == 0, result.output
    settings = read(home / ".claude" / "settings.json")
    assert list(settings["hooks"]) == list(EVENTS)
    assert settings["hooks"]["SessionStart"] == [
        {
            "matcher": "startup|resume|clear|compact",
            "hooks": [{"type": "command", "command": f"'{CCM}' hook SessionStart", "timeout": 30}],
        }
    ]
    assert settings["hooks"]["PreCompact"][0]["matcher"] == ""
    for event in ("UserPromptSubmit", "Stop", "SessionEnd"):
        (group,) = settings["hooks"][event]
        assert "matcher" not in group
        timeout = 10 if event == "UserPromptSubmit" else 30  # the one run on every prompt
        assert group["hooks"] == [
            {"type": "command", "command": f"'{CCM}' hook {event}", "timeout": timeout}
        ]
    assert read(home / ".claude.json") == {
        "mcpServers": {"ccm": {"type": "stdio", "command": CCM, "args": ["mcp"], "env": {}}}
    }
    text = (home / ".claude.json").read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "mcpServers"')
    assert not list(home.rglob("*.ccm-backup"))  # nothing existed to back up
    assert "restart Claude Code" in result.output
    assert "/hooks" in result.output and "/mcp" in result.output


def test_install_keeps_what_is_there_and_twice_is_once(home: Path) -> None:
    settings_path = home / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    settings_path.write_text(ORIGINAL_SETTINGS)
    claude_json = home / ".claude.json"
    claude_json.write_text(ORIGINAL_CLAUDE_JSON)

    first = run(install)
    once = settings_path.read_bytes(), claude_json.read_bytes()
    second = run(install)

    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert (settings_path.read_bytes(), claude_json.read_bytes()) == once
    settings = read(settings_path)
    assert list(settings) == ["model", "permissions", "hooks", "statusLine"]
    assert settings["permissions"] == {"allow": ["Bash(make test)"]}
    assert list(settings["hooks"]) == [
        "Stop",
        "PreToolUse",
        "SessionStart",
        "UserPromptSubmit",
        "PreCompact",
        "SessionEnd",
    ]
    stop = settings["hooks"]["Stop"]
    assert stop[0] == {"hooks": [{"type": "command", "command": "notify-send 'done ✓'"}]}
    assert stop[1] == hook_group("Stop", CCM)
    assert settings["hooks"]["PreToolUse"][0]["matcher"] == "Bash"
    assert "✓" in settings_path.read_text()  # written as UTF-8, not \u2713
    config = read(claude_json)
    assert list(config) == ["numStartups", "mcpServers", "projects"]
    assert list(config["mcpServers"]) == ["github", "ccm"]
    # the backups hold the originals: the second install wrote nothing
    assert (home / ".claude" / "settings.json.ccm-backup").read_text() == ORIGINAL_SETTINGS
    assert (home / ".claude.json.ccm-backup").read_text() == ORIGINAL_CLAUDE_JSON
    assert "nothing to change" in second.output
    assert "restart" not in second.output


def test_uninstall_gives_back_the_original_bytes(home: Path) -> None:
    settings_path = home / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    settings_path.write_text(ORIGINAL_SETTINGS)
    claude_json = home / ".claude.json"
    claude_json.write_text(ORIGINAL_CLAUDE_JSON)
    run(install)
    run(install)

    result = run(uninstall)

    assert result.exit_code == 0, result.output
    assert settings_path.read_text() == ORIGINAL_SETTINGS
    assert claude_json.read_text() == ORIGINAL_CLAUDE_JSON
    assert (
        f"{home / '.claude' / 'settings.json'}: removed hooks Stop, SessionStart" in result.output
    )
    assert "removed MCP server ccm; backup in" in result.output


def test_uninstall_after_other_edits_keeps_them(home: Path) -> None:
    claude_json = home / ".claude.json"
    claude_json.write_text(ORIGINAL_CLAUDE_JSON)
    run(install)
    edited = read(claude_json)
    edited["numStartups"] = 13  # Claude Code wrote to it meanwhile
    claude_json.write_text(json.dumps(edited))

    run(uninstall)

    assert read(claude_json) == {**json.loads(ORIGINAL_CLAUDE_JSON), "numStartups": 13}


def test_uninstall_restores_empty_objects_and_lists(home: Path) -> None:
    settings_path = home / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    original = '{"hooks": {"Stop": []}}'
    settings_path.write_text(original)
    run(install)

    run(uninstall)

    assert settings_path.read_text() == original


def test_install_into_missing_files_then_uninstall_removes_them(home: Path) -> None:
    run(install)
    assert (home / ".claude" / "settings.json").exists() and (home / ".claude.json").exists()

    result = run(uninstall, "--json")

    assert result.exit_code == 0, result.output
    assert not (home / ".claude" / "settings.json").exists()
    assert not (home / ".claude.json").exists()
    report = json.loads(result.output)
    assert [f["action"] for f in report["files"]] == ["removed", "removed"]


def test_uninstall_without_install_changes_nothing(home: Path) -> None:
    claude_json = home / ".claude.json"
    claude_json.write_text(ORIGINAL_CLAUDE_JSON)

    result = run(uninstall)

    assert result.exit_code == 0, result.output
    assert claude_json.read_text() == ORIGINAL_CLAUDE_JSON
    assert not (home / ".claude.json.ccm-backup").exists()
    assert not (home / ".claude").exists()
    assert result.output.count("nothing to change") == 2


def test_dry_run_writes_nothing_and_reports(home: Path) -> None:
    claude_json = home / ".claude.json"
    claude_json.write_text(ORIGINAL_CLAUDE_JSON)

    human = run(install, "--dry-run")
    result = run(install, "--dry-run", "--json")

    assert human.exit_code == 0 and result.exit_code == 0, human.output + result.output
    assert not (home / ".claude").exists()
    assert claude_json.read_text() == ORIGINAL_CLAUDE_JSON
    assert not (home / ".claude.json.ccm-backup").exists()
    assert (
        "would add hooks SessionStart, UserPromptSubmit, PreCompact, Stop, SessionEnd; would create the file"
        in human.output
    )
    assert "would add MCP server ccm\n" in human.output
    assert "nothing was written" in human.output
    report = json.loads(result.output)
    assert report["dry_run"] is True
    settings, config = report["files"]
    assert settings["path"] == str(home / ".claude" / "settings.json")
    assert settings["action"] == "created"
    assert settings["added"] == [f"hooks.{event}" for event in EVENTS]
    assert config["action"] == "updated" and config["added"] == ["mcpServers.ccm"]
    assert config["backup"] is None


def test_dry_run_uninstall_writes_nothing(home: Path) -> None:
    run(install)
    before = (home / ".claude.json").read_bytes()

    result = run(uninstall, "--dry-run")

    assert result.exit_code == 0, result.output
    assert (home / ".claude.json").read_bytes() == before
    assert "would remove MCP server ccm; would remove the file" in result.output


def test_project_writes_under_the_project(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()

    result = run(install, "--project", str(project))

    assert result.exit_code == 0, result.output
    assert len(ccm_hooks(read(project / ".claude" / "settings.json"), "Stop")) == 1
    assert "ccm" in read(project / ".mcp.json")["mcpServers"]
    assert not (home / ".claude").exists() and not (home / ".claude.json").exists()
    assert ".mcp.json" in result.output


def test_user_and_project_together_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    result = run(install, "--user", "--project", str(tmp_path))

    assert result.exit_code == 2
    assert "--project" in result.output
    assert not (home / ".claude.json").exists()


def test_root_goes_into_hooks_and_server(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "my knowledge"

    result = run(install, root=str(root))

    assert result.exit_code == 0, result.output
    (hook,) = ccm_hooks(read(home / ".claude" / "settings.json"), "SessionEnd")
    assert shlex.split(hook["command"]) == [CCM, "--root", str(root), "hook", "SessionEnd"]
    server = read(home / ".claude.json")["mcpServers"]["ccm"]
    assert server["args"] == ["--root", str(root), "mcp"]


def test_relative_root_is_made_absolute(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    run(install, root="knowledge")

    server = read(home / ".claude.json")["mcpServers"]["ccm"]
    assert server["args"] == ["--root", str(tmp_path / "knowledge"), "mcp"]


def test_reinstall_elsewhere_replaces_in_place(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings_path = home / ".claude" / "settings.json"
    run(install)
    settings = read(settings_path)
    settings["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "later"}]})
    settings_path.write_text(json.dumps(settings))
    monkeypatch.setattr(ccm_install, "ccm_executable", lambda: "/usr/local/bin/ccm")

    result = run(install, "--json", root="/data/k")

    assert result.exit_code == 0, result.output
    settings_change, config_change = json.loads(result.output)["files"]
    assert settings_change["updated"] == [f"hooks.{event}" for event in EVENTS]
    assert settings_change["added"] == [] and config_change["updated"] == ["mcpServers.ccm"]
    settings = read(settings_path)
    for event in EVENTS:
        (hook,) = ccm_hooks(settings, event)
        assert hook["command"] == f"/usr/local/bin/ccm --root /data/k hook {event}"
    assert settings["hooks"]["Stop"][1]["hooks"][0]["command"] == "later"
    assert list(read(home / ".claude.json")["mcpServers"]) == ["ccm"]


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ('{\n  "model": "opus",\n  "hooks": {,\n}\n', ":3:"),
        ('{"hooks": []}', '"hooks" is a list'),
        ('{"hooks": {"Stop": {}}}', '"hooks.Stop" is a JSON object'),
        ("[1, 2]", "the top level is a list"),
    ],
)
def test_unreadable_settings_are_never_overwritten(home: Path, content: str, where: str) -> None:
    settings_path = home / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    settings_path.write_text(content)

    result = run(install)

    assert result.exit_code == 2
    assert str(settings_path) in result.output
    assert where in result.output
    assert settings_path.read_text() == content
    assert not (home / ".claude.json").exists()  # nothing written, not even the other file
    assert not list(home.rglob("*.ccm-backup"))


def test_unreadable_claude_json_stops_before_the_settings(home: Path) -> None:
    (home / ".claude.json").write_text('{"mcpServers": {"a": 1,}}')

    result = run(install)

    assert result.exit_code == 2
    assert f"{home / '.claude.json'}:1:24" in result.output
    assert not (home / ".claude").exists()


def test_a_file_that_cannot_be_written_is_an_error(home: Path) -> None:
    (home / ".claude").write_text("not a folder")

    result = run(install)

    assert result.exit_code == 1
    assert f"Error: {home / '.claude'}" in result.output
    assert not (home / ".claude.json").exists()


def test_permissions_are_kept(home: Path) -> None:
    claude_json = home / ".claude.json"
    claude_json.write_text(ORIGINAL_CLAUDE_JSON)
    claude_json.chmod(0o600)

    run(install)

    assert claude_json.stat().st_mode & 0o777 == 0o600
    assert (home / ".claude.json.ccm-backup").stat().st_mode & 0o777 == 0o600


def test_a_linked_settings_file_stays_linked(home: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"model": "opus"}')
    (home / ".claude").mkdir()
    link = home / ".claude" / "settings.json"
    link.symlink_to(dotfiles)

    run(install)

    assert link.is_symlink()
    assert len(ccm_hooks(read(dotfiles), "Stop")) == 1


def test_ccm_executable_is_an_absolute_ccm() -> None:
    path = ccm_executable()

    assert os.path.isabs(path) and Path(path).name == "ccm"


# -- recognising ccm's hooks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "event", "ours"),
    [
        ("ccm hook Stop", "Stop", True),
        ("'/opt/a b/ccm' --root '/k b' hook Stop", "Stop", True),
        ("/usr/bin/ccm hook SessionEnd", "Stop", False),
        ("ccm hook Stop --verbose", "Stop", False),
        ("python -m ccm hook Stop", "Stop", False),
        ("/usr/bin/notccm hook Stop", "Stop", False),
        ("echo 'unbalanced", "Stop", False),
    ],
)
def test_is_ccm_hook(command: str, event: str, ours: bool) -> None:
    assert is_ccm_hook({"type": "command", "command": command}, event) is ours


def test_uninstall_keeps_a_hook_put_into_ccms_group() -> None:
    settings = add_hooks({}, SETTINGS, CCM).data
    settings["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "mine"})

    left = remove_hooks(settings, SETTINGS).data

    assert left == {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
other_hook = st.builds(
    lambda command, timeout: {"type": "command", "command": command, "timeout": timeout},
    st.text(max_size=12),
    st.integers(1, 60),
)
group = st.builds(
    lambda matcher, hooks: {
        **({"matcher": matcher} if matcher is not None else {}),
        "hooks": hooks,
    },
    st.none() | st.text(max_size=5),
    st.lists(other_hook, min_size=1, max_size=3),
)
settings_dicts = st.builds(
    lambda others, hooks: {**others, **({"hooks": hooks} if hooks else {})},
    st.dictionaries(st.text(max_size=6).filter(lambda k: k != "hooks"), json_values, max_size=4),
    st.dictionaries(
        st.sampled_from([*EVENTS, "PreToolUse", "Notification"]),
        st.lists(group, min_size=1, max_size=3),
        max_size=4,
    ),
)


@given(settings_dicts, st.sampled_from([None, "/k", "/a b/k"]))
def test_uninstall_undoes_install_on_any_settings(
    settings: dict[str, Any], root: str | None
) -> None:
    once = add_hooks(settings, SETTINGS, CCM, root).data

    assert add_hooks(once, SETTINGS, CCM, root).data == once
    assert remove_hooks(once, SETTINGS).data == settings
    assert json.dumps(remove_hooks(once, SETTINGS).data) == json.dumps(settings)  # key order


# -- the plugin folder ------------------------------------------------------------------------


def test_plugin_folder_matches_what_install_adds() -> None:
    manifest = read(PLUGIN / ".claude-plugin" / "plugin.json")
    hooks = read(PLUGIN / "hooks" / "hooks.json")["hooks"]
    servers = read(PLUGIN / ".mcp.json")["mcpServers"]
    marketplace = read(PLUGIN / ".claude-plugin" / "marketplace.json")

    assert manifest["name"] == "ccm" and manifest["version"] == __version__
    assert list(hooks) == list(EVENTS)
    for event in EVENTS:
        assert hooks[event] == [hook_group(event, "ccm")]
    assert servers == {"ccm": {"command": "ccm", "args": ["mcp"]}}
    assert [(p["name"], p["source"]) for p in marketplace["plugins"]] == [("ccm", "./")]
    assert (PLUGIN / "README.md").read_text().count("ccm install claude-code") >= 1
