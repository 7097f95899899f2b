"""Command line of ``asap-train`` (:mod:`asap_training.rl.train`): stage 1, PPO on the tracking env."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import yaml

from asap_core.config_options import ConfigParser
from asap_training.cli.common import add_quiet, add_run_dir, add_threads, parse
from asap_training.envs.config import DomainRandCfg, TrackingEnvCfg
from asap_training.parallel import default_threads
from asap_training.rl import train as library
from asap_training.rl.config import PpoCfg
from asap_training.rl.export import export_runner
from asap_training.rl.train import read_params, train
from asap_training.sim import SIMULATORS

DEFAULT_SIM = next(name for name, path in SIMULATORS.items() if path == TrackingEnvCfg().simulator)
OVERRIDES = ("Options override the configs: --env-config / --ppo-config, or a resumed run's saved ones, "
             "else the defaults shown.")


def parser() -> ConfigParser:
    """The options of ``asap-train``."""
    p = ConfigParser("asap-train", f"{library.__doc__}\n{OVERRIDES}")
    add_run_dir(p, "output/resume directory (outside git)")
    p.field(TrackingEnvCfg, "motions", "--motion", repeatable=True)
    p.field(PpoCfg, "max_iterations", "--iterations")
    p.field(TrackingEnvCfg, "num_envs")
    p.field(TrackingEnvCfg, "profile")
    p.add_argument("--no-dr", action="store_true", help="disable domain randomization (Table VI)")
    p.field(TrackingEnvCfg, "seed")
    p.add_argument("--env-config", type=Path, help="YAML of TrackingEnvCfg fields (as params/env.yaml)")
    p.add_argument("--ppo-config", type=Path, help="YAML of PpoCfg fields (as params/ppo.yaml)")
    p.add_argument("--resume", action="store_true",
                   help="continue from the latest checkpoint of --run-dir with its saved configs")
    p.add_argument("--sim", choices=sorted(SIMULATORS),
                   help=f"simulator backend (default {DEFAULT_SIM}: {SIMULATORS[DEFAULT_SIM]})")
    p.add_argument("--device", default="cpu",
                   help="torch device of the networks and PPO: cpu or cuda (under torchrun: cuda:<local "
                   "rank>); with --sim mujoco_warp also where physics and the MDP run (default cpu)")
    add_threads(p, quiet=False)
    p.add_argument("--no-export", action="store_true", help="do not write <run>/policy.onnx at the end")
    add_quiet(p)
    return p


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``asap-train``."""
    p = parser()
    args = parse(p, argv)
    if args.resume and (args.run_dir / "params").is_dir():
        env_cfg, ppo_cfg = read_params(args.run_dir)
    else:
        env_cfg = TrackingEnvCfg.from_dict(_yaml(args.env_config)) if args.env_config else TrackingEnvCfg()
        ppo_cfg = PpoCfg.from_dict(_yaml(args.ppo_config)) if args.ppo_config else PpoCfg()
    env_cfg = p.config(args, TrackingEnvCfg, env_cfg)
    ppo_cfg = p.config(args, PpoCfg, ppo_cfg)
    if args.no_dr:
        env_cfg.domain_rand = DomainRandCfg.off()
    if args.sim:
        env_cfg.simulator = SIMULATORS[args.sim]
        env_cfg.device = args.device if args.sim == "mujoco_warp" else "cpu"  # physics where it runs
    env_cfg = dataclasses.replace(env_cfg, threads=default_threads())
    runner = train(env_cfg, ppo_cfg, args.run_dir, resume=args.resume, progress=not args.quiet,
                   device=args.device)
    if not args.no_export and runner.is_main_process:
        sha = export_runner(runner, args.run_dir / "policy.onnx", run_name=str(args.run_dir))
        print(f"exported {args.run_dir / 'policy.onnx'} (sha256 {sha[:12]})")


if __name__ == "__main__":  # torchrun -m asap_training.cli.train
    main()
