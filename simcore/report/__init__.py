"""Reports: plots, tables and trace exports of simcore results."""
