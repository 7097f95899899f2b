"""PPO across processes as on several GPUs, with CPU processes (gloo): ``torchrun`` starts two trainers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

DRIVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import torch

    from asap_training.envs.config import DomainRandCfg, TrackingEnvCfg
    from asap_training.rl.config import PpoCfg
    from asap_training.rl.train import distributed_rank, train

    out = Path(sys.argv[1])
    torch.set_num_threads(1)
    no_dr = DomainRandCfg.off()
    env_cfg = TrackingEnvCfg(num_envs=4, threads=1, domain_rand=no_dr, seed=7)
    ppo = PpoCfg(max_iterations=2, num_steps_per_env=8, hidden_dims=(32, 32), save_interval=100)
    runner = train(env_cfg, ppo, out / "run", progress=False)
    env = runner.tracking_env
    torch.save(
        {
            "world_size": runner.gpu_world_size if runner.is_distributed else 1,
            "actor": runner.alg.actor.state_dict(),
            "critic": runner.alg.critic.state_dict(),
            "env_seed": env.cfg.seed,
            "joint_pos": env.state.joint_pos.clone(),
        },
        out / f"rank{distributed_rank()[0]}.pt",
    )
    """
)


@pytest.mark.slow
def test_two_processes_train_one_policy_on_their_own_envs(tmp_path: Path) -> None:
    """2 PPO iterations under ``torchrun --nproc_per_node 2`` (gloo): identical networks (parameters and
    normalizer statistics) on both ranks, each rank stepped its own envs (seeded apart), rank 0 alone
    wrote the run directory."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(driver), str(tmp_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    for net in ("actor", "critic"):
        for key, value in ranks[0][net].items():
            torch.testing.assert_close(value, ranks[1][net][key], rtol=0, atol=0, msg=f"{net}.{key}")
    assert [r["env_seed"] for r in ranks] == [7, 8]
    assert not torch.equal(ranks[0]["joint_pos"], ranks[1]["joint_pos"])
    run = tmp_path / "run"
    assert (run / "params" / "env.yaml").is_file()
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_0.pt", "model_1.pt"]
    assert len((run / "progress.jsonl").read_text().splitlines()) == 2  # one line per iteration: rank 0
