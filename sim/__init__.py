"""failclosed.sim: the model in simulated time (SimPy), metrics, plots and the command line."""
