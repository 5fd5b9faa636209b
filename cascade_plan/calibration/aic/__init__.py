"""Calibrations from NVIDIA AIConfigurator's measured tables: reading them (tables), fitting them (fit),
building the file (importer, with the cascade kernels transferred from the probe: transfer), its decode rows
(rows), and checks against the probe (crosscheck) and AIConfigurator's own estimator (estimates)."""
