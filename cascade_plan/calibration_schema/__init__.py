"""The calibration file's schema: every type of the file, one module per subject, shared by the probe (the writer,
kernels_probe/calibration_file.py) and the planner (the reader, calibration/calibration_file.py). A leaf package:
msgspec and the standard library only, nothing of cascade_plan above the top level (tests/test_layers.py), so that
kernels_probe can import it without the planner.

Modules, lowest first: `quantities` (number types and bounds), `device` (the GPU and its ceilings), `attention`
(attention configs, measured and skipped rows), `mla`, `steps` (op-level rows and whole steps), `kernel_fit` (one
fitted kernel and one backend's fits), `step_parts` (the rest of the step, fitted), `speedup_errors`, `fitted` (the
section `calibrate` writes), `imported` (what an AIConfigurator import adds), `grid`, `document` (the version, its
history, and the whole file as the planner reads it) and `probe_rows` (the file as the probe writes it, every field
declared).

Strictness: the `fitted` section is what the planner computes with, so every struct under it forbids unknown fields
(a misspelt or extra key is one error line, not a TypeError downstream), and every number is typed, its range an
annotation (a string in a surface is refused here, not in numpy). So does an attention or MLA row's `config`.
The reader's row structs type the fields the planner reads and ignore the rest (timing details, launch plans,
tuning), so that files of older probes and imports still read; the writer's (probe_rows.py) declare every
field the probe writes and refuse any other. Fields are declared in the order the probe writes them: a row's
`config` converted back to plain data (msgspec.to_builtins) is the dict the file holds, key order included (the
hold-out hash and `validate`'s JSON rely on it).

A new field of the file goes into the struct of its subject with a default, so older files still read: a fitted
per-kernel parameter into kernel_fit.KernelFit, a new kernel kind into kernel_fit.BackendFit, the rest of the step
into step_parts.py, a measured row's field into its row struct (and its probe_rows.py writer form), a new section
into document.CalibrationDoc (and probe_rows.ProbeDocument where the probe writes it).
"""
