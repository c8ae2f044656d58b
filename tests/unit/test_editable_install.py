"""An editable install exposes only ``dynaunique``, and mypy still sees its types (issue 40).

pyproject.toml maps the package to ``.editable/``, a folder holding only a link to
``dynaunique/``, so ``pip install -e .`` writes a ``.pth`` path entry to that folder: the clone's
``tests``, ``examples``, ``benchmarks`` and ``conftest`` are not importable from elsewhere, and a
path entry (unlike setuptools' import hook) is something mypy and pyright follow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import dynaunique

ROOT = Path(__file__).resolve().parents[2]
#: The clone's other top-level names, importable when the clone's root was the path entry.
OTHERS = ("tests", "examples", "benchmarks", "conftest", "conformance", "deploy", "docs")


def _editable_entries() -> list[str]:
    """The path entries of this environment's editable install of dynaunique (none: a wheel)."""
    site = Path(sysconfig.get_paths()["purelib"])
    return [line.strip() for pth in site.glob("__editable__*dynaunique*.pth")
            for line in pth.read_text(encoding="utf-8").splitlines() if line.strip()]


editable = pytest.mark.skipif(
    not _editable_entries(), reason="dynaunique is not installed editable in this environment")


def test_the_editable_folder_holds_only_a_link_to_the_package() -> None:
    folder = ROOT / ".editable"
    # (the build leaves its metadata there, dynaunique.egg-info: ignored by git, not a module)
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".egg-info")) == [
        "dynaunique"]
    assert (folder / "dynaunique").is_symlink()
    assert (folder / "dynaunique").resolve() == ROOT / "dynaunique"


@editable
def test_the_install_s_path_entry_is_the_editable_folder() -> None:
    assert [Path(e).resolve() for e in _editable_entries()] == [(ROOT / ".editable").resolve()], (
        "an editable install made before pyproject named .editable/: run `pip install -e .` again")


@editable
def test_from_another_directory_only_dynaunique_is_importable(tmp_path: Path) -> None:
    # -I: no PYTHONPATH, no user site, not the current directory; site-packages' .pth files
    # still apply, which is what is under test.
    probe = ("import importlib.util as u; "
             f"print([m for m in {(*OTHERS, 'dynaunique')!r} if u.find_spec(m) is not None])")
    found = subprocess.run([sys.executable, "-I", "-c", probe], cwd=tmp_path, text=True,
                           capture_output=True, check=True).stdout.strip()
    assert found == "['dynaunique']", "an editable install made before pyproject named " \
        ".editable/? run `pip install -e .` again"


@editable
@pytest.mark.external  # runs mypy (seconds of CPU)
def test_mypy_in_a_scratch_project_sees_dynaunique_s_types(tmp_path: Path) -> None:
    from mypy import api as mypy_api

    (tmp_path / "app.py").write_text(textwrap.dedent('''\
        from dynaunique import Model
        from dynaunique.attributes import UnicodeAttribute


        class Account(Model):
            class Meta:
                table_name = "accounts"

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)


        reveal_type(Account.get_by_unique("email", "a@x.io"))
        count: int = Account(pk="1", email="a@x.io").email
        '''), encoding="utf-8")
    old_cwd, old_path = os.getcwd(), os.environ.pop("MYPYPATH", None)
    os.chdir(tmp_path)
    try:  # found through the environment's .pth alone: no MYPYPATH, no config file
        stdout, stderr, _ = mypy_api.run(["--config-file=", "--no-incremental",
                                          "--python-executable", sys.executable, "app.py"])
    finally:
        os.chdir(old_cwd)
        if old_path is not None:
            os.environ["MYPYPATH"] = old_path
    assert 'Revealed type is "app.Account"' in stdout, stdout + stderr
    assert 'Incompatible types in assignment (expression has type "str", variable has type ' \
           '"int")' in stdout
    assert Path(dynaunique.__file__).resolve().is_relative_to(ROOT)
