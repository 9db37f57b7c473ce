"""The registry's and adapters' bad-input errors (one line each), in a module of their own so
that adapters raise them without importing the registry that imports them."""


class EnvParamError(ValueError):
    """An env parameter the env does not have; the message is one line."""


class UnknownEnvError(ValueError):
    """Raised for an env name that the registry cannot resolve; the message is one line."""


class UnsupportedEnvError(ValueError):
    """A Gymnasium env the host loop cannot run (its spaces); the message is one line."""


# errors that mean bad input (a name, a parameter): one line and exit code 2 in the commands
USER_ERRORS = (UnknownEnvError, EnvParamError, UnsupportedEnvError)
