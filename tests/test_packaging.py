"""The product installs as one package, ``kernelkb``, and runs from the wheel alone: the
seeds ship inside it, and nothing at run time reads the checkout.

The slow test builds the wheel from this repository, installs it into a fresh virtual
environment (its dependencies taken from this one's site-packages, so no download) and
asks it for seeded answers from an empty home, outside the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
DATA = ("kernels/templates", "kernels/model_configs", "kernelkb/web/templates",
        "kernelkb/web/static", "optimizer/prompts")  # folders of data files the wheel carries
FOLDERS = {"kb": "kernelkb.kb", "retrieval": "kernelkb.retrieval",
           "optimizer": "kernelkb.optimizer", "kernels": "kernelkb.kernels",
           "seeds": "kernelkb.seeds", "kernelkb": "kernelkb"}


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_in_the_wheel_list() -> None:
    """A package folder (a root folder, or a folder with an __init__.py under one) that
    pyproject's package list lacks would be left out of the wheel (an ImportError only
    after install)."""
    found = set()
    for folder, package in FOLDERS.items():
        found.add(package)  # a root folder: a namespace portion, with no __init__.py
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *rel)))
    found |= {_package_of(folder) for folder in DATA}
    config = _setuptools()
    assert set(config["packages"]) == found
    assert config["package-dir"] == {package: folder for folder, package in FOLDERS.items()}


def _package_of(folder: str) -> str:
    """``kernelkb/web/static`` -> ``kernelkb.web.static``; ``kernels/templates`` ->
    ``kernelkb.kernels.templates``."""
    top, _, rest = folder.partition("/")
    return f"{FOLDERS[top]}.{rest.replace('/', '.')}"


def test_no_root_folder_shadows_a_top_level_name() -> None:
    """With the checkout on sys.path (pytest, ``python -m kernelkb`` there), a root folder
    holding an __init__.py would answer ``import kernels`` (or ``kb``, ``optimizer``, ...)
    before an installed distribution of that name; a namespace portion never does."""
    assert [f for f in FOLDERS if f != "kernelkb" and (ROOT / f / "__init__.py").exists()] == []


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_serves_seeded_answers(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, timeout=600)
    wheel = next(wheels.glob("kernelkb-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                           "'purelib'))"], capture_output=True, text=True, check=True).stdout
    # this environment's dependencies, as a plain path (its .pth files, among them the
    # editable install of the checkout, are not run from there)
    Path(site.strip(), "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, timeout=600)
    home = tmp_path / "home"
    env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "HOME": str(home),
           "KERNELKB_HOME": str(home / "store"), "HF_HUB_OFFLINE": "1",
           "XDG_CACHE_HOME": str(home / "cache")}
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=outside, env=env, capture_output=True,
                              text=True, timeout=900)

    where = run(str(python), "-c", "import kernelkb, kernelkb.kb, kernelkb.seeds, importlib.util; "
                "print(*kernelkb.kb.__path__); print(*kernelkb.seeds.__path__); "
                # a top-level name that finds this package's files (another project's own
                # may be installed: Hugging Face's kernels, with recent transformers)
                "import os; mine = os.path.dirname(kernelkb.__file__); "
                "print([m for m in ('kb', 'kernels', 'retrieval', 'optimizer', 'seeds') "
                "if (s := importlib.util.find_spec(m)) and any(str(p).startswith(mine) "
                "for p in [s.origin, *(s.submodule_search_locations or [])])])")
    assert where.returncode == 0, where.stderr
    kb_folder, seeds_folder, top_level = where.stdout.splitlines()  # one path each
    assert kb_folder.startswith(str(env_dir)) and seeds_folder.startswith(str(env_dir))
    assert top_level == "[]"  # no top-level name another project could own
    installed = Path(kb_folder).parent  # site-packages/kernelkb
    assert list(Path(seeds_folder).glob("*.jsonl"))  # the seeds are package data
    for folder in DATA:  # and the templates, styles and prompts
        assert list((installed / folder.removeprefix("kernelkb/")).iterdir()), folder

    answer = run(str(env_dir / "bin" / "kernelkb"), "query", "--op", "softmax", "--gpu",
                 "h200", "-k", "1")
    assert answer.returncode == 0, answer.stderr[-2000:]
    assert "loaded" in answer.stderr and "shipped experiences" in answer.stderr
    assert "softmax" in answer.stdout and "NVIDIA H200" in answer.stdout

    module = run(str(python), "-m", "kernelkb", "insights", "--op", "softmax", "--gpu", "h200")
    assert module.returncode == 0, module.stderr[-2000:]
    assert "experiences" in module.stdout.splitlines()[0]
    # the seeds came from the installed package, not from the checkout
    assert f"loading seeds from {seeds_folder}" in answer.stderr
    assert os.listdir(home / "store")  # the store lives under the home it was given
