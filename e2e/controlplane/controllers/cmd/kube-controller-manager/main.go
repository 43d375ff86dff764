// Command kube-controller-manager is the upstream Kubernetes controller manager (ReplicaSets from
// Deployments, Pods from ReplicaSets and StatefulSets, garbage collection), built from Go modules for
// fitgate's e2e scheduling cluster; k8s.io/kubernetes' own cmd/kube-controller-manager/controller-manager.go
// is this call.
package main

import (
	"os"
	_ "time/tzdata" // for CronJob time zones, as upstream

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() { os.Exit(cli.Run(app.NewControllerManagerCommand())) }
