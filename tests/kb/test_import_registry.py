"""The importers are one registry of modules with one interface (kb/importers/registry.py,
importer.py): the CLI offers exactly the registered formats, every format module declares
an ``Importer`` and is registered, and a format added to the registry is read with no
change to the dispatcher."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelkb.cli import main as cli
from kernelkb.kb import importers
from kernelkb.kb.importers import ImportNote, iter_import, registry
from kernelkb.kb.importers.importer import Event, FileHead, Importer, Source
from kernelkb.kb.importers.records import FileContext, Measurement
from kernelkb.kb.record import ExperienceRecord


def _format_choices() -> tuple[str, ...]:
    commands = next(a for a in cli.build_parser()._actions
                    if isinstance(a, argparse._SubParsersAction))
    fmt = next(a for a in commands.choices["import"]._actions if a.dest == "fmt")
    assert fmt.choices is not None
    return tuple(fmt.choices)


def test_the_cli_offers_exactly_the_registered_formats() -> None:
    assert _format_choices() == registry.names()
    assert registry.names()[0] == registry.AUTO
    assert len(set(registry.names())) == len(registry.names())


def test_every_format_module_declares_the_interface_and_is_registered() -> None:
    declared = {}
    for info in pkgutil.iter_modules(importers.__path__):
        module = importlib.import_module(f"{importers.__name__}.{info.name}")
        if hasattr(module, "IMPORTER"):
            declared[info.name] = module.IMPORTER
    assert set(declared) == {"kernel_tuner", "t4", "triton_autotune", "inductor",
                             "autoheuristic"}
    assert set(map(id, declared.values())) == set(map(id, registry.IMPORTERS))
    for importer in registry.IMPORTERS:
        assert isinstance(importer, Importer)
        assert all(callable(f) for f in (importer.matches, importer.head, importer.read))
        assert importer.form in ("json", "text") and importer.tool and importer.agent


@pytest.mark.parametrize("fields, problem", [
    ({"name": "auto"}, "lower-case --format value"),
    ({"name": "T4 "}, "lower-case --format value"),
    ({"form": "xml"}, "form is 'json' or 'text'"),
    ({"form": "text", "recover": lambda text: None}, "only a JSON format recovers"),
])
def test_a_declaration_the_dispatcher_cannot_use_is_refused(fields: dict,
                                                            problem: str) -> None:
    good = {"name": "toy", "tool": "Toy", "agent": "toy", "noun": "a toy file",
            "form": "json", "matches": bool, "head": _toy_head, "read": _toy_read}
    with pytest.raises(ValueError, match=problem):
        Importer(**{**good, **fields})


def _toy_head(source: Source) -> FileHead:
    return FileHead(kernel_name="toy_kernel", problem_size="4096",
                    device=source.data["device_name"])


def _toy_read(source: Source, ctx: FileContext) -> Iterator[Event]:
    for index, (block, ms) in enumerate(source.data["toy"]):
        yield Measurement(position=str(index), iteration=index, config={"BLOCK": block},
                          time=ms)


def test_a_registered_format_is_read_with_no_change_to_the_dispatcher(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toy = Importer(name="toy", tool="Toy tuner", agent="toy_tuner", noun="a toy file",
                   form="json", head=_toy_head, read=_toy_read,
                   matches=lambda source: isinstance(source.data, dict) and "toy" in source.data)
    monkeypatch.setattr(registry, "IMPORTERS", (*registry.IMPORTERS, toy))
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps(
        {"device_name": "NVIDIA H100 80GB HBM3", "toy": [[64, 0.5], [128, 0.25]]}))
    (folder / "LICENSE").write_text("MIT License\n")
    items = dict(iter_import(folder, "toy"))
    records = [i for i in items.values() if isinstance(i, ExperienceRecord)]
    assert [r.edit.config["BLOCK"] for r in records] == [64, 128]
    assert {r.provenance.agent for r in records} == {"toy_tuner"}
    assert records[1].feedback.time_ms == 0.25 and records[1].env.gpu_name.startswith("NVIDIA H100")
    assert "kernelkb import set/run.json --format toy" == records[0].provenance.command
    (only,) = dict(iter_import(folder, "t4")).values()  # and --format picks by its name
    assert isinstance(only, ImportNote) and only.message == \
        "skipped: a toy file, and --format is t4" and only.skip == "other-format"
