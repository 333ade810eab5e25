"""README's settings table ("Configuration") against the settings classes:
every variable a service reads is in it, every variable it names is read by
something, and a row's stated number is the setting's default (a setting a
newcomer cannot find, or a default the table misstates, is silently wrong)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic_settings import BaseSettings

from recallatron.settings import CommonSettings
from services.embed.settings import EmbedSettings
from services.gateway.settings import GatewaySettings
from services.rank.settings import RankSettings
from services.store.settings import StoreSettings

ROOT = Path(__file__).resolve().parents[2]
SERVICES: tuple[type[BaseSettings], ...] = (
    CommonSettings,
    EmbedSettings,
    GatewaySettings,
    RankSettings,
    StoreSettings,
)
# Where a variable the table names but no settings class holds must be read.
SOURCES = ("recallatron", "recallatron_cli", "recallatron_devkit", "services")


def env_names(settings: type[BaseSettings]) -> dict[str, object]:
    """Variable -> default, as pydantic-settings reads the class."""
    prefix = str(settings.model_config.get("env_prefix", ""))
    return {(prefix + name).upper(): field.default for name, field in settings.model_fields.items()}


def every_setting() -> dict[str, set[str]]:
    """Variable -> the defaults the services give it (as text)."""
    out: dict[str, set[str]] = {}
    for settings in SERVICES:
        for name, default in env_names(settings).items():
            out.setdefault(name, set()).add(repr(default))
    return out


def table_rows() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Configuration") : readme.index("## Deploy")]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row] for row in rows]


def row_names(first: str) -> list[str]:
    """The variables of a row's first cell: `A_{X,Y}_B` is two, and `_SUFFIX`
    after a full name replaces some tail of it (`..._PER_SECOND`, `_BURST`)."""
    names: list[str] = []
    for token in re.findall(r"`([A-Z_{},]+)`", first):
        braces = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", token)
        if braces:
            names += [braces[1] + part + braces[3] for part in braces[2].split(",")]
        elif token.startswith("_") and names:
            stem = names[0]
            names += [stem[:i] + token for i, c in enumerate(stem) if c == "_"]
        else:
            names.append(token)
    return names


def test_every_setting_a_service_reads_is_in_the_table() -> None:
    listed: set[str] = set()
    for row in table_rows():
        listed.update(row_names(row[0]))
        listed.update(re.findall(r"`(RECALLATRON_[A-Z_]+)`", " ".join(row)))
    missing = sorted(set(every_setting()) - listed)
    assert missing == [], f"README's settings table lacks {missing}"


def test_every_variable_in_the_table_is_read() -> None:
    settings = every_setting()
    code = "\n".join(
        path.read_text() for folder in SOURCES for path in (ROOT / folder).rglob("*.py")
    )

    # Names made in the code: f"RECALLATRON_{name.upper()}_PORT".
    made = [
        re.sub(r"\\\{[^}]*\\\}", "[A-Z]+", re.escape(template))
        for template in re.findall(r'f"(RECALLATRON_[A-Z_]*\{[^}]+\}[A-Z_]*)"', code)
    ]

    def read(name: str) -> bool:
        return (
            name in settings
            or f'"{name}"' in code
            or any(re.fullmatch(pattern, name) for pattern in made)
        )

    unknown = []
    for row in table_rows():
        for token in re.findall(r"`([A-Z_{},]+)`", row[0]):
            if token.startswith("_"):
                # One of the names a suffix may make must be read.
                if not any(read(n) for n in row_names(row[0]) if n.endswith(token)):
                    unknown.append(token)
            else:
                unknown += [n for n in row_names(f"`{token}`") if not read(n)]
    assert unknown == [], f"README names variables nothing reads: {unknown}"


def test_a_rows_numbers_are_the_defaults() -> None:
    settings = every_setting()
    wrong = []
    for row in table_rows():
        names = [n for n in re.findall(r"`([A-Z_]+)`", row[0]) if n in settings]
        values = [v.strip() for v in row[1].split(",")]
        if len(names) != len(values) or len(names) == 0:
            continue
        for name, value in zip(names, values, strict=True):
            if not re.fullmatch(r"\d+(\.\d+)?", value) or len(settings[name]) != 1:
                continue
            default = next(iter(settings[name]))
            if float(value) != float(default):
                wrong.append(f"{name}: README {value}, default {default}")
    assert wrong == []
