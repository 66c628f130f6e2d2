"""An independent reference for `bench/run diloco`: the same GPT, data order, initialisation and
schedule as longhaul-train, with M replicas simulated in one PyTorch process, and every method's
outer loop written from the equations of docs/training.md (not from src/sync).

Modules: corpus (the training data and its order), model (initialisation, replicas, validation),
outer (the outer rules), methods (data-parallel, DiLoCo, Streaming DiLoCo, CO2, eager), rounds
(the exact check of the outer rules against longhaul's dumped rounds), grid (--grid), run (CLI).
"""
