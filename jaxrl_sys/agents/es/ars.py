"""Augmented Random Search (Mania et al. 2018, V2-t), the `ars` agent: ES's contract (this
package) with evosax's ARS and its settings (`defaults.ARS`): a linear policy on observations
standardised by running statistics, antithetic directions of which the top `top_fraction`
pairs by their better return make each step, scaled by those returns' standard deviation."""

from jaxrl_sys.agents.es import *  # noqa: F403 (ES's agent contract, all of it)
from jaxrl_sys.agents.es import __all__  # noqa: F401 (the same names)
from jaxrl_sys.agents.es.defaults import ars_config as default_config
from jaxrl_sys.agents.es.defaults import ARS_TUNED as TUNED  # noqa: F401
from jaxrl_sys.agents.es.defaults import ARS_PROMISES as PROMISES  # noqa: F401
