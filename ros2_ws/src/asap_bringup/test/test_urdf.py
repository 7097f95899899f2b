"""The shipped G1 URDF: joints equal the asap_core table, kinematics equal the MuJoCo model."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from asap_core import g1

URDF = Path(__file__).resolve().parents[1] / "urdf" / "g1.urdf"
mujoco = pytest.importorskip("mujoco")
make_urdf = pytest.importorskip("asap_bringup.make_urdf")


def _joints() -> dict[str, ET.Element]:
    return {j.get("name"): j for j in ET.parse(URDF).getroot().iter("joint")}


def test_joint_names_and_limits_equal_the_table() -> None:
    joints = _joints()
    assert set(joints) == set(g1.MOTOR_ORDER)
    for name, j in joints.items():
        limit, spec = j.find("limit"), g1.JOINT_BY_NAME[name]
        assert float(limit.get("lower")) == pytest.approx(spec.lower)
        assert float(limit.get("upper")) == pytest.approx(spec.upper)
        assert float(limit.get("effort")) == spec.effort_limit


def _urdf_fk(q: dict[str, float]) -> dict[str, np.ndarray]:
    """Link origins in the pelvis frame, by chaining the URDF joints (independent of MuJoCo)."""
    joints = _joints()
    by_child = {j.find("child").get("link"): j for j in joints.values()}
    cache: dict[str, tuple[np.ndarray, Rotation]] = {"pelvis": (np.zeros(3), Rotation.identity())}

    def pose(link: str) -> tuple[np.ndarray, Rotation]:
        if link not in cache:
            j = by_child[link]
            p_pos, p_rot = pose(j.find("parent").get("link"))
            o = j.find("origin")
            xyz = np.array(o.get("xyz").split(), float)
            rpy = Rotation.from_euler("xyz", np.array(o.get("rpy").split(), float))
            axis = np.array(j.find("axis").get("xyz").split(), float)
            rot = p_rot * rpy * Rotation.from_rotvec(axis * q[j.get("name")])
            cache[link] = (p_pos + p_rot.apply(xyz), rot)
        return cache[link]

    return {link: pose(link)[0] for link in [*by_child, "pelvis"]}


def test_forward_kinematics_match_mujoco() -> None:
    mjcf = make_urdf.default_mjcf()
    if not mjcf.is_file():
        pytest.skip("G1 MJCF not installed: run `make setup`")
    model = mujoco.MjModel.from_xml_path(str(mjcf))
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    q = {n: float(rng.uniform(0.3 * j.lower, 0.3 * j.upper)) for n, j in g1.JOINT_BY_NAME.items()}
    data.qpos[:7] = [0, 0, 0, 1, 0, 0, 0]  # pelvis at the origin, upright
    for name, value in q.items():
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
    mujoco.mj_kinematics(model, data)
    fk = _urdf_fk(q)
    for link, pos in fk.items():
        np.testing.assert_allclose(pos, data.xpos[model.body(link).id], atol=1e-4, err_msg=link)


def test_committed_urdf_is_current() -> None:
    mjcf = make_urdf.default_mjcf()
    if not mjcf.is_file():
        pytest.skip("G1 MJCF not installed: run `make setup`")
    fresh = make_urdf.build_urdf(mujoco.MjModel.from_xml_path(str(mjcf)))
    assert fresh == URDF.read_text(), "run `python -m asap_bringup.make_urdf` and commit the result"
