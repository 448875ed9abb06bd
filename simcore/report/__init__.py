"""Reports: plots, tables and trace exports of simcore results, drawn from the data studies and cost
models return. The only package that imports matplotlib (``plots``: op roofline, collective busbw,
serving, sweeps; ``validation_plots``: the accuracy reports; ``topology_plot``; ``chrome_trace``)."""
