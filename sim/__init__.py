"""failclosed.sim: the model in simulated time (SimPy), metrics, plots and simulations as jobs
(batch.py); its commands are failclosed.cli's."""
