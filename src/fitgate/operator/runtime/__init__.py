"""kopf runtime: the handlers, the webhook server, start-up and shutdown, RBAC, finalizers, managed webhooks."""
