"""Tasks are found, not listed, and a wrong declaration names its task and field.

Sources: the modules of kernels/, a folder named by --tasks-dir or the tasks_dir
setting (KERNELKB_TASKS_DIR), and the kernelkb.tasks entry points of an installed
distribution (a real dist-info folder on sys.path). No sandbox here (fast); the sandboxed
checks and a CPU optimize run of the same user task are in test_user_task.py.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest
from user_task_sample import isolated_registry, write_task

from kernelkb.cli import main as cli
from kernelkb.kernels import discovery
from kernelkb.kernels.base import Knob, Task
from kernelkb.kernels.discovery import TASKS, all_tasks, get_task, related_ops_of
from kernelkb.kernels.validation import TaskDefinitionError

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


@pytest.fixture(autouse=True)
def _registry():
    with isolated_registry():
        yield


def test_a_knob_filed_under_baseline_is_refused() -> None:
    """"baseline" is a store category (the starting kernel itself), never a knob's."""
    softmax = get_task("softmax")
    knobs = (dataclasses.replace(softmax.knobs[0], category="baseline"), *softmax.knobs[1:])
    with pytest.raises(TaskDefinitionError) as err:
        dataclasses.replace(softmax, knobs=knobs)
    text = str(err.value)
    assert f"({softmax.knobs[0].name}).category: 'baseline' is not an edit category" in text
    assert "tiling" in text and ", baseline" not in text


def test_every_task_module_of_the_package_is_found_with_its_template_file() -> None:
    modules = {p.stem for p in KERNELS.glob("*.py")
               if "\nTASK = " in p.read_text()}
    tasks = all_tasks()
    assert {discovery.origin_of(n).module for n in tasks} >= \
        {f"kernelkb.kernels.{m}" for m in modules}
    for task in tasks.values():
        path = Path(task.template_path)
        assert path.parent == KERNELS / "templates" and path.read_text() == task.template


def test_a_folder_named_by_tasks_dir_is_discovered(tmp_path: Path, capsys) -> None:
    write_task(tmp_path / "mine")
    assert "add_rmsnorm" not in TASKS
    assert cli.main(["tasks", "--tasks-dir", str(tmp_path / "mine")]) == 0
    listed = capsys.readouterr().out
    assert "add_rmsnorm (op add_rmsnorm): 8 points" in listed
    assert f"from folder {tmp_path / 'mine' / 'add_rmsnorm.py'}" in listed
    task = get_task("add_rmsnorm")
    assert task.template_path == str(tmp_path / "mine" / "templates" / "add_rmsnorm.py")
    assert related_ops_of("add_rmsnorm") == ("rmsnorm",)


def test_a_folder_named_by_the_setting_is_discovered(tmp_path: Path, monkeypatch,
                                                      capsys) -> None:
    write_task(tmp_path / "a", one_file=True)
    write_task(tmp_path / "b", name="add_rmsnorm_b")
    monkeypatch.setenv("KERNELKB_TASKS_DIR", f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    assert cli.main(["tasks", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"name": "add_rmsnorm"' in out and '"name": "add_rmsnorm_b"' in out
    assert get_task("add_rmsnorm").template_path is None  # the one-file form: inline


def test_a_tasks_dir_that_is_not_a_folder_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert cli.main(["tasks", "--tasks-dir", str(tmp_path / "nope")]) == 2
    assert f"tasks folder {tmp_path / 'nope'} is not a folder" in capsys.readouterr().err


def test_an_entry_point_of_an_installed_distribution_is_discovered(tmp_path: Path,
                                                                    monkeypatch) -> None:
    site = tmp_path / "site"
    write_task(site / "kkb_demo_tasks", name="add_rmsnorm_ep")
    (site / "kkb_demo_tasks" / "__init__.py").write_text(
        "from kkb_demo_tasks.add_rmsnorm_ep import TASK\n")
    info = site / "kkb_demo_tasks-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kkb-demo-tasks\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text("[kernelkb.tasks]\ndemo = kkb_demo_tasks\n")
    monkeypatch.syspath_prepend(str(site))
    assert "add_rmsnorm_ep" in all_tasks()
    origin = discovery.origin_of("add_rmsnorm_ep")
    assert origin.kind == "entry_point" and origin.root == str(site)
    assert origin.request() == {"module": "kkb_demo_tasks", "root": str(site)}
    assert get_task("add_rmsnorm_ep").template_path == str(
        site / "kkb_demo_tasks" / "templates" / "add_rmsnorm_ep.py")


def test_a_module_level_task_registers_without_register(tmp_path: Path) -> None:
    path = write_task(tmp_path)
    assert "register(" not in path.read_text()
    discovery.add_tasks_dirs([tmp_path])
    assert get_task("add_rmsnorm").name == "add_rmsnorm"


def test_a_name_taken_by_another_task_names_both_files(tmp_path: Path) -> None:
    write_task(tmp_path, name="softmax")
    discovery.add_tasks_dirs([tmp_path])
    with pytest.raises(TaskDefinitionError) as err:
        all_tasks()
    text = str(err.value)
    assert text.startswith("task softmax: field name: taken: builtin ")
    assert str(KERNELS / "softmax.py") in text and str(tmp_path / "softmax.py") in text


BAD = [
    ('"warps_stages"),\n           Knob("ROWS', '"warp_stages"),\n           Knob("ROWS',
     "knobs[0] (NUM_WARPS).category", "'warp_stages' is not an edit category",
     "did you mean 'warps_stages'?"),
    ('Knob("ROWS_PER_PROGRAM"', 'Knob("rows_per_program"',
     "knobs[1].name", "'rows_per_program' is not a header constant name", ""),
    ('Knob("ROWS_PER_PROGRAM"', 'Knob("ROWS_PER_PROG"',
     "knobs[1] (ROWS_PER_PROG)", "the template has no header line 'ROWS_PER_PROG = <literal>'",
     "did you mean 'ROWS_PER_PROGRAM'?"),
    ("    reference=reference,\n", "", "reference", "missing", ""),
    ('related_ops=("rmsnorm",)', 'related_ops=("rmsnorm")',
     "related_ops", "must be a tuple of op names", "a 1-tuple needs a comma"),
    ('dtypes=("float16", "float32")', 'dtypes=("float16", "fp32")',
     "dtypes", "'fp32' is not one of", ""),
    ("(1, 2, 4, 8)", "(1, 2, 8)", "knobs[0] (NUM_WARPS).values",
     "the template's own value 4 is not among (1, 2, 8)", ""),
    ("    cpu_shapes=((8, 512),),\n", "    cpu_shapes=((8, 512),),\n    wide_shape=(4096,),\n",
     "wide_shape", "shape (4096,) is not 2 integers >= 0", ""),
]


@pytest.mark.parametrize(("old", "new", "field", "problem", "hint"), BAD,
                         ids=["category", "knob_name", "knob_not_in_header", "no_reference",
                              "related_ops_str", "dtype", "default_not_a_value",
                              "wide_shape_length"])
def test_a_bad_registration_names_the_task_and_the_field(tmp_path: Path, old, new, field,
                                                         problem, hint) -> None:
    path = write_task(tmp_path, replace={old: new})
    discovery.add_tasks_dirs([tmp_path])
    with pytest.raises(TaskDefinitionError) as err:
        get_task("add_rmsnorm")
    text = str(err.value)
    assert text.startswith(f"task add_rmsnorm: field {field}: {problem}"), text
    assert hint in text and f"[in {path}]" in text
    assert "add_rmsnorm" not in TASKS  # nothing half-registered


def test_a_task_file_that_fails_to_import_names_the_file(tmp_path: Path) -> None:
    path = write_task(tmp_path, replace={"import torch\n": "import torch\nimport no_such_pkg\n"})
    discovery.add_tasks_dirs([tmp_path])
    with pytest.raises(TaskDefinitionError, match=f"field module: {path} failed to import: "
                                                  "ModuleNotFoundError"):
        all_tasks()


def test_validation_covers_the_template_and_the_constraint() -> None:
    softmax = get_task("softmax")

    def built(**changes):
        with pytest.raises(TaskDefinitionError) as err:
            dataclasses.replace(softmax, **changes)
        return str(err.value)

    assert built(template="def run(:\n").startswith(
        "task softmax: field template: the template is not valid Python (line 1")
    assert "defines no top-level run(...)" in built(template="BLOCK_SIZE = 0\n")
    assert built(constraint=lambda cfg: "never").startswith(
        "task softmax: field constraint: rejects the naive kernel's own configuration")
    assert "raised KeyError" in built(constraint=lambda cfg: cfg["NOPE"])
    assert built(knobs=(*softmax.knobs, Knob("NUM_WARPS", (4,), "tiling"))).startswith(
        "task softmax: field knobs[4] (NUM_WARPS): declared twice")
    assert built(peers=[1]).startswith("task softmax: field peers: must be a function or None")
    assert built(regimes="short").startswith("task softmax: field regimes:")


def test_a_task_built_without_its_required_fields_lists_them() -> None:
    with pytest.raises(TaskDefinitionError) as err:
        Task(name="half", op_type="half")
    assert str(err.value).startswith("task half: field description: missing (also signature, "
                                     "reference, make_inputs")


def test_unknown_task_lists_the_known_ones_and_the_closest() -> None:
    with pytest.raises(KeyError) as err:
        get_task("sofmax")
    assert "unknown task 'sofmax'; did you mean 'softmax'? known: attention, " in str(err.value)


def test_the_sandbox_worker_loads_a_folder_task_from_its_origin(tmp_path: Path) -> None:
    """What the worker gets in its request is enough to load the task in a fresh process
    (here: a fresh registry) from the file alone."""
    write_task(tmp_path)
    discovery.add_tasks_dirs([tmp_path])
    request = discovery.origin_request(get_task("add_rmsnorm").name)
    assert request == {"file": str(tmp_path / "add_rmsnorm.py")}
    TASKS.pop("add_rmsnorm")
    discovery._LOADED.discard(request["file"])
    sys.modules.pop(discovery._private_name(request["file"]), None)
    discovery.load_origin(request)
    assert TASKS["add_rmsnorm"].related_ops == ("rmsnorm",)


@pytest.mark.parametrize("argv", [["optimize", "add_rmsnorm"], ["revalidate", "--task", "x"],
                                  ["query", "--op", "add_rmsnorm"], ["tasks"]])
def test_every_command_that_takes_a_task_takes_tasks_dir(argv) -> None:
    args = cli.build_parser().parse_args([*argv, "--tasks-dir", "a", "--tasks-dir", "b"])
    assert args.tasks_dir == ["a", "b"]
