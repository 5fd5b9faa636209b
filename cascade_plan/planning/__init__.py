"""Planning at run time from a calibration: which parameters a command uses, the verdict with its evidence and
error bars, the kernels' measured error. calibration/ (below) fits, validates and imports; this layer reads."""
