"""Communication cost models: cluster topologies, collective algorithms, flow-level link sharing."""
