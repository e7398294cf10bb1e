"""runkit.flags: a config dataclass -> one flag per field (type, choices, default, help from the
field's comment), and back to the fields a command line gave."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Literal

import pytest

from runkit import flags

Mode = Literal["fast", "exact"]


@dataclass(frozen=True)
class Inner:
    # A switch of the nested object, described
    # over two lines.
    deep: bool = False


@dataclass(frozen=True)
class Example:
    count: int = 3  # how many
    # The scale, 50% by default.
    scale: float | None = 0.5
    mode: Mode = "fast"  # how: fast or exact
    maybe: bool | None = None
    undocumented: str = "x"
    layers: tuple[int, ...] = (0, 1)  # per-layer: no flag

    inner: Inner = field(default_factory=Inner)


def test_comments_above_and_beside_a_field_are_its_help():
    assert flags.field_comments(Example) == {"count": "how many", "scale": "The scale, 50% by default.",
                                             "mode": "how: fast or exact", "maybe": "", "undocumented": "",
                                             "layers": "per-layer: no flag", "inner": ""}
    assert flags.field_comments(Inner) == {"deep": "A switch of the nested object, described over two lines."}


def test_each_field_becomes_a_typed_flag_and_tuples_none():
    by_dest = {flag.dest: flag for flag in flags.config_flags("section", Example)}
    assert list(by_dest) == ["section.count", "section.scale", "section.mode", "section.maybe", "section.undocumented",
                             "section.deep"]  # the nested object's fields flat, after the outer ones
    assert [(f.flag, f.type_name, f.choices, f.default) for f in by_dest.values()] == [
        ("--count", "int", None, 3), ("--scale", "float | None", None, 0.5), ("--mode", "str", ("fast", "exact"), "fast"),
        ("--maybe", "bool | None", None, None), ("--undocumented", "str", None, "x"), ("--deep", "bool", None, False)]
    assert by_dest["section.deep"].owner == "Inner" and by_dest["section.count"].owner == "Example"
    assert flags.flagless_fields(Example) == ("layers",)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    flags.add_config_groups(parser, flags.config_flags("section", Example))
    return parser.parse_args(argv)


def test_only_the_flags_given_are_overrides():
    assert flags.overrides(parse(), ["section"]) == {"section": {}}
    given = flags.overrides(parse("--count", "7", "--scale", "none", "--deep", "--maybe", "off", "--mode", "exact"),
                            ["section"])
    assert given == {"section": {"count": 7, "scale": None, "deep": True, "maybe": False, "mode": "exact"}}
    assert flags.overrides(parse("--deep", "false"), ["section"]) == {"section": {"deep": False}}


@pytest.mark.parametrize("argv", [["--mode", "slow"], ["--count", "many"], ["--deep", "maybe"]])
def test_a_bad_value_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == 2 and argv[0] in capsys.readouterr().err


def test_help_shows_the_comment_and_the_default():
    parser = argparse.ArgumentParser()
    flags.add_config_groups(parser, flags.config_flags("section", Example))
    text = " ".join(parser.format_help().split())
    assert "The scale, 50% by default. [record: 0.5]" in text  # argparse's % formatting escaped
    assert "how: fast or exact [record: fast]" in text and "[record: none]" in text
    assert "--deep [{true,false}]" in text
