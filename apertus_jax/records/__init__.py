"""A run's records: what the loop's hooks write into its workdir, and how jobs read them back (docs/outputs.md).

- `config_record`: `config.json`, the config the run trained with (`ConfigRecord`);
- `provenance`: `provenance.json`, the data the run trained on, and the model card (`ProvenanceRecord`);
- `probe_manifest`: `probes.json`, the injected documents seen (`ProbeManifest`);
- `loss_plot`: `loss.png`, the loss curve (`LossPlot`);
- `runs`: a workdir read back: that it exists, its metrics and planned steps (`load_runs`).
"""
