"""API types: the ModelDeployment CRD model, its generator and the operator's configuration."""
