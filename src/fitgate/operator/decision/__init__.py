"""Decision: verdicts from a spec, the facts store and the GPU inventory; the offline check."""
