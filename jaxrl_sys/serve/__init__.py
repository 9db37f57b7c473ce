"""Applications outside the process: a policy server and its client (RLlib's
PolicyServerInput and PolicyClient, done as this system does everything: one compiled `act`).

    program   the served policy as one compiled function of the state leaves it reads, the
              same on the server and in a local-inference client
    codec     request and response bodies: JSON for people, msgpack with raw array bytes for speed
    episodes  the open episodes: their ids, recurrent memory, returns and idle time
    batcher   concurrent `act` requests gathered into one device call
    stats     request counts, batch sizes and latency for the metrics endpoint
    app       the HTTP application (Starlette): routes, token, body limit
    client    `PolicyClient`: remote inference, or local with a refreshed copy of the parameters
    process   `jaxrl-serve` started in a process of its own on a free port (scripts, tests)

The caller hands the agents and envs in (`jaxrl_sys.commands.serve`, `jaxrl_sys.client`).
"""
