from glob import glob

from setuptools import find_packages, setup

PACKAGE = "asap_policy"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml", "README.md"]),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=["numpy", "pyyaml"],
    zip_safe=True,
    description="The asap policy node (50 Hz ONNX control, safety, operator modes, hot swap).",
    license="BSD-3-Clause",
    entry_points={"console_scripts": ["policy_node = asap_policy.policy_node:main"]},
)
