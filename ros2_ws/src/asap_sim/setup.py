from setuptools import find_packages, setup

PACKAGE = "asap_sim"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["profiles/*.yaml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml", "README.md"]),
    ],
    install_requires=["numpy", "mujoco", "pyyaml"],
    zip_safe=False,
    description="Simulated Unitree G1 twin (MuJoCo) on the robot's topics; ROS-free physics for training.",
    license="BSD-3-Clause",
    entry_points={"console_scripts": [f"g1_sim = {PACKAGE}.g1_sim_node:main"]},
)
