"""Observation: running pods, their vLLM logs and metrics, the workload audit and PolicyReports."""
