"""Everything but the node imports without rclpy or any message package (training relies on it)."""

from __future__ import annotations

from pathlib import Path

from asap_testing.ros_free import ros_imports, run_with_ros_blocked

PKG = Path(__file__).resolve().parents[1] / "asap_logger"
NODE = "recorder_node"


def _modules() -> list[str]:
    return [
        ".".join(p.relative_to(PKG.parent).with_suffix("").parts) for p in PKG.rglob("*.py") if p.stem != NODE
    ]


def test_no_ros_imports_outside_the_node() -> None:
    for path in PKG.rglob("*.py"):
        if path.stem != NODE:
            assert not ros_imports(path), f"{path.name} imports {ros_imports(path)}"


def test_reader_imports_and_works_with_ros_blocked(tmp_path: Path) -> None:
    out = run_with_ros_blocked(
        _modules(),
        then="from asap_logger.reader import open_episode\n"
        "from asap_logger.errors import BagNotFoundError\n"
        f"try:\n    open_episode({str(tmp_path)!r})\nexcept BagNotFoundError:\n    print('ok')\n",
    )
    assert out.strip() == "ok"
