"""Calibration: compute profiles (fitted efficiency curves per device) and the fitters that
produce them from micro-benchmark traces (:mod:`simcore.calibration.fit_compute`)."""
