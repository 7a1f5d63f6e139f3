"""`make demo` (`python -m hack.demo`): the controller against the simulator on a local control plane, in scenes.
`__main__` runs them in order; each later scene lives in its own module (storage, fencing, failover)."""
