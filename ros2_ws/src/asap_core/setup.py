from setuptools import find_packages, setup

PACKAGE = "asap_core"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["clips/*.npz", "clips/*.json", "clips/LICENSE.asap"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["numpy", "onnx", "onnxruntime"],
    zip_safe=False,  # the shipped clips are read as files (asap_core.motion.CLIP_DIR)
    description="G1 robot contract shared by the asap nodes and training (no rclpy).",
    license="BSD-3-Clause",
)
