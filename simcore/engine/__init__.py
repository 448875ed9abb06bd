"""Execution engines: the analytic (closed-form, vectorised) engine, the discrete-event engine and pipeline schedules."""
