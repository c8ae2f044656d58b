"""The command docs/performance.md shows is one a reader can run from the repository's root:
nothing of the machine that generated the page (``benchmarks.run.shown_command``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.run import ROOT, shown_command


def test_a_path_inside_the_repository_is_shown_relative_to_its_root() -> None:
    page = str(ROOT / "docs" / "performance.md")
    assert shown_command(["--out", page, "--json", str(ROOT / "results.json")]) == (
        "python -m benchmarks.run --out docs/performance.md --json results.json")


def test_a_path_elsewhere_is_shown_by_its_file_name() -> None:
    assert shown_command(["--out", "/work/wt/bench/docs/performance.md",
                          "--json=/tmp/bench_full.json"]) == (
        "python -m benchmarks.run --out performance.md --json bench_full.json")


def test_a_relative_path_is_read_from_the_working_directory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT / "docs")
    assert shown_command(["--quick", "--out", "performance.md"]) == (
        "python -m benchmarks.run --quick --out docs/performance.md")


def test_the_endpoint_of_the_run_is_left_out() -> None:
    assert shown_command(["--quick", "--endpoint", "http://127.0.0.1:41234", "--peer", "off"]) == (
        "python -m benchmarks.run --quick --peer off")
    assert shown_command(["--endpoint=http://127.0.0.1:41234"]) == "python -m benchmarks.run"


def test_the_page_shows_a_portable_command() -> None:
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    command = page.split("```text\n", 1)[1].split("\n", 1)[0]
    assert command.startswith("python -m benchmarks.run ")
    assert not any(word.startswith("/") for word in command.split()), command
    assert Path(ROOT / command.split("--out ")[1].split()[0]).exists()
