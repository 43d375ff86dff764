// Command kube-scheduler is the upstream Kubernetes scheduler, built from Go modules for fitgate's e2e
// scheduling cluster; k8s.io/kubernetes' own cmd/kube-scheduler/scheduler.go is this call.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() { os.Exit(cli.Run(app.NewSchedulerCommand())) }
