"""SAC's policy distribution: a Gaussian squashed by tanh into [-1, 1] and its exact
log-density, the off-policy actor-critic family's (`families.soft_actor`)."""

from jaxrl_sys.agents.families.soft_actor import (  # noqa: F401  (SAC's distribution)
    tanh_gaussian_log_prob, tanh_gaussian_sample, tanh_log_det_jacobian,
)

__all__ = ["tanh_gaussian_log_prob", "tanh_gaussian_sample", "tanh_log_det_jacobian"]
