"""Command-line flags derived from config dataclasses: one mechanism for both trainers.

Every field of a section's config (ModelConfig, OptimConfig, TrainConfig, and the `lineage`
object nested in each) becomes one flag `--field-name`, whose parser and choices come from the
field's type, whose default is the field's, and whose help is the field's own comment in the
config's source (the `#` lines right above the field and the comment on its line: the config is
the documentation, not a second description of it). Per-layer tuples have no flag (presets and
`--init-from` set them). A flag left out keeps the chosen preset's value: a flag not given leaves
no attribute (argparse.SUPPRESS), so `overrides` collects exactly the flags given, `none` (a
field's "not set") included. Imports neither jax nor torch.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import io
import sys
import tokenize
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runkit.cli import parse_bool

# Fields whose flag is not `--field-name`: the fixed entry point's `--dtype` (INTERFACES.md).
FLAG_NAMES = {"dtype_policy": "--dtype"}
# Second spellings kept for the command lines already written down (docs, logs, artifacts).
FLAG_ALIASES = {"attention_backend": ("--attention",)}


@dataclass(frozen=True)
class ConfigFlag:
    """One config field as a flag. `dest` is "section.field" (a lineage switch flat in its
    section, as config.with_fields takes it); `type_name` is the field's type as written
    ("int", "float | None", "bool", "str" with `choices`), what the two trainers' surfaces
    compare."""

    dest: str
    owner: str  # the config class the field is declared in (ModelConfig, ModelLineage, ...)
    flag: str
    parse: Callable[[str], Any]
    type_name: str
    choices: tuple[str, ...] | None
    default: Any
    help: str
    aliases: tuple[str, ...] = ()

    @property
    def field(self) -> str:
        return self.dest.split(".", 1)[1]


def or_none(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse`, except that "none" gives None (the field's "not set" value)."""

    def parse_or_none(text: str) -> Any:
        return None if text.lower() == "none" else parse(text)

    parse_or_none.__name__ = parse.__name__  # argparse names the type in its error message
    return parse_or_none


def field_comments(config_class: type) -> dict[str, str]:
    """{field: its comment}: the `#` lines directly above each field of `config_class` (no blank
    line between) and the comment on the field's own line, joined into one sentence."""
    return dict(_module_field_comments(config_class.__module__)[config_class.__name__])


@functools.cache
def _module_field_comments(module_name: str) -> dict[str, dict[str, str]]:
    """{class: {field: its comment}} of every class in a module's source, read, tokenized and parsed
    once (inspect.getsource of each class would parse its whole module again, on every command's
    start)."""
    source = inspect.getsource(sys.modules[module_name])
    comments = {token.start[0]: token.string.lstrip("#").strip()
                for token in tokenize.generate_tokens(io.StringIO(source).readline) if token.type == tokenize.COMMENT}
    lines = source.splitlines()
    classes: dict[str, dict[str, str]] = {}
    for class_node in ast.walk(ast.parse(source)):
        if not isinstance(class_node, ast.ClassDef):
            continue
        found = classes[class_node.name] = {}
        for node in class_node.body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            above: list[str] = []
            line = node.lineno - 1
            while line >= 1 and lines[line - 1].lstrip().startswith("#"):
                above.insert(0, comments[line])
                line -= 1
            inline = [comments[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1) if n in comments
                      and not lines[n - 1].lstrip().startswith("#")]
            found[node.target.id] = " ".join(above + inline)
    return classes


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Literal:
        return "str"
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return " | ".join(_type_name(arg) for arg in typing.get_args(hint))
    return "None" if hint is type(None) else hint.__name__


def _parser_of(hint: Any) -> tuple[Callable[[str], Any], tuple[str, ...] | None] | None:
    """(parse, choices) for a field's type; None for a type with no flag (tuples)."""
    if typing.get_origin(hint) is typing.Literal:
        return str, tuple(typing.get_args(hint))
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        parsed = _parser_of(inner)
        return None if parsed is None else (or_none(parsed[0]), parsed[1])
    if hint is bool:
        return parse_bool, None
    if hint in (int, float, str):
        return hint, None
    return None


def _fields(config_class: type) -> Iterator[tuple[type, dataclasses.Field, Any, str]]:
    """(declaring class, field, its type, its comment) of `config_class`, a nested dataclass's
    fields in its place."""
    hints = typing.get_type_hints(config_class)
    comments = field_comments(config_class)
    for item in dataclasses.fields(config_class):
        hint = hints[item.name]
        if dataclasses.is_dataclass(hint):
            yield from _fields(typing.cast(type, hint))
        else:
            yield config_class, item, hint, comments.get(item.name, "")


def _default(item: dataclasses.Field) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    return item.default_factory() if item.default_factory is not dataclasses.MISSING else None


def config_flags(section: str, config_class: type) -> tuple[ConfigFlag, ...]:
    """The flags of one section's config class, in field order (its lineage's after its own)."""
    flags = []
    for owner, item, hint, comment in _fields(config_class):
        parsed = _parser_of(hint)
        if parsed is None:
            continue
        parse, choices = parsed
        flags.append(ConfigFlag(
            dest=f"{section}.{item.name}", owner=owner.__name__, flag=FLAG_NAMES.get(item.name, "--" + item.name.replace("_", "-")),
            parse=parse, type_name=_type_name(hint), choices=choices, default=_default(item), help=comment,
            aliases=FLAG_ALIASES.get(item.name, ()),
        ))
    return tuple(flags)


def flagless_fields(config_class: type) -> tuple[str, ...]:
    """The fields of `config_class` (lineage included) that have no flag: the per-layer tuples."""
    return tuple(item.name for _, item, hint, _ in _fields(config_class) if _parser_of(hint) is None)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def add_config_flags(group: Any, flags: Sequence[ConfigFlag], default_label: str = "record") -> None:
    """One argparse argument per flag into `group`; the help ends with the field's default
    (`default_label`: the preset whose values the config's defaults are). A switch given with no
    value means true (`--cycle-data`), or takes one (`--cycle-data false`)."""
    for flag in flags:
        switch = "bool" in flag.type_name.split(" | ")
        help_text = f"{flag.help} [{default_label}: {_shown(flag.default)}]".strip().replace("%", "%%")
        group.add_argument(
            flag.flag, *flag.aliases, dest=flag.dest, type=flag.parse, default=argparse.SUPPRESS, choices=flag.choices,
            nargs="?" if switch else None, const=True if switch else None, help=help_text,
            metavar=None if flag.choices else "{true,false}" if switch else flag.field.split("_")[-1].upper(),
        )


# The --help group of each config class's flags (both trainers' configs use these class names).
GROUP_TITLES = {
    "TrainConfig": "run (overrides the preset)",
    "ModelConfig": "model (overrides the preset)",
    "OptimConfig": "optimizer and schedules (overrides the preset)",
    "ModelLineage": "lineage switches: model (docs/spec/LINEAGE.md section 7)",
    "OptimLineage": "lineage switches: optimizer and LR schedule",
    "TrainLineage": "lineage switches: window schedule and data",
}


def add_config_groups(parser: argparse.ArgumentParser, flags: Sequence[ConfigFlag]) -> None:
    """`flags` into --help groups by the config class that declares them (GROUP_TITLES)."""
    for owner in dict.fromkeys(flag.owner for flag in flags):
        group = parser.add_argument_group(GROUP_TITLES.get(owner, owner))
        add_config_flags(group, [flag for flag in flags if flag.owner == owner])


def overrides(args: argparse.Namespace, sections: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{section: {field: value}} of the config flags given on the command line (a flag left out
    has no attribute: add_config_flags)."""
    given: dict[str, dict[str, Any]] = {section: {} for section in sections}
    for dest, value in vars(args).items():
        section, _, name = dest.partition(".")
        if name and section in given:
            given[section][name] = value
    return given


def surface(parser: argparse.ArgumentParser) -> dict[str, Mapping[str, Any]]:
    """{flag: {dest, type, choices, nargs, default}} of every option of `parser`: what a user can
    type, for comparing two trainers' command lines."""
    rows: dict[str, Mapping[str, Any]] = {}
    for action in parser._actions:  # argparse keeps no public list of its actions
        for option in action.option_strings:
            if option in ("-h", "--help"):
                continue
            rows[option] = {"dest": action.dest, "choices": tuple(action.choices) if action.choices else None,
                            "nargs": action.nargs, "takes_value": action.nargs != 0}
    return rows
