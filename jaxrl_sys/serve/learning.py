"""A learning server's run (`jaxrl-serve --learn`): its directory, the learner, the parameters
it publishes, its metrics and checkpoints.

The run is a host-loop run (`gymnasium:<id>` names the spaces of the application's env), so
its directory is what `jaxrl-evaluate`, `jaxrl-serve RUN_DIR` and `jaxrl-plot` read: run.json,
metrics.jsonl (the clients' episode returns per update), checkpoints of the learner's carry,
and experience.log, every acknowledged episode (`serve.experience_log`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

import numpy as np

from jaxrl_sys.runtime.checkpoint import Checkpointer
from jaxrl_sys.runtime.metrics import RunLogger
from jaxrl_sys.runtime.run_spec import ResolvedRun, read_run_record
from jaxrl_sys.serve.episodes import FinishedEpisode
from jaxrl_sys.serve.experience_log import ExperienceLog
from jaxrl_sys.serve.learner import ClientLearner, LearnerStatus, example_rollout
from jaxrl_sys.serve.loading import ServeError, build_program
from jaxrl_sys.serve.program import PolicyProgram, ServedRun, action_description


@dataclasses.dataclass
class LearningRun:
    """What `--learn` serves with: the served (exploring) policy, its learner, and where it
    writes. `attach(service)` makes each update publish to the service."""

    served: ServedRun
    learner: ClientLearner
    run_dir: Path
    checkpoint_every: int
    log: ExperienceLog
    _checkpointer: Optional[Checkpointer] = None
    _logger: Optional[RunLogger] = None
    _service: Any = None

    def add(self, episode: FinishedEpisode) -> None:
        """The server's sink: an ended episode, on disk before the server answers, then to
        the learner (nothing once it has learned its budget)."""
        if not self.learner.status.done:
            self.learner.add(self.log.append(episode), episode)

    def attach(self, service: Any) -> None:
        """Publish every update's actor parameters to `service`, log and checkpoint."""
        self._service = service
        service.learner = self.learner
        self._checkpointer = Checkpointer(self.run_dir)
        self._logger = RunLogger(self.run_dir, total_steps=self.learner.total_steps,
                                 progress=False)
        self.learner.on_update = self._on_update

    def _on_update(self, carry: Any, metrics: dict, status: LearnerStatus) -> None:
        fns, program = self.learner.fns, self.served.program
        self._service.publish(program.leaves_of(fns.actor_params(carry["agent_state"])))
        returns = status.recent_returns
        if returns:
            metrics.update(mean_return=float(np.mean(returns)), min_return=float(np.min(returns)),
                           max_return=float(np.max(returns)))
        metrics.update(episodes=status.episodes, updates=status.updates)
        self._logger.log(status.steps_learned, metrics)
        if status.done or status.updates % self.checkpoint_every == 0:
            self.save()

    def save(self) -> None:
        """Checkpoint the learner's carry after its latest update."""
        status = self.learner.status
        self._checkpointer.save(status.updates, self.learner.carry, status.record())

    def close(self) -> None:
        """Stop learning, write a last checkpoint (not after a fault: the last good one
        stays), close the files."""
        stopped = self.learner.stop()
        if self._checkpointer is not None:
            if stopped and self.learner.error is None and self.learner.status.updates and \
                    self._checkpointer.latest_chunk() != self.learner.status.updates:
                self.save()
            self._checkpointer.close()
        if self._logger is not None:
            self._logger.close()
        self.log.close()


def learning_program(resolved: ResolvedRun, agent: Any, max_batch: int) -> PolicyProgram:
    """The exploring program a learning server acts with, or ServeError if `resolved` cannot
    learn from clients (checked before its directory is made)."""
    if not resolved.host:
        raise ServeError(f"--learn needs the application's env as a host env name, e.g. "
                         f"gymnasium:{resolved.env_name}, for its spaces")
    return build_program(resolved, agent, max_batch, learning=True)


def learning_run(resolved: ResolvedRun, agent: Any, program: PolicyProgram, run_dir: Path,
                 checkpoint_every: int, carry: Any = None,
                 status: Optional[LearnerStatus] = None) -> LearningRun:
    """The learning server's run in `run_dir` (its run.json already written), acting with
    `program` (`learning_program`'s), from scratch or from a restored `carry` and `status`."""
    fns = resolved.module.host_fns(agent)
    learner = ClientLearner(fns, resolved.spec.seed, resolved.config.total_steps,
                            on_update=lambda *_: None, carry=carry)
    if status is not None:
        learner.status = status
    learner.compile(example_rollout(program, fns.rollout_steps, fns.num_envs))
    log = ExperienceLog(run_dir)
    # what the log holds that the checkpoint had not learned from (all of it without one)
    start = min((first for first, _ in learner.status.lanes), default=0)
    for index, episode in log.read(start):
        skip = learner.status.unlearned(index, episode.lane % fns.num_envs)
        if skip is not None:
            learner.add(index, episode, skip)
    leaves = program.leaves_of(fns.actor_params(learner.carry["agent_state"]))
    discrete, num_actions, action_shape = action_description(agent.spec)
    record = dict(read_run_record(run_dir), chunk=learner.status.updates, seed_index=0)
    served = ServedRun(program, leaves, record, program.obs_shape, str(program.obs_dtype),
                       discrete, num_actions, action_shape)
    return LearningRun(served, learner, Path(run_dir), checkpoint_every, log)
