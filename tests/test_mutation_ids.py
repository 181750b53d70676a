"""tools/mutation.py names each mutant by where it is, not by its line, so the names last."""

from __future__ import annotations

from pathlib import Path

from module_files import load_file

TOOL = Path(__file__).resolve().parent.parent / "tools" / "mutation.py"


mutation = load_file("mutation_tool", TOOL)

SOURCE = """
def first(x):
    if x:
        return 1
    return 1


class Box:
    def open(self, y):
        self.y = y
        while y > 0:
            y -= 1
        self.y = y
"""


def ids_of(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "module.py"
    path.write_text(source)
    return [mutant_id for mutant_id, _ in mutation.mutants(path)]


def test_an_id_names_the_function_the_kind_the_code_and_its_occurrence(tmp_path: Path) -> None:
    ids = ids_of(tmp_path, SOURCE)
    assert "first:negate:x#0" in ids
    # The same statement twice in one function: numbered in source order.
    assert "Box.open:delete:self.y = y#0" in ids
    assert "Box.open:delete:self.y = y#1" in ids
    assert "Box.open:compare0:y > 0#0" in ids
    assert len(set(ids)) == len(ids)


def test_ids_survive_an_edit_elsewhere_in_the_module(tmp_path: Path) -> None:
    before = ids_of(tmp_path, SOURCE)
    edited = "import os\n\n\ndef added(z):\n    return z + 1\n\n" + SOURCE.replace(
        "def first(x):\n", "def first(x):\n    # a comment that moves every line below\n\n"
    )
    after = ids_of(tmp_path, edited)
    assert set(before) <= set(after)
    assert set(after) - set(before) == {
        "added:delete:return z + 1#0",
        "added:constant:1#0",
    }


def test_every_equivalent_id_belongs_to_a_module_the_tool_mutates() -> None:
    for mutant_id in mutation.EQUIVALENT:
        module, _, rest = mutant_id.partition(":")
        assert module in mutation.MODULES, mutant_id
        assert "#" in rest, mutant_id
