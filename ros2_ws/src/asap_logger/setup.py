from setuptools import find_packages, setup

PACKAGE = "asap_logger"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "bench"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["numpy", "pyyaml", "mcap", "rosbags"],
    zip_safe=True,
    description="Episode recorder (raw CDR to rosbag2 MCAP) and ROS-free episode reader.",
    license="BSD-3-Clause",
    entry_points={
        "console_scripts": [
            "recorder = asap_logger.recorder_node:main",
            "asap-bag = asap_logger.cli:main",
        ],
    },
)
