"""MuZero with batched MCTS (mctx), for single-player envs and two-player zero-sum self-play.

The agent contract (`jaxrl_sys.core.types.AgentDef`) and the public functions of `muzero`:
config.py (hyper-parameters), defaults.py (per-env configs and learning promises),
networks.py, search.py (the tree and its model steps), targets.py (value and policy
targets), losses.py (the unrolled loss) and agent.py (binding, collection, the learner).
"""

from jaxrl_sys.agents.muzero.agent import (
    DEFAULT_EVAL_EPISODES,
    SELF_PLAY,
    Agent,
    EnvState,
    State,
    build_optimizer,
    collect,
    greedy_action,
    init,
    init_env_state,
    learn,
    make,
    random_legal_actions,
    sample,
    update,
)
from jaxrl_sys.agents.muzero.config import (
    DEFAULT_ENV,
    MODELS,
    SEARCHES,
    TORSOS,
    Config,
    temperature_at,
)
from jaxrl_sys.agents.muzero.defaults import PROMISES, TUNED, default_config
from jaxrl_sys.agents.muzero.losses import (
    PredictionLosses,
    Unroll,
    categorical_cross_entropy,
    consistency_loss,
    muzero_loss,
    prediction_losses,
    rules_loss,
    unroll_model,
    unroll_step_weights,
)
from jaxrl_sys.agents.muzero.networks import (
    RULE_LOGIT_CERTAIN,
    ConvTorso,
    MuZeroNetwork,
    ResidualBlock,
    build_network,
    normalize_latent,
    observation_values,
    predict_scalar,
    represent_predict,
    scale_gradient,
    supports,
)
from jaxrl_sys.agents.muzero.search import (
    NO_PRIOR,
    SearchOutput,
    TreeNode,
    absorbing_output,
    bind_recurrent_fn,
    env_recurrent_fn,
    gumbel_qtransform,
    learned_recurrent_fn,
    ruled_recurrent_fn,
    run_search,
    search_actions,
    search_rows,
)
from jaxrl_sys.agents.muzero.targets import (
    Batch,
    bootstrapped_value_targets,
    reanalysed_policies,
    unroll_masks,
    unroll_value_targets,
)

__all__ = [
    # the agent contract
    'DEFAULT_ENV',
    'DEFAULT_EVAL_EPISODES',
    'SELF_PLAY',
    'PROMISES',
    'Config',
    'default_config',
    'make',
    'greedy_action',
    # config and defaults
    'SEARCHES',
    'MODELS',
    'TORSOS',
    'TUNED',
    'temperature_at',
    # networks
    'scale_gradient',
    'normalize_latent',
    'ResidualBlock',
    'ConvTorso',
    'RULE_LOGIT_CERTAIN',
    'MuZeroNetwork',
    'build_network',
    'supports',
    'represent_predict',
    'predict_scalar',
    'observation_values',
    # search
    'TreeNode',
    'NO_PRIOR',
    'SearchOutput',
    'absorbing_output',
    'learned_recurrent_fn',
    'ruled_recurrent_fn',
    'env_recurrent_fn',
    'bind_recurrent_fn',
    'gumbel_qtransform',
    'run_search',
    'search_actions',
    'search_rows',
    # targets and losses
    'Batch',
    'unroll_masks',
    'unroll_value_targets',
    'bootstrapped_value_targets',
    'reanalysed_policies',
    'Unroll',
    'unroll_step_weights',
    'unroll_model',
    'rules_loss',
    'categorical_cross_entropy',
    'consistency_loss',
    'PredictionLosses',
    'prediction_losses',
    'muzero_loss',
    # state, collection and the learner
    'State',
    'EnvState',
    'Agent',
    'build_optimizer',
    'init',
    'init_env_state',
    'random_legal_actions',
    'collect',
    'update',
    'sample',
    'learn',
]
