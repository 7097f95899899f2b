from setuptools import find_packages, setup

PACKAGE = "asap_testing"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=[],
    zip_safe=True,
    description="Test support shared by the asap packages' tests (DDS isolation, processes, ROS-free check).",
    license="BSD-3-Clause",
)
