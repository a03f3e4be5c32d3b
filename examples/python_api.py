# %% [markdown]
# # hwnas from Python, the way an Optuna user works
#
# A notebook-style script (cells marked `# %%`: open it in Jupyter or VS Code, or run it whole):
# start a run from a dict, extend it twice, read its trials as a dataframe, draw four figures, export the front.
# It searches NAS-Bench-201 priced by the published tables (no training, no measurement): it needs the published
# data (`../shared/data`, or `--data DIR`) and the extras `pip install "hwnas[pandas,plotly]"`.
#
#     python examples/python_api.py                       # 48 trials, extended to 60 then 72
#     python examples/python_api.py --trials 16 --out /tmp/api-example

# %%
from __future__ import annotations

import argparse
from pathlib import Path

import hwnas
from hwnas import visualization as vis

REPO = Path(__file__).resolve().parents[1]
parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"), help="the published benchmark data")
parser.add_argument("--out", default="runs/python-api", help="where the run and the figures go")
parser.add_argument("--trials", type=int, default=48, help="the first budget (each extension adds a quarter)")
parser.add_argument("--no-export", action="store_true", help="skip exporting the front (torch and onnx)")
args, _ = parser.parse_known_args()  # known only: a notebook kernel passes its own arguments
data, out = Path(args.data), Path(args.out)

# %% [markdown]
# ## 1. A run from a dict
# The same keys as an experiment file, validated the same way: a wrong key or type is one error naming its key path
# (`config: budget.trials: Input should be a valid integer`).

# %%
config = {
    "name": "nb201-pixel3",
    "seed": 0,
    "space": {"name": "nb201"},
    "evaluators": [
        {"name": "benchmark", "params": {"table": str(data / "help-latency" / "nb201_latency.csv"),
                                         "columns": {"latency_ms@pixel3": "pixel3"}}},
        {"name": "benchmark", "params": {"table": str(data / "nas-bench-201" / "nb201_accuracy.csv"),
                                         "columns": {"top1": "cifar10_test_200ep"}, "cheap": False}},
    ],
    "objectives": [{"metric": "top1", "direction": "max"},
                   {"metric": "latency_ms@pixel3", "direction": "min", "reference": 40}],
    "strategy": {"name": "evolution", "params": {"population_size": 16, "sample_size": 4}},
    "budget": {"trials": args.trials, "batch_size": 8},
    "export": {"enabled": False},
    "output": {"root": str(out)},
}
study = hwnas.create_run(config)
print("run directory:", study.run_dir)

# %% [markdown]
# ## 2. Search, then extend twice
# `optimize()` runs to the budget; `optimize(n_trials=k)` raises it by k. The journal is reused: nothing evaluated
# is evaluated again, and the trials are those a fresh run with the larger budget would have had.
# A callback sees every new trial (here it counts them; `study.stop()` would end the search early).

# %%
new_trials: list[int] = []
first = study.optimize(callbacks=[lambda s, trial: new_trials.append(trial.number)], show_progress=False)
print(f"first session: {first.evaluated} evaluated")
for extra in (args.trials // 4, args.trials // 4):
    result = study.optimize(n_trials=extra, callbacks=[lambda s, trial: new_trials.append(trial.number)],
                            show_progress=False)
    print(f"extended to {study.budget}: {result.evaluated} evaluated, {result.reused} reused from the journal")
assert new_trials == list(range(study.budget)), "each trial was evaluated once"

# %% [markdown]
# ## 3. The trials as a dataframe, the front, the summary

# %%
df = study.trials_dataframe()
print(df[["number", "status", "on_front", "top1", "latency_ms@pixel3"]].head())
print(f"{len(study.best_trials)} on the front; hypervolume {study.summary.hypervolume:.4g}")
print(study.report())

# %% [markdown]
# ## 4. Four figures (shown inline in a notebook; written here as standalone HTML that opens without network)

# %%
figures = {
    "front": vis.plot_front(study),
    "hypervolume": vis.plot_hypervolume_history(study),
    "parallel": vis.plot_parallel_coordinate(study),
    "importance": vis.plot_gene_importance(study),
}
for name, fig in figures.items():
    print("wrote", vis.write_html(fig, out / f"{name}.html"))

# %% [markdown]
# ## 5. Export the front
# The table-priced search kept no weights: the models are exported with their seeded initialisation (the cards say
# so), as ONNX files with a model card each, in RUN_DIR/models (`nas export RUN_DIR` does the same).

# %%
if not args.no_export:
    cards = study.export(formats="onnx", random_init=True, measure=False, simplify=False)
    print(f"exported {len(cards)} models to {study.run_dir / 'models'}")
