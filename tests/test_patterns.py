"""The compiled-pattern cache: the same patterns as `re.compile`, from the file or not."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccm import patterns
from ccm.engine import text

SOME = [
    (r"\b(?:is|are) now\b|\binstead of\b", 0),
    (r"(?P<was>\d+(?:\.\d+)?)k?\b", re.IGNORECASE),
    (r"^(?:ok|so|right)[,.]\s+(\w+)", re.MULTILINE),
    (r"[^\W_]++(?:[_.-][^\W_]++)+", re.ASCII),
]


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The cache as a new process finds it, its file under `tmp_path`."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("CCM_PATTERN_CACHE", raising=False)
    for name, value in (
        ("_specs", {}),
        ("_derived", {}),
        ("_new", {}),
        ("_new_derived", {}),
        ("_used", set()),
        ("_loaded", False),
        ("_failed", False),
    ):
        monkeypatch.setattr(patterns, name, value)
    monkeypatch.setattr(patterns.atexit, "register", lambda function: None)
    yield patterns.cache_path()


def _restart(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a later process: nothing compiled here yet, the file read again."""
    for name, value in (("_specs", {}), ("_derived", {}), ("_new", {}), ("_new_derived", {})):
        monkeypatch.setattr(patterns, name, value)
    monkeypatch.setattr(patterns, "_used", set())
    monkeypatch.setattr(patterns, "_loaded", False)


def test_patterns_come_back_from_the_file_as_re_compiles_them(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = [patterns.compile(pattern, flags) for pattern, flags in SOME]
    assert not fresh.exists()
    patterns.save()
    assert fresh.exists()
    _restart(monkeypatch)
    compiled = []

    def refused(*args: object) -> re.Pattern[str]:
        raise AssertionError("compiled, not read from the cache")

    with monkeypatch.context() as refusing:
        refusing.setattr(patterns.re, "compile", refused)
        for pattern, flags in SOME:
            compiled.append(patterns.compile(pattern, flags))
    for (pattern, flags), made, again in zip(SOME, first, compiled, strict=True):
        assert again == made == re.compile(pattern, flags)
        assert again.groupindex == made.groupindex and again.groups == made.groups
    assert compiled[1].search("it was 14.5K now").group("was") == "14.5"  # type: ignore[union-attr]


@settings(max_examples=60)
@given(
    words=st.lists(st.text(alphabet="abcxyz'- ", min_size=1, max_size=8), min_size=1, max_size=12),
    sample=st.text(alphabet="abcxyz'- .", max_size=80),
)
def test_a_cached_trie_finds_what_the_trie_compiled_finds(words: list[str], sample: str) -> None:
    """`any_of` (the tries the cue scans are made of) and `skipping` as a later process
    builds them, from the code the cache writes (`_spec`): the same matches as the
    patterns compiled anew."""

    def from_cache(made: re.Pattern[str]) -> re.Pattern[str]:
        built: re.Pattern[str] = patterns._sre.compile(
            made.pattern, *patterns._spec(made.pattern, made.flags)
        )
        return built

    trie = text.any_of(words)
    assert from_cache(trie).findall(sample) == re.compile(trie.pattern).findall(sample)
    skipped = text.skipping(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b")
    plain = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b")
    assert from_cache(skipped).findall(sample) == plain.findall(sample)


def test_a_damaged_file_is_compiled_anew_and_replaced(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh.parent.mkdir(parents=True)
    fresh.write_bytes(b"\x00not marshal")
    made = patterns.compile(*SOME[0])
    assert made == re.compile(*SOME[0])
    patterns.save()
    _restart(monkeypatch)
    patterns.compile(*SOME[0])
    assert SOME[0] in patterns._specs


def test_a_spec_the_engine_refuses_is_compiled_as_usual(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patterns.compile(*SOME[0])
    patterns.save()
    _restart(monkeypatch)
    patterns._load()
    flags, code, groups, groupindex, indexgroup = patterns._specs[SOME[0]]
    patterns._specs[SOME[0]] = (flags, [999_999, *code[1:]], groups, groupindex, indexgroup)
    made = patterns.compile(*SOME[0])
    assert made == re.compile(*SOME[0])
    assert made.search("we are now on v2") is not None


def test_code_that_differs_from_re_compile_is_never_written(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patterns.compile(*SOME[0])

    def wrong(pattern: str, flags: int) -> patterns.Spec:
        return patterns._spec(r"something else", flags)

    monkeypatch.setattr(patterns, "_spec", lambda pattern, flags: wrong(pattern, flags))
    patterns.save()
    assert not fresh.exists()
    assert patterns._failed
    assert patterns.compile(*SOME[1]) == re.compile(*SOME[1])  # plain `re` from then on


def test_turned_off_nothing_is_written(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCM_PATTERN_CACHE", "0")
    assert patterns.compile(*SOME[2]) == re.compile(*SOME[2])
    patterns.save()
    assert not fresh.exists()


def test_a_cache_file_that_is_a_folder_costs_only_time(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh.mkdir(parents=True)  # unreadable as a file, and cannot be replaced by one
    assert patterns.compile(*SOME[3]) == re.compile(*SOME[3])
    patterns.save()
    assert fresh.is_dir()


def test_old_patterns_leave_the_file_once_it_is_full(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(patterns, "MOST", 3)
    for index in range(4):
        patterns.compile(rf"old{index}\d+")
    patterns.save()
    _restart(monkeypatch)
    patterns.compile(r"old0\d+")  # used again: kept
    patterns.compile(r"new\w+")
    patterns.save()
    _restart(monkeypatch)
    patterns._load()
    assert set(patterns._specs) == {(r"old0\d+", 0), (r"new\w+", 0)}


def test_a_new_process_reads_the_engine_patterns_from_the_file(tmp_path: Path) -> None:
    """The engine's modules, imported twice in processes of their own: the second
    compiles none of them, and each pattern it holds equals what `re` compiles."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("CCM_PATTERN_CACHE", None)
    script = (
        "import re, ccm.patterns as p\n"
        "made = []\n"
        "real = re.compile\n"
        "def counting(pattern, flags=0):\n"
        "    made.append(pattern)\n"
        "    return real(pattern, flags)\n"
        "p.re = type('R', (), {'compile': staticmethod(counting), 'Pattern': re.Pattern})\n"
        "import ccm.context, ccm.derive, ccm.index, ccm.engine.critical as c\n"
        "assert all(cue.pattern == real(cue.pattern.pattern, cue.pattern.flags) for cue in c.CUES)\n"
        "print(len(made))\n"
    )
    counts = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        counts.append(int(done.stdout.split()[-1]))
    assert counts[0] > 200
    assert counts[1] == 0
    assert list((tmp_path / "ccm").glob("patterns-*.marshal"))


def test_no_home_folder_costs_only_time(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A service account without a home (no HOME, no XDG_CACHE_HOME): nothing raised."""
    monkeypatch.delenv("XDG_CACHE_HOME")

    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(patterns.Path, "home", homeless)
    assert patterns.compile(*SOME[1]) == re.compile(*SOME[1])
    patterns.save()
    assert not fresh.exists()
