"""The run machinery: RunSpec, Session, the device and host loops, placement, sweeps,
checkpoints, metrics, the command-line plumbing and many-host set-up."""
