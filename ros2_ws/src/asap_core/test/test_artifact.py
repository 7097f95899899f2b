"""Policy artifact: write/load round trip with real tiny ONNX policies, and every refusal path."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from asap_core import artifact as art
from asap_core.artifact import (
    ContractMismatchError,
    ContractVersionError,
    CorruptArtifactError,
    Motion,
    Provenance,
    asap_g1_metadata,
    load_artifact,
)
from asap_core.inference import OnnxPolicy
from asap_core.observation import ObservationSpec, ObsTerm
from asap_core.testing import policies

MOTION = Motion(name="test_motion", length_s=2.0)
AMPLITUDE = 0.2


@pytest.fixture(scope="module")
def asap_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    meta = asap_g1_metadata(motion=MOTION, provenance=Provenance(training_run="run-7"))
    path = tmp_path_factory.mktemp("art") / "policy.onnx"
    return path, art.write_artifact(path, policies.sine(23, AMPLITUDE), meta)


def test_round_trip_metadata_hash_and_inference(asap_file: tuple) -> None:
    path, sha = asap_file
    loaded = load_artifact(path)
    assert loaded.sha256 == sha == art.sha256_of(path.read_bytes())
    m = loaded.metadata
    assert m == asap_g1_metadata(motion=MOTION, provenance=Provenance(training_run="run-7"))
    assert m.observation.dim == 380 and m.num_joints == 23 and m.control_dt == 0.02
    assert m.joint_names[12] == "waist_yaw_joint" and m.kp[12] == 400.0 and m.kd[4] == 0.2
    obs = np.random.default_rng(0).normal(size=380).astype(np.float32)
    expected = np.full(23, AMPLITUDE * np.sin(2 * np.pi * obs[-1]))  # the graph's closed form
    np.testing.assert_allclose(OnnxPolicy(loaded)(obs), expected, rtol=1e-5, atol=1e-6)


def test_metadata_is_plain_json_under_one_key(asap_file: tuple) -> None:
    model = onnx.load(str(asap_file[0]))
    props = {p.key: p.value for p in model.metadata_props}
    data = json.loads(props[art.METADATA_KEY])
    assert data["contract_version"] == art.CONTRACT_VERSION
    assert data["observation"]["terms"][0] == {"name": "actions", "dim": 23, "scale": 1.0, "history": 0}
    assert data["motion"] == {"name": "test_motion", "length_s": 2.0}


@pytest.mark.parametrize(
    ("edit", "error", "words"),
    [
        (lambda d: d.update(contract_version=99), ContractVersionError, ["contract_version", "99"]),
        (lambda d: d["joint_names"].__setitem__(3, "left_knee"), ContractMismatchError,
         ["joint_names", "left_knee"]),
        (lambda d: d["joint_names"].__setitem__(3, "left_hip_yaw_joint"), ContractMismatchError,
         ["duplicates", "left_hip_yaw_joint"]),
        (lambda d: d["kp"].pop(), ContractMismatchError, ["kp", "expected 23"]),
        (lambda d: d["kp"].__setitem__(0, 0.0), ContractMismatchError, ["kp", "left_hip_pitch_joint"]),
        (lambda d: d["kd"].__setitem__(2, float("nan")), ContractMismatchError, ["kd[2]", "finite", "nan"]),
        (lambda d: d["default_joint_pos"].__setitem__(3, -1.0), ContractMismatchError,
         ["default_joint_pos", "left_knee_joint"]),
        (lambda d: d.update(control_dt=0), ContractMismatchError, ["control_dt"]),
        (lambda d: d["observation"]["terms"][1].update(dim=4), ContractMismatchError,
         ["observation.terms[1]", "expected 3"]),
        (lambda d: d["observation"]["terms"][0].update(name="lin_vel"), ContractMismatchError,
         ["lin_vel", "known"]),
        (lambda d: d.update(colour="red"), ContractMismatchError, ["unknown keys", "colour"]),
        (lambda d: d.pop("motion"), ContractMismatchError, ["missing", "motion"]),
        (lambda d: d.update(onnx_input="obs"), ContractMismatchError, ["onnx_input", "actor_obs"]),
    ],
)
def test_bad_metadata_is_refused_naming_the_field(asap_file: tuple, tmp_path: Path, edit, error,
                                                  words: list[str]) -> None:
    bad = policies.with_metadata(asap_file[0], tmp_path / "bad.onnx", edit)
    with pytest.raises(error) as info:
        load_artifact(bad)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_observation_dim_must_match_the_graph(asap_file: tuple, tmp_path: Path) -> None:
    """Metadata that is self-consistent but describes a 96-dim observation for a 380-input graph."""
    small = ObservationSpec(terms=(*(ObsTerm(name="dof_pos", dim=23),) * 4,
                                   ObsTerm(name="base_ang_vel", dim=3),
                                   ObsTerm(name="ref_motion_phase", dim=1)))
    meta = asap_g1_metadata(motion=MOTION, observation=small)
    with pytest.raises(ContractMismatchError,
                       match=r"onnx_input.*'batch', 380\].*\[batch, 96\].*observation.dim"):
        art.write_artifact(tmp_path / "p.onnx", asap_file[0].read_bytes(), meta)
    assert not (tmp_path / "p.onnx").exists()


def test_action_dim_must_match_the_graph(tmp_path: Path) -> None:
    meta = asap_g1_metadata(motion=MOTION)
    with pytest.raises(ContractMismatchError, match=r"onnx_output.*\[batch, 23\].*joints"):
        art.write_artifact(tmp_path / "p.onnx", policies.mlp(380, 29, hidden=(32,)), meta)


@pytest.mark.parametrize("payload", [b"", b"not an onnx file at all", bytes(range(256)) * 4])
def test_corrupt_files_are_refused(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(payload)
    with pytest.raises(CorruptArtifactError, match="file: not an ONNX model"):
        load_artifact(path)


def test_truncated_artifact_is_refused(asap_file: tuple, tmp_path: Path) -> None:
    data = asap_file[0].read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptArtifactError):
        load_artifact(tmp_path / "cut.onnx")


def test_missing_file_and_missing_metadata(asap_file: tuple, tmp_path: Path) -> None:
    with pytest.raises(CorruptArtifactError, match="cannot read"):
        load_artifact(tmp_path / "nope.onnx")
    model = onnx.load(str(asap_file[0]))
    del model.metadata_props[:]
    (tmp_path / "bare.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(CorruptArtifactError, match="no 'asap_policy' metadata"):
        load_artifact(tmp_path / "bare.onnx")


def test_writer_keeps_foreign_metadata_and_replaces_its_own(asap_file: tuple, tmp_path: Path) -> None:
    model = onnx.load(str(asap_file[0]))
    entry = model.metadata_props.add()
    entry.key, entry.value = "exporter", "mjlab"
    meta = dataclasses.replace(load_artifact(asap_file[0]).metadata, name="renamed")
    art.write_artifact(tmp_path / "re.onnx", model.SerializeToString(), meta)
    props = {p.key: p.value for p in onnx.load(str(tmp_path / "re.onnx")).metadata_props}
    assert props["exporter"] == "mjlab"
    assert load_artifact(tmp_path / "re.onnx").metadata.name == "renamed"


def test_29_dof_isaaclab_order_policy_is_accepted(tmp_path: Path) -> None:
    from asap_core import g1

    joints = g1.names("isaaclab")
    kp, kd = g1.gains(joints, "beyondmimic")
    spec = ObservationSpec(terms=(ObsTerm(name="dof_pos", dim=29),
                                  ObsTerm(name="dof_vel", dim=29, scale=0.05),
                                  ObsTerm(name="projected_gravity", dim=3, history=2)))
    meta = asap_g1_metadata(motion=MOTION, joint_names=joints,
                            default_joint_pos=tuple(g1.default_pose(joints, "beyondmimic")),
                            kp=tuple(kp), kd=tuple(kd), action_scale=tuple(0.25 * g1.joint_array(
                                "effort_limit", joints) / kp), observation=spec,
                            onnx_input="obs", onnx_output="actions")
    graph = policies.mlp(64, 29, hidden=(32,), io_names=("obs", "actions"))
    art.write_artifact(tmp_path / "bm.onnx", graph, meta)
    assert load_artifact(tmp_path / "bm.onnx").metadata.joint_names == joints
