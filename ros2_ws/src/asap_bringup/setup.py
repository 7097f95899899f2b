from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "asap_bringup"
HERE = Path(__file__).parent


def tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries that install ``folder`` under share/<package>/, keeping sub-folders."""
    out: dict[str, list[str]] = {}
    for f in sorted((HERE / folder).rglob("*")):
        if f.is_file():
            rel = f.relative_to(HERE)
            out.setdefault(f"share/{PACKAGE}/{rel.parent}", []).append(str(rel))
    return list(out.items())


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *tree("launch"),
        *tree("config"),
        *tree("urdf"),
        *tree("rviz"),
        *tree("foxglove"),
    ],
    install_requires=["pyyaml"],
    zip_safe=True,
    description="asap bringup: profiles, launch files, runner, monitor, operator tools (graph client, "
                "asap-push), RViz/Foxglove layouts.",
    license="BSD-3-Clause",
    entry_points={"console_scripts": ["asap-up = asap_bringup.runner:main",
                                      "asap-dds-check = asap_bringup.dds_check:main",
                                      "asap-push = asap_bringup.push:main",
                                      "monitor = asap_bringup.monitor_node:main"]},
)
