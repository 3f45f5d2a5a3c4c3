"""cerea_kernel -- the Python half of the cerea-sandbox kernel, loaded into Pyodide by worker/core.js.

One module per job: ``output`` (block-buffered stdout/stderr whose bytes reach the worker's capped
sink, flushed live at the controller's signal), ``mounts`` (/mnt/data from a manifest), ``outputs_diff`` (which files of /mnt/output a run
created or changed), ``figures`` (matplotlib capture: plt.show() and the end-of-run sweep),
``imports`` (what to load for a run's imports, notes for packages this deployment lacks),
``lockdown`` (Python-side network refusals), ``values`` (MIME bundles of values and display()),
``waits`` (time.sleep and input() that a Stop ends at once), ``execute`` (compile and run a cell in
the chat's persistent namespace, its value, error formatting) and ``runner`` (the entry points the
worker calls, in the order of a run).  Nothing here talks to the network or to the page: the worker (JS) moves bytes
and messages, this package decides what happens inside the interpreter.
"""
